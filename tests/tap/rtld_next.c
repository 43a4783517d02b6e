/* RTLD_NEXT keeps its meaning for every caller with vramtap's dlsym in place. Runs with
 * LD_PRELOAD=libvramtap.so:libsecond_interposer.so. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "check.h"

int main(void)
{
    int *calls = dlsym(RTLD_DEFAULT, "second_calls");
    void *(*second_next)(const char *) =
        (void *(*)(const char *))dlsym(RTLD_DEFAULT, "second_next");
    CHECK(calls && second_next);
    if (!calls || !second_next)
        return CHECK_DONE();
    void *cudart = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
    CHECK(cudart != NULL);
    /* Next after the second interposer is the runtime itself. */
    CHECK(second_next("cudaMalloc") == dlsym(cudart, "cudaMalloc"));
    void *p;
    CHECK_EQ_INT(cudaMalloc(&p, 3000), cudaSuccess);
    CHECK_EQ_INT(*calls, 1);
    printf("EXPECT at_peak 0 %p 3000 cudaMalloc\nEXPECT counter allocs 1\n", p);
    return CHECK_DONE();
}
