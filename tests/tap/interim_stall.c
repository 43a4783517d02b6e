/* An interim snapshot of 1M live allocations, written at a step mark, while one thread dlopens
 * and dlcloses a library whose constructor allocates (the loader's lock held across the
 * allocation) and another allocates and frees. The write must complete without deadlock, the
 * counts must add up, and the allocating thread's longest allocate+free pair is at most 10% of
 * the write's time (a ratio of two times measured in the same run, so a slow machine slows both;
 * about 1% is usual). scripts/bench reports the same figure.
 * With "-" for the library: no thread dlopens, and the allocating thread allocates and frees
 * without a pause, as a training loop's does: every hold of the lock by the writer is one it
 * waits for. With "oom": the same, and the file written is a post-mortem, of an allocation made
 * to fail, in place of the interim file.
 * usage: tap_interim_stall CTOR_LIB|-|oom [LIVE]; prints the counts the snapshot must show. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "vramtap.h"

static atomic_int writing = 1, started;
static const char *lib; /* NULL: no thread dlopens, and the allocating thread does not pause */
static long dlopens, pairs;
static double max_wait;

/* Both threads pause between rounds: what is measured is the wait for vramtap, not two cores
 * shared by three busy threads. */
static void pause_a_little(void)
{
    struct timespec t = {0, 200000};
    nanosleep(&t, NULL);
}

static void *loader(void *arg)
{
    (void)arg;
    while (atomic_load(&writing)) {
        void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        if (!h)
            return (void *)1;
        dlclose(h);
        dlopens++;
        pause_a_little();
    }
    return NULL;
}

static int pair(void)
{
    void *p;
    if (cudaMalloc(&p, 512) != cudaSuccess)
        return 1;
    return cudaFree(p) != cudaSuccess;
}

static void *allocator(void *arg)
{
    (void)arg;
    int first = pair(); /* the first interns its stack */
    atomic_store(&started, 1);
    if (first)
        return (void *)1;
    while (atomic_load(&writing)) {
        double t0 = check_now();
        if (pair())
            return (void *)1;
        double w = check_now() - t0;
        max_wait = w > max_wait ? w : max_wait;
        pairs++;
        if (lib)
            pause_a_little();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3)
        return 2;
    int oom = !strcmp(argv[1], "oom");
    lib = strcmp(argv[1], "-") && !oom ? argv[1] : NULL;
    long live = argc == 3 ? atol(argv[2]) : 1000000;
    for (long i = 0; i < live; i++) {
        void *p;
        if (cudaMalloc(&p, 256) != cudaSuccess) {
            fprintf(stderr, "allocation %ld failed\n", i);
            return 1;
        }
    }
    pthread_t th[2];
    int nth = 0;
    if (lib)
        CHECK_EQ_INT(pthread_create(&th[nth++], NULL, loader, NULL), 0);
    CHECK_EQ_INT(pthread_create(&th[nth++], NULL, allocator, NULL), 0);
    /* the allocating thread in its loop before the write begins: a thread still starting missed
     * the write's first hold of the lock, once the longest */
    while (!atomic_load(&started))
        sched_yield();
    double t0 = check_now();
    void *p;
    if (oom) /* a post-mortem, written now on this thread */
        CHECK_EQ_INT(cudaMalloc(&p, (size_t)1 << 45), cudaErrorMemoryAllocation);
    else /* the peak rose: an interim snapshot, written now on this thread */
        vramtap_step_mark();
    double write = check_now() - t0;
    atomic_store(&writing, 0);
    for (int t = 0; t < nth; t++) {
        void *rc;
        pthread_join(th[t], &rc);
        CHECK(rc == NULL);
    }
    fprintf(stderr, "write %.3f s, %ld pairs meanwhile, longest %.6f s (%.1f%%), %ld dlopens\n",
            write, pairs, max_wait, 100 * max_wait / write, dlopens);
    CHECK(pairs > 0);
    /* Sanitizers instrument every access and intercept malloc and dlopen behind locks of their
     * own: a wait there measures them as much as vramtap, so the ratio is the plain build's. */
    const char *sanitize = getenv("VT_SANITIZE");
    if (!sanitize || strcmp(sanitize, "none") == 0)
        CHECK(max_wait <= 0.1 * write);
    printf("allocs %ld\nfrees %ld\n", live + dlopens + 1 + pairs, dlopens + 1 + pairs);
    return CHECK_DONE();
}
