/* A record keeps the low bits of its birth's step (16) and phase instance (21), and the era it
 * was born in the high ones (table.h): allocations born on either side of 2^21 phase instances
 * and of 2^16 steps, all kept live to the end, show their births exactly. (None comes before:
 * once a device is in use, every phase mark samples its memory.) */
#include <cuda_runtime_api.h>
#include <stdio.h>

#include "check.h"
#include "vramtap.h"

#define INSTANCES (1 << 21)
#define STEPS (1 << 16)

static int step, instance;

/* One forward phase instance, allocating in it when asked: prints the birth it must show. */
static void forward(int allocate)
{
    CHECK_EQ_INT(vramtap_begin(VRAMTAP_FORWARD), VRAMTAP_OK);
    instance++;
    if (allocate) {
        void *p;
        CHECK_EQ_INT(cudaMalloc(&p, 512), cudaSuccess);
        printf("EXPECT birth %p forward %d %d\n", p, step, instance);
    }
    CHECK_EQ_INT(vramtap_end(VRAMTAP_FORWARD), VRAMTAP_OK);
}

int main(void)
{
    while (instance < INSTANCES + 2)
        forward(instance >= INSTANCES - 2);
    while (step < STEPS + 2) {
        CHECK_EQ_INT(vramtap_step(), VRAMTAP_OK);
        step++;
        if (step >= STEPS - 1)
            forward(1);
    }
    printf("EXPECT at_peak_count 0 8\nEXPECT counter dropped 0\n");
    return CHECK_DONE();
}
