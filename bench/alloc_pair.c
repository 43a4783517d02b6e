/* Cost of a cudaMallocAsync + cudaFreeAsync pair over the stand-in, per thread count, with the
 * allocation made under a call chain of a given depth (so stack capture has frames to walk).
 * Prints "threads=T depth=D ns_per_pair=X". */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int pairs = 200000;
static int chain = 0;

__attribute__((noinline)) static int pair_at_depth(int depth, int i)
{
    if (depth > 0) {
        int rc = pair_at_depth(depth - 1, i);
        __asm__ volatile("" ::: "memory"); /* keeps the recursion from becoming a loop */
        return rc;
    }
    void *p;
    if (cudaMallocAsync(&p, 512 * (size_t)(1 + i % 8), 0) != cudaSuccess)
        return 1;
    return cudaFreeAsync(p, 0) != cudaSuccess;
}

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < pairs; i++)
        if (pair_at_depth(chain, i))
            return (void *)1;
    return NULL;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (argc > 2)
        chain = atoi(argv[2]);
    if (argc > 3)
        pairs = atoi(argv[3]);
    if (threads < 1 || threads > 64 || chain < 0 || pairs < 1) {
        fprintf(stderr, "usage: alloc_pair [THREADS [CHAIN_DEPTH [PAIRS]]]\n");
        return 2;
    }
    worker(NULL); /* warm-up: first-call resolution, table growth */
    pthread_t th[64];
    double t0 = now();
    for (int t = 0; t < threads; t++)
        pthread_create(&th[t], NULL, worker, NULL);
    int bad = 0;
    for (int t = 0; t < threads; t++) {
        void *rc;
        pthread_join(th[t], &rc);
        bad |= rc != NULL;
    }
    double t1 = now();
    printf("threads=%d depth=%d ns_per_pair=%.1f\n", threads, chain,
           (t1 - t0) * 1e9 / ((double)pairs * threads));
    return bad;
}
