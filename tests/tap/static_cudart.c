/* A program linked with NVIDIA's static runtime (nvcc's default): its cudaMalloc is its own,
 * invisible to any preload, and reaches the driver only through dlopen + cuGetProcAddress_v2.
 * Over the stand-in driver, every memory entry point it looks up must be vramtap's. Its
 * cudaMalloc then fails (the stand-in has no private export table): expected. */
#include <cuda_runtime_api.h>

#include "check.h"
#include "cudart_lookups.h"

int main(void)
{
    void *p = NULL;
    CHECK(cudaMalloc(&p, 1024) != cudaSuccess);
    expect_cudart_lookups();
    printf("EXPECT no_snapshot\n");
    return CHECK_DONE();
}
