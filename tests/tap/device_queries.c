/* What the library asks the driver about devices (device_queries.py): N allocations through each
 * of cudaMalloc, cudaMallocAsync and cudaMallocFromPoolAsync, each freed at once, after one
 * allocation made and freed for the device's first use; prints, for
 * each route, how many questions of which device a context or a pointer is on the stand-in
 * answered during its loop.
 *
 * usage: tap_device_queries N */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

unsigned long standin_device_queries(void);

int main(int argc, char **argv)
{
    int n = argc == 2 ? atoi(argv[1]) : 0;
    cudaMemPool_t pool;
    if (n < 1 || cudaDeviceGetDefaultMemPool(&pool, 0) != cudaSuccess)
        return 2;
    void *p;
    /* the device's first use asks for its facts: before the loops */
    if (cudaMalloc(&p, 512) != cudaSuccess || cudaFree(p) != cudaSuccess)
        return 1;
    unsigned long before = standin_device_queries();
    for (int i = 0; i < n; i++)
        if (cudaMalloc(&p, 512) != cudaSuccess || cudaFree(p) != cudaSuccess)
            return 1;
    printf("malloc %lu\n", standin_device_queries() - before);
    before = standin_device_queries();
    for (int i = 0; i < n; i++)
        if (cudaMallocAsync(&p, 512, 0) != cudaSuccess || cudaFreeAsync(p, 0) != cudaSuccess)
            return 1;
    printf("async %lu\n", standin_device_queries() - before);
    before = standin_device_queries();
    for (int i = 0; i < n; i++)
        if (cudaMallocFromPoolAsync(&p, 512, pool, 0) != cudaSuccess ||
            cudaFreeAsync(p, 0) != cudaSuccess)
            return 1;
    printf("pool %lu\n", standin_device_queries() - before);
    return 0;
}
