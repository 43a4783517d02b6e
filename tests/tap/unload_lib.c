/* A library that allocates and is unloaded before the snapshot is written. */
#include <cuda_runtime_api.h>

__attribute__((visibility("default"), noinline)) int unload_lib_alloc(void **p, size_t size)
{
    int rc = cudaMalloc(p, size);
    __asm__ volatile("" ::: "memory"); /* keeps this frame: no tail call */
    return rc;
}
