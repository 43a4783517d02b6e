/* A post-mortem lists what is live on the failing device; its history also holds the events of
 * allocations live elsewhere, which it does not list, and must give each of those its birth's
 * address from the history. Device 1 gets N allocations (each a new peak there, all live), then
 * device 0 one of 1 MiB, then an allocation on device 0 fails. Prints "A ADDRESS SIZE" for each
 * allocation on device 1, and "L ADDRESS" for the one on device 0.
 *
 * usage: tap_oom_history [N] */
#include <cuda_runtime_api.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100;
    CHECK_EQ_INT(cudaSetDevice(1), cudaSuccess);
    for (long i = 0; i < n; i++) {
        void *p;
        size_t size = 512 * (size_t)(1 + i % 4);
        CHECK_EQ_INT(cudaMalloc(&p, size), cudaSuccess);
        printf("A 0x%" PRIxPTR " %zu\n", (uintptr_t)p, size);
    }
    CHECK_EQ_INT(cudaSetDevice(0), cudaSuccess);
    void *q;
    CHECK_EQ_INT(cudaMalloc(&q, 1 << 20), cudaSuccess);
    printf("L 0x%" PRIxPTR "\n", (uintptr_t)q);
    CHECK_EQ_INT(cudaMalloc(&q, (size_t)1 << 50), cudaErrorMemoryAllocation);
    return CHECK_DONE();
}
