/* What a clock reading costs on this machine just now: vramtap stamps every allocation and free
 * with one, two a pair: the TSC where the kernel's own clock source is the TSC, else
 * clock_gettime. Prints "tsc_alone_ns=A tsc_beside_ns=B gettime_ns=C": nanoseconds a TSC
 * reading in a loop of readings, what a TSC reading adds to a chain of dependent arithmetic (the
 * out-of-order core overlaps a reading with the work around it on some processors, not on
 * others), and a clock_gettime(CLOCK_MONOTONIC) in a loop of them; "-" for the TSC where there is
 * none to read. The medians of 9 batches. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "bench.h"

#define READINGS 200000
#define BATCHES 9
#define CHAIN 20

enum { TSC, GETTIME };

static uint64_t read_clock(int which)
{
#if defined(__x86_64__)
    if (which == TSC)
        return __rdtsc();
#endif
    (void)which;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static double median(double *v)
{
    qsort(v, BATCHES, sizeof *v, bench_by_value);
    return v[BATCHES / 2];
}

/* Keeps the compiler from folding a loop's result away. */
static volatile uint64_t sink;

/* ns per step of a loop of READINGS steps: a reading of `which` (chain 0), or CHAIN dependent
 * multiply-adds with a reading folded in (`with`) or not. */
static double batch(int which, int chain, int with)
{
    uint64_t acc = 0;
    uint64_t t0 = read_clock(GETTIME);
    for (uint64_t i = 0; i < READINGS; i++) {
        if (!chain) {
            acc += read_clock(which);
            continue;
        }
        uint64_t x = with ? read_clock(which) : i;
        for (int j = 0; j < CHAIN; j++)
            x = x * 3 + (uint64_t)j;
        acc += x;
    }
    double t = (double)(read_clock(GETTIME) - t0) / READINGS;
    sink = acc;
    return t;
}

int main(void)
{
    double alone[BATCHES], beside[BATCHES], gettime[BATCHES];
    for (int b = 0; b < BATCHES; b++) {
#if defined(__x86_64__)
        alone[b] = batch(TSC, 0, 0);
        beside[b] = batch(TSC, 1, 1) - batch(TSC, 1, 0);
#endif
        gettime[b] = batch(GETTIME, 0, 0);
    }
#if defined(__x86_64__)
    printf("tsc_alone_ns=%.1f tsc_beside_ns=%.1f ", median(alone), median(beside));
#else
    (void)alone, (void)beside;
    printf("tsc_alone_ns=- tsc_beside_ns=- ");
#endif
    printf("gettime_ns=%.1f\n", median(gettime));
    return 0;
}
