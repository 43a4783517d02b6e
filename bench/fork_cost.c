/* Cost of fork() plus the exit of an idle child, with a given number of live allocations made
 * beforehand over the stand-in. Prints "live=N ms_per_fork=X child_kib=Y" (the child's
 * resident memory growth: pages it copied from its parent). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

/* Private dirty pages: what this process wrote since it was forked. */
static long private_dirty_kib(void)
{
    char line[256];
    long sum = 0, kib;
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Private_Dirty: %ld", &kib) == 1)
            sum += kib;
    if (f)
        fclose(f);
    return sum;
}

int main(int argc, char **argv)
{
    long live = argc > 1 ? atol(argv[1]) : 1000000;
    int forks = argc > 2 ? atoi(argv[2]) : 20;
    for (long i = 0; i < live; i++) {
        void *p;
        if (cudaMalloc(&p, 256) != cudaSuccess)
            return 1;
    }
    int fd[2];
    if (pipe(fd))
        return 1;
    long child_kib = 0;
    double t0 = bench_seconds(CLOCK_MONOTONIC);
    for (int k = 0; k < forks; k++) {
        pid_t pid = fork();
        if (pid == 0) {
            long kib = private_dirty_kib();
            if (write(fd[1], &kib, sizeof kib) != sizeof kib)
                _exit(1);
            _exit(0);
        }
        int status;
        if (pid < 0 || waitpid(pid, &status, 0) != pid ||
            read(fd[0], &child_kib, sizeof child_kib) != sizeof child_kib)
            return 1;
    }
    printf("live=%ld ms_per_fork=%.3f child_kib=%ld\n", live,
           (bench_seconds(CLOCK_MONOTONIC) - t0) * 1e3 / forks, child_kib);
    return 0;
}
