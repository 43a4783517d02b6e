/* Cost of a copy over the stand-in: cudaMemcpyAsync of 64 bytes to device memory, in turn from
 * pinned and from pageable memory, with RANGES pinned allocations live (the pinned ranges a copy
 * is looked up in). Prints "ranges=R ns_per_copy=X cpu_ns_per_copy=C" over COPIES copies, after
 * a warm-up of as many: wall time, and the process's CPU time (what a loaded machine's other
 * tenants do not add to).
 * usage: copy_cost COPIES RANGES */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench.h"

/* nanoseconds */
static double now(clockid_t clock)
{
    return bench_seconds(clock) * 1e9;
}

static int copies(int n, void *dev, char *pinned, char *pageable)
{
    for (int i = 0; i < n; i++)
        if (cudaMemcpyAsync(dev, i % 2 ? pinned : pageable, 64, cudaMemcpyHostToDevice, 0) !=
            cudaSuccess)
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000000, ranges = argc > 2 ? atoi(argv[2]) : 1;
    void *dev, *p = NULL;
    char *pageable = malloc(4096);
    if (n <= 0 || ranges < 1 || !pageable || cudaMalloc(&dev, 4096) != cudaSuccess)
        return 1;
    for (int i = 0; i < ranges; i++) /* the last one is copied from */
        if (cudaMallocHost(&p, 4096) != cudaSuccess)
            return 1;
    if (copies(n, dev, p, pageable))
        return 1;
    double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
    if (copies(n, dev, p, pageable))
        return 1;
    double w = now(CLOCK_MONOTONIC) - w0, c = now(CLOCK_PROCESS_CPUTIME_ID) - c0;
    printf("ranges=%d ns_per_copy=%.1f cpu_ns_per_copy=%.1f\n", ranges, w / n, c / n);
    return 0;
}
