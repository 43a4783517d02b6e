/* An interim snapshot copied in steps shows its history as of the copy's first hold, even for
 * allocations that die while the copy runs. The peak is reached first, then half of it freed;
 * the allocations made after that (not in the peak set: the file has them from the history
 * alone, their address and the rest from their records) are freed by another thread, last first
 * (where the copy, which starts at the oldest events, comes last), one every GAP microseconds
 * (5) from just before the step mark that writes the interim file until the write is done; a
 * third thread makes an allocation fail meanwhile (at the NTH free that waited for the lock, 2,
 * or after WAIT milliseconds, 3), whose post-mortem copies the books at once, most
 * often in the middle of the copy in steps. The program copies the interim file aside and prints
 * each of those allocations: "A ADDRESS SIZE FREED"; then "FREED N", "FAILED 1" when the
 * allocation meant to fail did while the interim file was written, and "WAITS N", the frees
 * that waited for the lock; first "INTERIM 0" when there was no interim file to copy: put off,
 * because the post-mortem's copy in steps was under way when the step mark came.
 *
 * usage: tap_interim_history PEAK_ALLOCS LATE_ALLOCS [GAP [WAIT [NTH]]] */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "snapcopy.h"
#include "vramtap.h"

static void **late;
static unsigned char *freed;
static long nlate, nfreed;
static atomic_int fail_now;
static long waits; /* frees that waited for the lock: the copy held it */
static int failed; /* the allocation meant to fail did, while the interim file was written */
static atomic_int go, writing = 1;
static double gap = 5e-6, wait = 3e-3;
static long nth = 2;

/* Frees one every `gap`: some before the copy begins, some while it runs. The nth free that
 * waited for the lock (10 gaps or more: the first may have waited for the step mark's own hold,
 * and under a sanitizer the next few for the copy's preparations), or else `wait`, starts the
 * failing allocation. */
static void *freer(void *arg)
{
    (void)arg;
    while (!atomic_load(&go))
        ;
    for (long i = nlate - 1; i >= 0 && atomic_load(&writing); i--) {
        double t0 = check_now();
        if (cudaFree(late[i]) != cudaSuccess)
            return (void *)1;
        if (i < nlate - 1 && check_now() - t0 > 10 * gap &&
            ++waits == nth) /* the first interned its stack */
            atomic_store(&fail_now, 1);
        freed[i] = 1;
        nfreed++;
        for (double until = check_now() + gap; check_now() < until;)
            ;
    }
    return NULL;
}

/* An allocation that fails in the middle of the copy: its post-mortem copies the books at once,
 * on this thread while the other frees on, and the copy in steps must go on saving what dies
 * ahead of it. */
static void *failer(void *arg)
{
    (void)arg;
    while (!atomic_load(&go))
        ;
    for (double until = check_now() + wait; !atomic_load(&fail_now) && check_now() < until;)
        ;
    void *q;
    failed = atomic_load(&writing) && cudaMalloc(&q, (size_t)1 << 50) == cudaErrorMemoryAllocation;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 6)
        return 2;
    if (argc > 3)
        gap = atof(argv[3]) * 1e-6;
    if (argc > 4)
        wait = atof(argv[4]) * 1e-3;
    if (argc > 5)
        nth = atol(argv[5]);
    long npeak = atol(argv[1]);
    nlate = atol(argv[2]);
    void **peak = calloc((size_t)npeak, sizeof *peak);
    late = calloc((size_t)nlate, sizeof *late);
    freed = calloc((size_t)nlate, 1);
    CHECK(peak && late && freed && nlate < npeak / 2);
    for (long i = 0; i < npeak; i++)
        CHECK_EQ_INT(cudaMalloc(&peak[i], 4096), cudaSuccess);
    for (long i = npeak / 2; i < npeak; i++)
        CHECK_EQ_INT(cudaFree(peak[i]), cudaSuccess);
    for (long i = 0; i < nlate; i++)
        CHECK_EQ_INT(cudaMalloc(&late[i], 512 * (size_t)(1 + i % 4)), cudaSuccess);
    pthread_t th[2];
    CHECK_EQ_INT(pthread_create(&th[0], NULL, freer, NULL), 0);
    CHECK_EQ_INT(pthread_create(&th[1], NULL, failer, NULL), 0);
    atomic_store(&go, 1);
    CHECK_EQ_INT(vramtap_step_mark(), VRAMTAP_OK); /* the peak rose since the start: written */
    atomic_store(&writing, 0);
    for (int t = 0; t < 2; t++) {
        void *rc;
        pthread_join(th[t], &rc);
        CHECK(rc == NULL);
    }
    printf("INTERIM %d\n", copy_snapshot() == 0);
    for (long i = 0; i < nlate; i++)
        printf("A 0x%" PRIxPTR " %zu %d\n", (uintptr_t)late[i], 512 * (size_t)(1 + i % 4),
               freed[i]);
    printf("FREED %ld\nFAILED %d\nWAITS %ld\n", nfreed, failed, waits);
    return CHECK_DONE();
}
