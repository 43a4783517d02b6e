/* The three levels of the report come from the driver: device name and capacity, device used
 * (context and all), and the stream-ordered pool's reserved high-water mark. The program asks
 * the stand-in the same questions at its peak and prints the answers vramtap must have kept.
 * Runs with STANDIN_CONTEXT_BYTES set, so device used exceeds what the tensors hold. */
#include <cuda_runtime_api.h>

#include "check.h"

int main(void)
{
    void *p[4];
    size_t sizes[4] = {3 << 20, 5 << 20, 1 << 20, 7 << 20};
    unsigned long long live = 0;
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_INT(cudaMallocAsync(&p[i], sizes[i], 0), cudaSuccess);
        live += sizes[i];
    }
    /* The peak is the last allocation: what the driver says now is what it said then. */
    size_t free_b, total_b;
    CHECK_EQ_INT(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
    cudaMemPool_t pool;
    CHECK_EQ_INT(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
    unsigned long long reserved_high = 0;
    CHECK_EQ_INT(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &reserved_high),
                 cudaSuccess);
    for (int i = 0; i < 4; i++)
        CHECK_EQ_INT(cudaFreeAsync(p[i], 0), cudaSuccess);

    char name[64];
    snprintf(name, sizeof name, "Stand-in GPU 0");
    printf("EXPECT peak 0 %llu\n", live);
    printf("EXPECT device 0 name %s\n", name);
    printf("EXPECT device 0 total_bytes %zu\n", total_b);
    printf("EXPECT device 0 used_at_peak_bytes %zu\n", total_b - free_b);
    printf("EXPECT device 0 reserved.source pool\n");
    printf("EXPECT device 0 reserved.peak_bytes %llu\n", reserved_high);
    return CHECK_DONE();
}
