/* Device used (cuMemGetInfo) answers for the current device only: an allocation on a stream of
 * device 1, made while device 0 is current, must leave device 1 without a sample rather than
 * with device 0's figures, and device 0's must stay its own. */
#include <cuda_runtime_api.h>

#include "check.h"

int main(void)
{
    cudaStream_t s1;
    CHECK_EQ_INT(cudaSetDevice(1), cudaSuccess);
    CHECK_EQ_INT(cudaStreamCreate(&s1), cudaSuccess);
    CHECK_EQ_INT(cudaSetDevice(0), cudaSuccess);

    void *a, *b;
    CHECK_EQ_INT(cudaMallocAsync(&a, 3 << 20, 0), cudaSuccess);
    size_t free0, total0;
    CHECK_EQ_INT(cudaMemGetInfo(&free0, &total0), cudaSuccess);
    CHECK_EQ_INT(cudaMallocAsync(&b, 5 << 20, s1), cudaSuccess);

    printf("EXPECT peak 0 %d\nEXPECT peak 1 %d\n", 3 << 20, 5 << 20);
    printf("EXPECT device 0 used_at_peak_bytes %zu\n", total0 - free0);
    printf("EXPECT json devices.1.device 1\n");
    printf("EXPECT json devices.1.used_at_peak_bytes null\n");
    printf("EXPECT json devices.1.samples.length 0\n");
    CHECK_EQ_INT(cudaFreeAsync(b, s1), cudaSuccess);
    CHECK_EQ_INT(cudaFreeAsync(a, 0), cudaSuccess);
    CHECK_EQ_INT(cudaStreamDestroy(s1), cudaSuccess);
    return CHECK_DONE();
}
