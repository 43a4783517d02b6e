/* A post-mortem of LIVE allocations, copied in steps while another thread frees them, the last
 * made first, one every GAP µs: the copy reaches records from the first made, so the frees land
 * on records it has not reached yet, and the file must still list everything live at the
 * failure. Prints what oom_steps.py compares with the file: how many were made, and how many
 * the thread had freed when the failing call began and when it returned.
 * usage: tap_oom_steps [LIVE [GAP]] */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "check.h"

static void **ptrs;
static long live = 200000;
static double gap = 2e-6;
static atomic_long freed;
static atomic_int running = 1;

static void *freer(void *arg)
{
    (void)arg;
    for (long i = live - 1; i >= 0 && atomic_load(&running); i--) {
        if (cudaFree(ptrs[i]) != cudaSuccess)
            return (void *)1;
        atomic_fetch_add(&freed, 1);
        for (double t0 = check_now(); check_now() - t0 < gap;)
            ;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        live = atol(argv[1]);
    if (argc > 2)
        gap = atof(argv[2]) * 1e-6;
    ptrs = calloc((size_t)live, sizeof *ptrs);
    if (!ptrs || live < 1000)
        return 2;
    for (long i = 0; i < live; i++)
        if (cudaMalloc(&ptrs[i], 256) != cudaSuccess)
            return 1;
    pthread_t th;
    CHECK_EQ_INT(pthread_create(&th, NULL, freer, NULL), 0);
    while (atomic_load(&freed) < 100)
        sched_yield();
    long before = atomic_load(&freed);
    void *p;
    CHECK_EQ_INT(cudaMalloc(&p, (size_t)1 << 45), cudaErrorMemoryAllocation);
    long after = atomic_load(&freed);
    atomic_store(&running, 0);
    void *rc;
    pthread_join(th, &rc);
    CHECK(rc == NULL);
    printf("made %ld\nfreed_before %ld\nfreed_after %ld\n", live, before, after);
    return CHECK_DONE();
}
