/* Lookups made from inside libcuda are never redirected; the same lookup from the program is. */
#include <dlfcn.h>

#include "check.h"

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
    void *self = argc == 2 ? dlopen(argv[1], RTLD_NOW) : NULL;
    CHECK(cuda && self);
    if (!cuda || !self)
        return CHECK_DONE();
    void *(*self_lookup)(void *, const char *) =
        (void *(*)(void *, const char *))dlsym(self, "self_lookup");
    void *wrapper = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
    void *from_program = dlsym(cuda, "cuMemAlloc_v2");
    void *from_libcuda = self_lookup(cuda, "cuMemAlloc_v2");
    CHECK(from_program == wrapper);
    CHECK(from_libcuda != NULL && from_libcuda != wrapper);
    Dl_info info;
    CHECK(dladdr(from_libcuda, &info) && strstr(info.dli_fname, "standin"));
    printf("EXPECT no_snapshot\n");
    return CHECK_DONE();
}
