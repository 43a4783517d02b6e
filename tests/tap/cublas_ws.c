/* Stands for a library whose own allocations are workspaces: its file name starts with
 * "libcublas", which the reporter's list of library workspaces names. */
#include <cuda_runtime_api.h>

void *cublas_ws_alloc(size_t size);

__attribute__((noinline)) void *cublas_ws_alloc(size_t size)
{
    void *p = NULL;
    if (cudaMalloc(&p, size) != cudaSuccess)
        return NULL;
    __asm__ volatile("" ::: "memory"); /* not a tail call: this library's frame stays */
    return p;
}
