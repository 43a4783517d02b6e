/* libvramtap.so loaded by dlopen, not preloaded: the program's environment is left as it is
 * (no allocator setting, no NVTX injection, no note of what vramtap set).
 * usage: tap_not_preloaded LIBVRAMTAP */
#include <dlfcn.h>
#include <stdlib.h>

#include "check.h"

int main(int argc, char **argv)
{
    static const char *const untouched[] = {
        "PYTORCH_CUDA_ALLOC_CONF", "XLA_PYTHON_CLIENT_ALLOCATOR", "XLA_PYTHON_CLIENT_PREALLOCATE",
        "TF_GPU_ALLOCATOR",        "NVTX_INJECTION64_PATH",       "VRAMTAP_ENV_SET"};
    CHECK_EQ_INT(argc, 2);
    for (size_t i = 0; i < sizeof untouched / sizeof untouched[0]; i++)
        unsetenv(untouched[i]);
    void *h = argc == 2 ? dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL) : NULL;
    CHECK(h != NULL);
    int (*loaded)(void) = h ? (int (*)(void))dlsym(h, "vramtap_is_loaded") : NULL;
    CHECK(loaded && loaded() == 1);
    for (size_t i = 0; i < sizeof untouched / sizeof untouched[0]; i++)
        if (getenv(untouched[i])) {
            fprintf(stderr, "%s=%s was set\n", untouched[i], getenv(untouched[i]));
            check_failures++;
        }
    return CHECK_DONE();
}
