/* The books' lock biased to a thread that allocates without pause, and revoked by another that
 * allocates once each time the first has made RUN pairs since (enough to earn the bias back),
 * 100 times over: every revoke races an owner at work. Every allocation and free is counted
 * once; the lock was biased and revoked at least 101 times, as often each (VRAMTAP_DEBUG says
 * so), or it says why it never was; with VRAMTAP_LOCK_BIAS=0 (test bias_off) it never was.
 * With BIAS_MEMBARRIER_FAILS=N (test bias_membarrier_fails), membarrier() fails for the
 * interloper from its N+1th allocation on (a seccomp filter): that revoke stops the biasing for
 * good, after N+1 grants or more, and every allocation is still counted once. */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
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

/* From now on membarrier() fails with EPERM for the calling thread: 0, or -1. */
static int deny_membarrier(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof f / sizeof f[0], f};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
                   prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)
               ? -1
               : 0;
}

static int fails_after = -1;

static void *interloper(void *arg)
{
    (void)arg;
    for (int i = 0; i < INTERLOPER_OPS; i++) {
        run_passes();
        if (i == fails_after && deny_membarrier())
            return (void *)1;
        void *p;
        if (cudaMalloc(&p, 512) != cudaSuccess || cudaFree(p) != cudaSuccess)
            return (void *)1;
    }
    return NULL;
}

int main(void)
{
    const char *fails = getenv("BIAS_MEMBARRIER_FAILS");
    if (fails)
        fails_after = atoi(fails);
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
    if (fails) {
        _Static_assert(INTERLOPER_OPS > 10, "the pattern below reads at least 11");
        CHECK_EQ_INT(fails_after, 10);
        printf(
            "EXPECT stderr books'.lock.was.biased.(1[1-9]|[2-9][0-9]|[1-9][0-9][0-9]+).times.and."
            "revoked.\\1.times;.then.never.again:.membarrier\\(\\).failed.\\(Operation.not."
            "permitted\\) 1\n");
    } else if (bias && !strcmp(bias, "0"))
        printf("EXPECT stderr books'.lock.was.never.biased:.VRAMTAP_LOCK_BIAS=0 1\n");
    else
        printf("EXPECT stderr books'.lock.(was.biased.(10[1-9]|1[1-9][0-9]|[2-9][0-9][0-9]|[1-9]"
               "[0-9][0-9][0-9]+).times.and.revoked.\\2.times|was.never.biased:.no.membarrier) "
               "1\n");
    return CHECK_DONE();
}
