/* A library whose constructor allocates a static workspace and whose destructor frees it, as
 * some CUDA libraries do: its allocation is made with the dynamic loader's lock held. */
#include <cuda_runtime_api.h>

static void *workspace;

__attribute__((constructor)) static void grab(void)
{
    if (cudaMalloc(&workspace, 4096) != cudaSuccess)
        workspace = 0;
}

__attribute__((destructor)) static void release(void)
{
    if (workspace)
        cudaFree(workspace);
}
