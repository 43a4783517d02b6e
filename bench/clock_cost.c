/* What a clock reading costs on this machine just now: vramtap stamps every allocation and free
 * with one (the TSC where the kernel's clock source is the TSC, else clock_gettime), two a
 * pair. Prints "source=tsc|clock_gettime alone_ns=A beside_ns=B": nanoseconds a reading in a
 * loop of readings, and what a reading adds to a chain of dependent arithmetic (the out-of-order
 * core overlaps a reading with the work around it on some processors, not on others). The
 * medians of 9 batches. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#define READINGS 200000
#define BATCHES 9
#define CHAIN 20

static int use_tsc;

static uint64_t clock_now(void)
{
#if defined(__x86_64__)
    if (use_tsc)
        return __rdtsc();
#endif
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static double wall_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v)
{
    qsort(v, BATCHES, sizeof *v, by_value);
    return v[BATCHES / 2];
}

/* Keeps the compiler from folding a loop's result away. */
static volatile uint64_t sink;

/* ns per step of a loop of READINGS steps: a reading, or CHAIN dependent multiply-adds with a
 * reading folded in (`with`) or not. */
static double batch(int kind, int with)
{
    uint64_t acc = 0;
    double t0 = wall_ns();
    for (uint64_t i = 0; i < READINGS; i++) {
        if (!kind) {
            acc += clock_now();
            continue;
        }
        uint64_t x = with ? clock_now() : i;
        for (int j = 0; j < CHAIN; j++)
            x = x * 3 + (uint64_t)j;
        acc += x;
    }
    double t = (wall_ns() - t0) / READINGS;
    sink = acc;
    return t;
}

int main(void)
{
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
    char src[64] = "";
    if (f) {
        if (!fgets(src, sizeof src, f))
            src[0] = 0;
        fclose(f);
    }
#if defined(__x86_64__)
    use_tsc = !strcmp(src, "tsc\n");
#endif
    double alone[BATCHES], beside[BATCHES];
    for (int b = 0; b < BATCHES; b++) {
        alone[b] = batch(0, 0);
        double without = batch(1, 0);
        beside[b] = batch(1, 1) - without;
    }
    printf("source=%s alone_ns=%.1f beside_ns=%.1f\n", use_tsc ? "tsc" : "clock_gettime",
           median(alone), median(beside));
    return 0;
}
