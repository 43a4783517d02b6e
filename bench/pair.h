/* The pair the pair benchmarks time: a cudaMallocAsync of 512 to 4,096 bytes (by i) and its
 * cudaFreeAsync on the legacy stream, made under `depth` calls of a chain (so that stack capture
 * has frames to walk). 0, or 1 when a call failed. */
#ifndef VT_BENCH_PAIR_H
#define VT_BENCH_PAIR_H

#include <cuda_runtime_api.h>

__attribute__((noinline)) static int pair_at_depth(int depth, int i)
{
    if (depth > 0) {
        int rc = pair_at_depth(depth - 1, i);
        __asm__ volatile("" ::: "memory"); /* keeps the recursion from becoming a loop */
        return rc;
    }
    void *p;
    if (cudaMallocAsync(&p, 512 * (size_t)(1 + i % 8), 0) != cudaSuccess)
        return 1;
    return cudaFreeAsync(p, 0) != cudaSuccess;
}

#endif
