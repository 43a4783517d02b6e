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

int main(int argc, char **argv)
{
    long live = argc > 1 ? atol(argv[1]) : 1000000;
    struct timespec t0, t1, end;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < live; i++) {
        void *p;
        if (cudaMalloc(&p, 512) != cudaSuccess) {
            fprintf(stderr, "allocation %ld failed\n", i);
            return 1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    double cpu = (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
                 (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
    clock_gettime(CLOCK_REALTIME, &end);
    printf("live=%ld loop_s=%.6f main_end=%.6f main_cpu=%.6f\n", live,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9,
           (double)end.tv_sec + (double)end.tv_nsec * 1e-9, cpu);
    fflush(stdout);
    return 0;
}
