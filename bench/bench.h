/* What the benchmark programs share: a clock read in seconds and qsort's order of doubles.
 * Header-only, so that each program still builds from its one file. */
#ifndef VT_BENCH_H
#define VT_BENCH_H

#include <time.h>

static inline double bench_seconds(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline int bench_by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
