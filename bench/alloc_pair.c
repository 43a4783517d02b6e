/* Cost of a cudaMallocAsync + cudaFreeAsync pair over the stand-in, per thread count, with the
 * allocation made under a call chain of a given depth (so stack capture has frames to walk),
 * with LIVE allocations of 512 bytes kept live meanwhile (made first: the ramp is timed too).
 * Prints "threads=T depth=D live=L ramp_ns_per_alloc=R ramp_cpu_ns_per_alloc=RC ns_per_pair=X
 * cpu_ns_per_pair=C faults_per_1000_pairs=F ramp_rss_kib=K": wall time, the CPU time of the
 * process (what a loaded machine's other tenants do not add to), and the page faults taken while
 * the pairs ran, each over the measured pairs only (after a warm-up of as many pairs on the main
 * thread); the ramp's wall and CPU time per allocation; the resident memory after the ramp.
 * With ALLOC_PAIR_SPREAD=1 thread t runs on the t-th processor the process may run on (modulo
 * their number): two threads on a machine of two are then one on each, every run (the scheduler
 * otherwise puts them on one or on both, run by run). */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "pair.h"

static int pairs = 200000;
static int chain = 0;

/* arg: the processor to run on, + 1; NULL: wherever the scheduler puts it. */
static void *worker(void *arg)
{
    if (arg) {
        cpu_set_t on;
        CPU_ZERO(&on);
        CPU_SET((int)((intptr_t)arg - 1), &on);
        if (pthread_setaffinity_np(pthread_self(), sizeof on, &on))
            return (void *)1;
    }
    for (int i = 0; i < pairs; i++)
        if (pair_at_depth(chain, i))
            return (void *)1;
    return NULL;
}

static long minor_faults(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

/* Resident KiB now (before the exit's snapshot copies the books). */
static long resident_kib(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (argc > 2)
        chain = atoi(argv[2]);
    if (argc > 3)
        pairs = atoi(argv[3]);
    long live = argc > 4 ? atol(argv[4]) : 0;
    if (threads < 1 || threads > 64 || chain < 0 || pairs < 1 || live < 0) {
        fprintf(stderr, "usage: alloc_pair [THREADS [CHAIN_DEPTH [PAIRS [LIVE]]]]\n");
        return 2;
    }
    double r0 = bench_seconds(CLOCK_MONOTONIC), rc0 = bench_seconds(CLOCK_PROCESS_CPUTIME_ID);
    for (long i = 0; i < live; i++) {
        void *p;
        if (cudaMalloc(&p, 512) != cudaSuccess)
            return 1;
    }
    double ramp = bench_seconds(CLOCK_MONOTONIC) - r0,
           ramp_cpu = bench_seconds(CLOCK_PROCESS_CPUTIME_ID) - rc0;
    long ramp_kib = resident_kib();
    worker(NULL); /* warm-up: first-call resolution, table growth */
    pthread_t th[64];
    const char *spread = getenv("ALLOC_PAIR_SPREAD");
    int cpu[CPU_SETSIZE], cpus = 0;
    cpu_set_t allowed;
    if (spread && !strcmp(spread, "1") && !sched_getaffinity(0, sizeof allowed, &allowed))
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &allowed))
                cpu[cpus++] = c;
    long f0 = minor_faults();
    double t0 = bench_seconds(CLOCK_MONOTONIC), c0 = bench_seconds(CLOCK_PROCESS_CPUTIME_ID);
    for (int t = 0; t < threads; t++)
        pthread_create(&th[t], NULL, worker, cpus ? (void *)(intptr_t)(cpu[t % cpus] + 1) : NULL);
    int bad = 0;
    for (int t = 0; t < threads; t++) {
        void *rc;
        pthread_join(th[t], &rc);
        bad |= rc != NULL;
    }
    double t1 = bench_seconds(CLOCK_MONOTONIC), c1 = bench_seconds(CLOCK_PROCESS_CPUTIME_ID);
    double n = (double)pairs * threads;
    printf("threads=%d depth=%d live=%ld ramp_ns_per_alloc=%.1f ramp_cpu_ns_per_alloc=%.1f "
           "ns_per_pair=%.1f cpu_ns_per_pair=%.1f faults_per_1000_pairs=%.2f ramp_rss_kib=%ld\n",
           threads, chain, live, live ? ramp * 1e9 / (double)live : 0.0,
           live ? ramp_cpu * 1e9 / (double)live : 0.0, (t1 - t0) * 1e9 / n, (c1 - c0) * 1e9 / n,
           (double)(minor_faults() - f0) * 1000 / n, ramp_kib);
    return bad;
}
