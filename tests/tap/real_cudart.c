/* NVIDIA's own libcudart.so.13 over the stand-in driver: every memory entry point it looks up
 * through cuGetProcAddress_v2 must come back as vramtap's wrapper. Its cudaMalloc then fails
 * (the stand-in has no private export table); that is expected and not the point. */
#include <dlfcn.h>

#include "check.h"
#include "cudart_lookups.h"

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/usr/local/cuda/lib64/libcudart.so.13";
    void *rt = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!rt) {
        fprintf(stderr, "skipping: %s\n", dlerror());
        return 77;
    }
    int (*cuda_malloc)(void **, size_t) = (int (*)(void **, size_t))dlsym(rt, "cudaMalloc");
    CHECK(cuda_malloc != NULL);
    void *p = NULL;
    int rc = cuda_malloc ? cuda_malloc(&p, 1024) : -1;
    CHECK(rc != 0);
    expect_cudart_lookups();
    printf("EXPECT no_snapshot\n");
    return CHECK_DONE();
}
