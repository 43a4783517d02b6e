/* What fresh memory costs on this machine just now: 16 MiB populated 2 MiB at a time
 * (MADV_POPULATE_WRITE), in huge pages (MADV_HUGEPAGE) and in small pages (MADV_NOHUGEPAGE),
 * each in a new mapping. Prints "huge_us_median=A huge_us_max=B small_us_median=C
 * small_us_max=D": microseconds of the thread's CPU time a chunk. On a virtual machine whose host
 * takes the guest's free memory back, a new huge page costs 20 to 30 times its usual time for a
 * while; the allocation history writes fresh memory (scripts/bench's pair rows), and gives up huge
 * pages when they are that slow (VRAMTAP_HUGE_SLOW_US). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "bench.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define CHUNK ((size_t)2 << 20)
#define CHUNKS 8

static double cpu_us(void)
{
    return bench_seconds(CLOCK_THREAD_CPUTIME_ID) * 1e6;
}

/* The median and the largest of CHUNKS chunks' times, populated with `advice`: 0, or -1. */
static int chunks(int advice, double *median, double *max)
{
    size_t bytes = CHUNK * (CHUNKS + 1); /* one more: the first huge page's boundary */
    char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    char *at = (char *)(((unsigned long)p + CHUNK - 1) & ~(unsigned long)(CHUNK - 1));
    madvise(p, bytes, advice);
    double t[CHUNKS];
    for (int i = 0; i < CHUNKS; i++) {
        double t0 = cpu_us();
        if (madvise(at + (size_t)i * CHUNK, CHUNK, MADV_POPULATE_WRITE)) {
            munmap(p, bytes);
            return -1;
        }
        t[i] = cpu_us() - t0;
    }
    munmap(p, bytes);
    qsort(t, CHUNKS, sizeof *t, bench_by_value);
    *median = (t[CHUNKS / 2 - 1] + t[CHUNKS / 2]) / 2;
    *max = t[CHUNKS - 1];
    return 0;
}

int main(void)
{
    double hm, hx, sm, sx;
    if (chunks(MADV_HUGEPAGE, &hm, &hx) || chunks(MADV_NOHUGEPAGE, &sm, &sx)) {
        fprintf(stderr, "page_cost: this kernel cannot populate memory ahead "
                        "(MADV_POPULATE_WRITE, Linux 5.14)\n");
        return 1;
    }
    printf("huge_us_median=%.0f huge_us_max=%.0f small_us_median=%.0f small_us_max=%.0f\n", hm, hx,
           sm, sx);
    return 0;
}
