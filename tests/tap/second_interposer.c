/* Another interposer loaded after vramtap, as a second profiler would be: its own cudaMalloc
 * finds the next one with dlsym(RTLD_NEXT). If vramtap's dlsym resolved RTLD_NEXT relative to
 * itself, this would find its own cudaMalloc again and recurse forever. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>

int second_calls;

cudaError_t cudaMalloc(void **p, size_t size)
{
    cudaError_t (*next)(void **, size_t) =
        (cudaError_t(*)(void **, size_t))dlsym(RTLD_NEXT, "cudaMalloc");
    second_calls++;
    return next ? next(p, size) : cudaErrorUnknown;
}

void *second_next(const char *name)
{
    /* Not a tail call: glibc judges RTLD_NEXT by the return address of dlsym's caller. */
    void *volatile p = dlsym(RTLD_NEXT, name);
    return p;
}
