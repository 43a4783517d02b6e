/* Tensor mode: the constructor's settings are visible to the program, a user's own setting is
 * left alone (and the snapshot says native), VRAMTAP_MODE=tensor replaces it; the pool's
 * figures reach the snapshot, and allocations from a created pool count per tensor.
 *
 *   modes EXPECTED_PYTORCH_CUDA_ALLOC_CONF|- MODE REASON */
#include <cuda_runtime_api.h>
#include <stdlib.h>

#include "check.h"

int main(int argc, char **argv)
{
    CHECK_EQ_INT(argc, 4);
    if (argc != 4)
        return CHECK_DONE();
    /* "-": unset. The other frameworks' variables were never preset by the test. */
    int unset = !strcmp(argv[1], "-");
    const char *conf = getenv("PYTORCH_CUDA_ALLOC_CONF");
    CHECK(unset ? conf == NULL : conf && !strcmp(conf, argv[1]));
    int forced_native = !strcmp(argv[3], "forced") && !strcmp(argv[2], "native");
    const char *tf = getenv("TF_GPU_ALLOCATOR");
    CHECK(forced_native ? tf == NULL : tf && !strcmp(tf, "cuda_malloc_async"));
    int ours = !strcmp(argv[2], "tensor");
    printf("EXPECT mode pytorch %s %s\n", argv[2], argv[3]);
    printf("EXPECT env_set PYTORCH_CUDA_ALLOC_CONF %s\n", ours ? argv[1] : "-");

    cudaMemPool_t pool;
    struct cudaMemPoolProps props = {.allocType = cudaMemAllocationTypePinned,
                                     .location = {.type = cudaMemLocationTypeDevice, .id = 0}};
    CHECK_EQ_INT(cudaMemPoolCreate(&pool, &props), cudaSuccess);
    void *t[3];
    size_t sizes[3] = {3 << 20, 1 << 20, 6 << 20};
    unsigned long long live = 0;
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(cudaMallocFromPoolAsync(&t[i], sizes[i], pool, 0), cudaSuccess);
        printf("EXPECT at_peak 0 %p %zu cudaMallocFromPoolAsync\n", t[i], sizes[i]);
        live += sizes[i];
    }
    unsigned long long reserved = 0;
    CHECK_EQ_INT(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &reserved),
                 cudaSuccess);
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(cudaFreeAsync(t[i], 0), cudaSuccess);
    printf("EXPECT peak 0 %llu\nEXPECT device 0 reserved.peak_bytes %llu\n", live, reserved);
    return CHECK_DONE();
}
