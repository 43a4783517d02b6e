/* The books' lock biased to a thread that allocates without pause, and revoked by another that
 * allocates once each time the first has made RUN pairs since (enough to earn the bias back),
 * 100 times over: every revoke races an owner at work. Every allocation and free is counted
 * once; the lock was biased and revoked at least 101 times, as often each (VRAMTAP_DEBUG says
 * so), or it says why it never was; with VRAMTAP_LOCK_BIAS=0 (test bias_off) it never was. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

#define INTERLOPER_OPS 100
#define RUN 2000 /* pairs: 4,000 takes of the lock, past the 1,024 that earn the bias */

static atomic_int done;
static atomic_long runner_pairs;

static void *runner(void *arg)
{
    (void)arg;
    while (!atomic_load(&done)) {
        void *p;
        if (cudaMalloc(&p, 256) != cudaSuccess || cudaFree(p) != cudaSuccess)
            return (void *)1;
        atomic_fetch_add(&runner_pairs, 1);
    }
    return NULL;
}

/* Waits for the runner to make RUN more pairs. */
static void run_passes(void)
{
    long from = atomic_load(&runner_pairs);
    while (atomic_load(&runner_pairs) - from < RUN)
        usleep(50);
}

static void *interloper(void *arg)
{
    (void)arg;
    for (int i = 0; i < INTERLOPER_OPS; i++) {
        run_passes();
        void *p;
        if (cudaMalloc(&p, 512) != cudaSuccess || cudaFree(p) != cudaSuccess)
            return (void *)1;
    }
    return NULL;
}

int main(void)
{
    pthread_t r, i;
    CHECK_EQ_INT(pthread_create(&r, NULL, runner, NULL), 0);
    CHECK_EQ_INT(pthread_create(&i, NULL, interloper, NULL), 0);
    void *rc_i, *rc_r;
    pthread_join(i, &rc_i);
    run_passes();
    atomic_store(&done, 1);
    pthread_join(r, &rc_r);
    CHECK(rc_i == NULL && rc_r == NULL);
    long n = atomic_load(&runner_pairs) + INTERLOPER_OPS;
    printf("EXPECT counter allocs %ld\nEXPECT counter frees %ld\n", n, n);
    printf("EXPECT live_at_end 0 0\nEXPECT counter unknown_frees 0\nEXPECT counter dropped 0\n");
    /* At least once per interloper's allocation and once more at exit (more where the
     * interloper was preempted between its allocation and its free, for as long as the runner
     * took to earn the bias back); as many revokes as grants, the last one at exit. */
    _Static_assert(INTERLOPER_OPS == 100, "the pattern below reads at least 101");
    const char *bias = getenv("VRAMTAP_LOCK_BIAS");
    if (bias && !strcmp(bias, "0"))
        printf("EXPECT stderr books'.lock.was.never.biased:.VRAMTAP_LOCK_BIAS=0 1\n");
    else
        printf("EXPECT stderr books'.lock.(was.biased.(10[1-9]|1[1-9][0-9]|[2-9][0-9][0-9]|[1-9]"
               "[0-9][0-9][0-9]+).times.and.revoked.\\2.times|was.never.biased:.no.membarrier) "
               "1\n");
    return CHECK_DONE();
}
