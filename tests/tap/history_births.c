/* Allocations freed in the window their events are in: the free's event keeps the rest of the
 * allocation's birth as its record packed it, and the writer decodes it (history.c). Each one
 * here is born in another phase, step, phase instance, function and module path, and freed in
 * another step and phase than its birth; the file must give each its own birth, the allocation
 * that stays live its own too. None is live at the peak, which would keep a copy of its own. */
#include <inttypes.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "check.h"
#include "vramtap.h"

#define KiB 1024

static inline void *made(size_t n)
{
    void *p;
    CHECK_EQ_INT(cudaMalloc(&p, n), cudaSuccess);
    return p;
}

/* Two functions for two stacks: each writes `last` apart, or the compiler would fold them into
 * one; writing after the call keeps each a frame of its own, not a tail call. */
static volatile int last;

static __attribute__((noinline)) void *made_in_forward(size_t n)
{
    void *p = made(n);
    last = 1;
    return p;
}

static __attribute__((noinline)) void *made_in_backward(size_t n)
{
    void *p = made(n);
    last = 2;
    return p;
}

/* Phase instances are numbered from 1 as the phases begin: 1 and 2 in step 0, 3 and 4 in step 1. */
static void expect(size_t n, const void *p, const char *phase, int step, int instance,
                   const char *function, const char *module)
{
    printf("EXPECT history_birth %zu %s %d 0x%" PRIxPTR "\n", n, phase, step, (uintptr_t)p);
    printf("EXPECT birth_where %zu %d %s %s\n", n, instance, function, module);
}

int main(void)
{
    unsigned encoder = vramtap_module_path("model.encoder");
    unsigned decoder = vramtap_module_path("model.decoder");
    CHECK(encoder && decoder && encoder != decoder);
    void *a, *b, *c, *d, *big;
    /* the peak, first: the allocations below are never live at it, so the file has them from
     * the history, not from the peak's copy */
    CHECK_EQ_INT(cudaMalloc(&big, 1024 * KiB), cudaSuccess);
    cudaFree(big);
    /* step 0: one in the forward under the encoder, one in the backward under the decoder */
    vramtap_begin(VRAMTAP_FORWARD);
    vramtap_module_enter(encoder);
    a = made_in_forward(3 * KiB);
    vramtap_module_enter(0);
    vramtap_end(VRAMTAP_FORWARD);
    vramtap_begin(VRAMTAP_BACKWARD);
    vramtap_module_enter(decoder);
    b = made_in_backward(5 * KiB);
    vramtap_module_enter(0);
    vramtap_end(VRAMTAP_BACKWARD);
    vramtap_step();
    /* step 1: the other way round, and the first three freed in the optimizer */
    vramtap_begin(VRAMTAP_FORWARD);
    vramtap_module_enter(decoder);
    c = made_in_forward(7 * KiB);
    vramtap_end(VRAMTAP_FORWARD);
    vramtap_begin(VRAMTAP_BACKWARD);
    vramtap_module_enter(encoder);
    d = made_in_backward(11 * KiB);
    vramtap_module_enter(0);
    vramtap_end(VRAMTAP_BACKWARD);
    vramtap_begin(VRAMTAP_OPTIMIZER);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    vramtap_end(VRAMTAP_OPTIMIZER);
    expect(3 * KiB, a, "forward", 0, 1, "made_in_forward", "model.encoder");
    expect(5 * KiB, b, "backward", 0, 2, "made_in_backward", "model.decoder");
    expect(7 * KiB, c, "forward", 1, 3, "made_in_forward", "model.decoder");
    expect(11 * KiB, d, "backward", 1, 4, "made_in_backward", "model.encoder");
    printf("EXPECT history_death %d optimizer 1\n", 3 * KiB);
    printf("EXPECT history_death %d optimizer 1\n", 5 * KiB);
    printf("EXPECT history_death %d optimizer 1\n", 7 * KiB);
    printf("EXPECT history windows 1\nEXPECT history dropped 0\n");
    printf("EXPECT history 0 sizes +1048576,-1048576,+3072,+5120,+7168,+11264,-3072,-5120,-7168\n");
    printf("EXPECT peak 0 %d\n", 1024 * KiB);
    return CHECK_DONE();
}
