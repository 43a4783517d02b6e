/* Memory pools: used bytes are the live allocations, reserved bytes follow in 2 MiB granules and
 * shrink only through cuMemPoolTrimTo; the device is charged the reservation. */
#include "check.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#define MiB ((size_t)1 << 20)

cudaError_t cudaMallocAsync_ptsz(void **ptr, size_t size, cudaStream_t stream);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream stream);
cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t pool,
                                         cudaStream_t stream);

static unsigned long long attr(cudaMemPool_t pool, enum cudaMemPoolAttr which)
{
    cuuint64_t v = 12345;
    CHECK_EQ_INT(cudaMemPoolGetAttribute(pool, which, &v), cudaSuccess);
    return v;
}

#define CHECK_POOL(pool, used, used_high, reserved, reserved_high)                                 \
    do {                                                                                           \
        CHECK_EQ_INT(attr(pool, cudaMemPoolAttrUsedMemCurrent), used);                             \
        CHECK_EQ_INT(attr(pool, cudaMemPoolAttrUsedMemHigh), used_high);                           \
        CHECK_EQ_INT(attr(pool, cudaMemPoolAttrReservedMemCurrent), reserved);                     \
        CHECK_EQ_INT(attr(pool, cudaMemPoolAttrReservedMemHigh), reserved_high);                   \
    } while (0)

static size_t used_on(int device)
{
    size_t free = 0, total = 0;
    CHECK_EQ_INT(cudaSetDevice(device), cudaSuccess);
    CHECK_EQ_INT(cudaMemGetInfo(&free, &total), cudaSuccess);
    CHECK_EQ_INT(cudaSetDevice(0), cudaSuccess);
    return total - free;
}

