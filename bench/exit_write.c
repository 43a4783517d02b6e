/* The exit of a process holding LIVE allocations (cudaMalloc of 512 bytes): under vramtap, the exit
 * snapshot's write. Prints "live=N loop_s=L main_end=T main_cpu=C": the allocation loop's wall
 * time, the wall clock (CLOCK_REALTIME) when main returns and the process's CPU time then, so that
 * the caller, reading the clock and the process's CPU time once it has ended, has the exit's
 * duration and CPU time. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

static double now(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    long live = argc > 1 ? atol(argv[1]) : 1000000;
    double t0 = now(CLOCK_MONOTONIC);
    for (long i = 0; i < live; i++) {
        void *p;
        if (cudaMalloc(&p, 512) != cudaSuccess) {
            fprintf(stderr, "allocation %ld failed\n", i);
            return 1;
        }
    }
    double loop = now(CLOCK_MONOTONIC) - t0;
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    double cpu = (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
                 (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
    printf("live=%ld loop_s=%.6f main_end=%.6f main_cpu=%.6f\n", live, loop, now(CLOCK_REALTIME),
           cpu);
    fflush(stdout);
    return 0;
}
