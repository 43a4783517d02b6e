/* An interim snapshot copied in steps while another thread frees allocations of the peak set:
 * the program makes ALLOCS allocations (its peak), then one thread frees them, last made first
 * (where the copy, which visits the records oldest first, comes last), one every GAP
 * microseconds (5), from just before the step mark that writes the interim file until the
 * write is done. The program copies the interim file aside and prints each allocation:
 * "A ADDRESS FREED"; first "INTERIM 0" when there was no interim file to copy.
 *
 * usage: tap_interim_peak_frees ALLOCS [GAP] */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "snapcopy.h"
#include "vramtap.h"

static void **made;
static unsigned char *freed;
static long nmade;
static atomic_int go, writing = 1;
static double gap = 5e-6;

static void *freer(void *arg)
{
    (void)arg;
    while (!atomic_load(&go))
        ;
    for (long i = nmade - 1; i >= 0 && atomic_load(&writing); i--) {
        if (cudaFree(made[i]) != cudaSuccess)
            return (void *)1;
        freed[i] = 1;
        for (double until = check_now() + gap; check_now() < until;)
            ;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3)
        return 2;
    if (argc > 2)
        gap = atof(argv[2]) * 1e-6;
    nmade = atol(argv[1]);
    made = calloc((size_t)nmade, sizeof *made);
    freed = calloc((size_t)nmade, 1);
    CHECK(made && freed);
    for (long i = 0; i < nmade; i++)
        CHECK_EQ_INT(cudaMalloc(&made[i], 512 * (size_t)(1 + i % 4)), cudaSuccess);
    pthread_t th;
    CHECK_EQ_INT(pthread_create(&th, NULL, freer, NULL), 0);
    atomic_store(&go, 1);
    CHECK_EQ_INT(vramtap_step_mark(), VRAMTAP_OK); /* the peak rose since the start: written */
    atomic_store(&writing, 0);
    void *rc;
    pthread_join(th, &rc);
    CHECK(rc == NULL);
    printf("INTERIM %d\n", copy_snapshot() == 0);
    for (long i = 0; i < nmade; i++)
        printf("A 0x%" PRIxPTR " %d\n", (uintptr_t)made[i], freed[i]);
    return CHECK_DONE();
}