int main(void)
{
    cudaMemPool_t pool, current;
    CHECK_EQ_INT(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
    CHECK_EQ_INT(cuDeviceGetMemPool(&current, 0), CUDA_SUCCESS);
    CHECK(pool == current);
    CHECK_POOL(pool, 0, 0, 0, 0);

    void *a, *b;
    CHECK_EQ_INT(cudaMallocAsync(&a, 1 * MiB, 0), cudaSuccess);
    CHECK_POOL(pool, 1 * MiB, 1 * MiB, 2 * MiB, 2 * MiB);
    CHECK_EQ_INT(cudaMallocAsync_ptsz(&b, 1536 * 1024, 0), cudaSuccess);
    CHECK_POOL(pool, 2560 * 1024, 2560 * 1024, 4 * MiB, 4 * MiB);
    CHECK_EQ_INT(used_on(0), 4 * MiB);
    CUdeviceptr c;
    CHECK_EQ_INT(cuMemAllocAsync_ptsz(&c, 512 * 1024, CU_STREAM_PER_THREAD), CUDA_SUCCESS);
    CHECK_POOL(pool, 3 * MiB, 3 * MiB, 4 * MiB, 4 * MiB);
    CHECK_EQ_INT(cuMemFreeAsync(c, NULL), CUDA_SUCCESS);

    /* Freed memory stays reserved. */
    CHECK_EQ_INT(cudaFreeAsync(a, 0), cudaSuccess);
    CHECK_POOL(pool, 1536 * 1024, 3 * MiB, 4 * MiB, 4 * MiB);
    CHECK_EQ_INT(used_on(0), 4 * MiB);

    /* High-water marks accept only 0, which resets them; current figures are read-only. */
    cuuint64_t zero = 0, five = 5;
    CHECK_EQ_INT(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero), cudaSuccess);
    CHECK_EQ_INT(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &five),
                 cudaErrorInvalidValue);
    CHECK_EQ_INT(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &zero),
                 cudaErrorInvalidValue);
    CHECK_EQ_INT(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &zero),
                 cudaErrorInvalidValue);
    CHECK_POOL(pool, 1536 * 1024, 1536 * 1024, 4 * MiB, 4 * MiB);
    cuuint64_t threshold = 64 * MiB;
    CHECK_EQ_INT(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold),
                 cudaSuccess);
    CHECK_EQ_INT(attr(pool, cudaMemPoolAttrReleaseThreshold), 64 * MiB);
    int reuse = 0;
    CHECK_EQ_INT(cudaMemPoolGetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &reuse),
                 cudaSuccess);
    CHECK_EQ_INT(reuse, 1);

    /* Trimming keeps what live allocations need, in whole granules. */
    CHECK_EQ_INT(cudaMemPoolTrimTo(pool, 0), cudaSuccess);
    CHECK_POOL(pool, 1536 * 1024, 1536 * 1024, 2 * MiB, 4 * MiB);
    CHECK_EQ_INT(used_on(0), 2 * MiB);
    CHECK_EQ_INT(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero), cudaSuccess);
    CHECK_POOL(pool, 1536 * 1024, 1536 * 1024, 2 * MiB, 2 * MiB);
    CHECK_EQ_INT(cudaFreeAsync(b, 0), cudaSuccess);
    CHECK_EQ_INT(cudaMemPoolTrimTo(pool, 3 * MiB), cudaSuccess); /* keeps at least 3 MiB */
    CHECK_POOL(pool, 0, 1536 * 1024, 2 * MiB, 2 * MiB);
    CHECK_EQ_INT(cudaMemPoolTrimTo(pool, 1), cudaSuccess);
    CHECK_POOL(pool, 0, 1536 * 1024, 2 * MiB, 2 * MiB);
    CHECK_EQ_INT(cudaMemPoolTrimTo(pool, 0), cudaSuccess);
    CHECK_POOL(pool, 0, 1536 * 1024, 0, 2 * MiB);
    CHECK_EQ_INT(used_on(0), 0);

    /* A pool of device 1, used from a stream of device 0: the memory is device 1's. */
    struct cudaMemPoolProps props = {.allocType = cudaMemAllocationTypePinned,
                                     .location = {.type = cudaMemLocationTypeDevice, .id = 1}};
    cudaMemPool_t mine;
    CHECK_EQ_INT(cudaMemPoolCreate(&mine, &props), cudaSuccess);
    CHECK(mine != pool);
    CHECK_EQ_INT(cudaMallocFromPoolAsync(&a, 3 * MiB, mine, 0), cudaSuccess);
    CHECK_EQ_INT(cudaMallocFromPoolAsync_ptsz(&b, 100, mine, 0), cudaSuccess);
    struct cudaPointerAttributes pa;
    CHECK_EQ_INT(cudaPointerGetAttributes(&pa, a), cudaSuccess);
    CHECK_EQ_INT(pa.device, 1);
    CUmemoryPool from = NULL;
    CHECK_EQ_INT(cuPointerGetAttribute(&from, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, (CUdeviceptr)b),
                 CUDA_SUCCESS);
    CHECK(from == mine);
    CHECK_EQ_INT(used_on(1), 4 * MiB);
    CHECK_EQ_INT(used_on(0), 0);
    CHECK_POOL(mine, 3 * MiB + 100, 3 * MiB + 100, 4 * MiB, 4 * MiB);

    /* Destroyed with allocations outstanding, it lives until the last of them is freed. */
    CHECK_EQ_INT(cudaMemPoolDestroy(mine), cudaSuccess);
    void *gone;
    CHECK_EQ_INT(cudaMallocFromPoolAsync(&gone, 100, mine, 0), cudaErrorInvalidValue);
    CHECK_EQ_INT(cudaMemPoolDestroy(mine), cudaErrorInvalidValue);
    CHECK_EQ_INT(cudaFreeAsync(a, 0), cudaSuccess);
    CHECK_EQ_INT(used_on(1), 4 * MiB);
    CHECK_EQ_INT(cudaFree(b), cudaSuccess);
    CHECK_EQ_INT(used_on(1), 0);

    /* The default pool cannot be destroyed; bad pool properties are refused. */
    CHECK_EQ_INT(cudaMemPoolDestroy(pool), cudaErrorInvalidValue);
    props.location.id = 7;
    CHECK_EQ_INT(cudaMemPoolCreate(&mine, &props), cudaErrorInvalidDevice);
    props.location.id = 0;
    props.allocType = cudaMemAllocationTypeInvalid;
    CHECK_EQ_INT(cudaMemPoolCreate(&mine, &props), cudaErrorInvalidValue);
    return CHECK_DONE();
}
