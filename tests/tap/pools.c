/* A pool the program destroys is never queried again: the sampler adds up the pools allocated
 * from, and on NVIDIA's driver a destroyed pool's handle is freed memory (the stand-in says so
 * on stderr when asked). A new peak after the destroy takes a sample. */
#include <cuda_runtime_api.h>
#include <string.h>

#include "check.h"

int main(void)
{
    cudaMemPool_t pool;
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    CHECK_EQ_INT(cudaMemPoolCreate(&pool, &props), cudaSuccess);
    void *p, *q;
    CHECK_EQ_INT(cudaMallocFromPoolAsync(&p, 1 << 20, pool, 0), cudaSuccess);
    CHECK_EQ_INT(cudaFreeAsync(p, 0), cudaSuccess);
    CHECK_EQ_INT(cudaMemPoolDestroy(pool), cudaSuccess);
    CHECK_EQ_INT(cudaMallocAsync(&q, 4 << 20, 0), cudaSuccess);
    printf("EXPECT peak 0 %d\nEXPECT at_peak 0 %p %d cudaMallocAsync\n", 4 << 20, q, 4 << 20);
    printf("EXPECT stderr not.live 0\nEXPECT json bounds.pools {\"cap\": 8, \"dropped\": 0}\n");
    /* The pool was allocated from, then destroyed: the new peak's sample reads the default
     * pool alone, which holds the 4 MiB. */
    printf("EXPECT device 0 reserved.source pool\n");
    return CHECK_DONE();
}
