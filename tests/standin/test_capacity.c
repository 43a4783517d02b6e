/* STANDIN_CAPACITY makes allocations fail with the real out-of-memory codes at exact byte limits,
 * per device, at runtime and driver level; pinned host memory never counts. */
#include "check.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#define MiB ((size_t)1 << 20)
#define CAPACITY (8 * MiB)
#define CONTEXT (1 * MiB)
#define ROOM (CAPACITY - CONTEXT)

static size_t free_bytes(void)
{
    size_t free = 0, total = 0;
    CHECK_EQ_INT(cudaMemGetInfo(&free, &total), cudaSuccess);
    CHECK_EQ_INT(total, CAPACITY);
    return free;
}

int main(void)
{
    setenv("STANDIN_CAPACITY", "8388608", 1);
    setenv("STANDIN_CONTEXT_BYTES", "1048576", 1);

    CHECK_EQ_INT(free_bytes(), ROOM);
    size_t total = 0;
    CHECK_EQ_INT(cuDeviceTotalMem(&total, 0), CUDA_SUCCESS);
    CHECK_EQ_INT(total, CAPACITY);

    /* Runtime: one byte too many fails and leaves the pointer alone; exactly the room fits. */
    void *sentinel = (void *)0x5e47, *p = sentinel;
    CHECK_EQ_INT(cudaMalloc(&p, ROOM + 1), cudaErrorMemoryAllocation);
    CHECK(p == sentinel);
    CHECK_EQ_INT(cudaGetLastError(), cudaErrorMemoryAllocation);
    CHECK_EQ_INT(cudaGetLastError(), cudaSuccess);
    CHECK_EQ_STR(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory");
    CHECK_EQ_INT(cudaMalloc(&p, ROOM), cudaSuccess);
    CHECK_EQ_INT(free_bytes(), 0);
    void *q = sentinel;
    CHECK_EQ_INT(cudaMalloc(&q, 1), cudaErrorMemoryAllocation);
    CHECK_EQ_INT(cudaMallocManaged(&q, 1, cudaMemAttachGlobal), cudaErrorMemoryAllocation);
    CHECK_EQ_INT(cudaMallocAsync(&q, 1, 0), cudaErrorMemoryAllocation);
    CHECK(q == sentinel);

    /* Pinned host memory is real memory and never counts against the device. */
    char *host;
    CHECK_EQ_INT(cudaMallocHost((void **)&host, 2 * CAPACITY), cudaSuccess);
    host[0] = 1;
    host[2 * CAPACITY - 1] = 2;
    CHECK_EQ_INT(cudaFreeHost(host), cudaSuccess);
    CHECK_EQ_INT(cudaFree(p), cudaSuccess);
    CHECK_EQ_INT(free_bytes(), ROOM);

    /* Driver: the same limit, the driver's code. */
    CUdeviceptr d = 0x5e47;
    CHECK_EQ_INT(cuMemAlloc(&d, ROOM + 1), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ_INT(d, 0x5e47);
    const char *name = NULL;
    CHECK_EQ_INT(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &name), CUDA_SUCCESS);
    CHECK_EQ_STR(name, "CUDA_ERROR_OUT_OF_MEMORY");
    CHECK_EQ_INT(cuMemAlloc(&d, ROOM - 1000), CUDA_SUCCESS);
    CUdeviceptr d2;
    CHECK_EQ_INT(cuMemAlloc(&d2, 1000), CUDA_SUCCESS);
    CHECK_EQ_INT(cuMemAlloc(&d2, 1), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ_INT(cuMemFree(d), CUDA_SUCCESS);

    /* Pitched memory counts pitch x height: 1000-byte rows take 1024. */
    size_t pitch = 0;
    CHECK_EQ_INT(cuMemAllocPitch(&d, &pitch, 1000, ROOM / 1024, 4), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ_INT(cuMemAllocPitch(&d, &pitch, 1000, ROOM / 1024 - 1, 4), CUDA_SUCCESS);
    CHECK_EQ_INT(pitch, 1024);
    CHECK_EQ_INT(cuMemFree(d), CUDA_SUCCESS);
    CHECK_EQ_INT(cuMemFree(d2), CUDA_SUCCESS);

    /* Stream-ordered: the pool's reservation (2 MiB granules) is what the device is charged. */
    CHECK_EQ_INT(cudaMallocAsync(&p, 6 * MiB + 1, 0), cudaErrorMemoryAllocation);
    CHECK_EQ_INT(cudaMallocAsync(&p, 6 * MiB, 0), cudaSuccess);
    CHECK_EQ_INT(free_bytes(), 1 * MiB);
    CHECK_EQ_INT(cudaFreeAsync(p, 0), cudaSuccess);
    CHECK_EQ_INT(free_bytes(), 1 * MiB); /* the pool keeps its reservation */
    cudaMemPool_t pool;
    CHECK_EQ_INT(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
    CHECK_EQ_INT(cudaMemPoolTrimTo(pool, 0), cudaSuccess);
    CHECK_EQ_INT(free_bytes(), ROOM);

    /* Each device has its own capacity. */
    CHECK_EQ_INT(cudaMalloc(&p, ROOM), cudaSuccess);
    CHECK_EQ_INT(cudaSetDevice(1), cudaSuccess);
    CHECK_EQ_INT(free_bytes(), ROOM);
    CHECK_EQ_INT(cudaMalloc(&q, ROOM), cudaSuccess);
    CHECK_EQ_INT(cudaFree(q), cudaSuccess);
    CHECK_EQ_INT(cudaSetDevice(0), cudaSuccess);
    CHECK_EQ_INT(cudaFree(p), cudaSuccess);

    /* Zero bytes: NULL and success from cudaMalloc, as NVIDIA's does; an error from the driver. */
    p = sentinel;
    CHECK_EQ_INT(cudaMalloc(&p, 0), cudaSuccess);
    CHECK(p == NULL);
    CHECK_EQ_INT(cuMemAlloc(&d, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ_INT(cudaMallocManaged(&p, 0, cudaMemAttachGlobal), cudaErrorInvalidValue);

    /* Frees of what was never allocated, or already freed. */
    CHECK_EQ_INT(cudaFree(NULL), cudaSuccess);
    CHECK_EQ_INT(cudaFree((void *)0x1234), cudaErrorInvalidValue);
    CHECK_EQ_INT(cuMemFree(0x1234), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ_INT(cudaMalloc(&p, 100), cudaSuccess);
    CHECK_EQ_INT(cudaFree(p), cudaSuccess);
    CHECK_EQ_INT(cudaFree(p), cudaErrorInvalidValue);
    CHECK_EQ_INT(cudaFreeHost((void *)0x1234), cudaErrorInvalidValue);
    CHECK_EQ_INT(free_bytes(), ROOM);
    return CHECK_DONE();
}
