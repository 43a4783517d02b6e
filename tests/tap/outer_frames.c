/* Call chains that share their innermost frames, at the same place in the stack, and part ways
 * further out: one frame beyond the program's call (near_a, near_b) or three (far_a, far_b
 * under mid and inner). Each is taken in turns and in runs, so that a chain seen before meets
 * the other, allocating by cudaMalloc and cudaMallocAsync in turn. Prints, per allocation, its
 * size and the functions its stack must name from the allocating one out to main
 * (outer_frames.py checks them). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

/* After each call: no tail call, so every function keeps its frame. */
#define KEEP() __asm__ volatile("" ::: "memory")

static size_t next_size = 4096;

__attribute__((noinline)) static void leaf(const char *chain)
{
    void *p;
    size_t size = next_size++;
    /* two routes, whose wrappers may put different frames of vramtap's above the program's */
    cudaError_t rc = size % 2 ? cudaMallocAsync(&p, size, 0) : cudaMalloc(&p, size);
    if (rc != cudaSuccess) {
        fprintf(stderr, "cudaMalloc(%zu) failed\n", size);
        exit(1);
    }
    printf("%zu leaf,%s,main\n", size, chain);
    KEEP();
}

/* One function of a chain: calls the next and keeps its frame. Twins made by it have frames of
 * one size, so the chains they start put the shared frames at the same place. */
#define LINK(name, param, call)                                                                    \
    __attribute__((noinline)) static void name(param)                                              \
    {                                                                                              \
        call;                                                                                      \
        KEEP();                                                                                    \
    }

LINK(near_a, void, leaf("near_a"))
LINK(near_b, void, leaf("near_b"))
LINK(inner, const char *chain, leaf(chain))
LINK(mid, const char *chain, inner(chain))
LINK(far_a, void, mid("inner,mid,far_a"))
LINK(far_b, void, mid("inner,mid,far_b"))

int main(void)
{
    static const char turns[] = "aaabbbababbaab";
    for (const char *t = turns; *t; t++)
        *t == 'a' ? near_a() : near_b();
    for (const char *t = turns; *t; t++)
        *t == 'a' ? far_a() : far_b();
    return 0;
}
