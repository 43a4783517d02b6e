/* What recording adds to a pair, timed in one process: chunks of pairs (pair.h) with recording on
 * and off in turns, through vt_bench_record, which only a library built with
 * -Dbench_switch=true has (scripts/bench's). Each of PAIRS pairs of chunks runs its two chunks
 * back to back, in an order drawn at random: the median of their differences is what recording
 * adds, which the machine's slow spells (they last longer than a chunk) and the run's own steps
 * (a table growing, which lands in one chunk) move little. With recording off, vramtap's
 * wrappers still stand between the program and the stand-in: that passage is not in the figure.
 * LIVE allocations of 512 bytes are made first, recorded, and stay live.
 * `ramp` in place of LIVE and DEPTH: each step of a chunk is a cudaMalloc(512) kept live, in
 * place of a pair (the recorded half of 2 x PAIRS x CHUNK allocations is the books' ramp).
 * Prints "live=L depth=D added_ns_median=M added_ns_q1=A added_ns_q3=B off_ns_median=O"
 * (nanoseconds a step, wall time; L and D are -1 for a ramp).
 *
 * usage: pair_chunks LIVE DEPTH PAIRS CHUNK
 *        pair_chunks ramp PAIRS CHUNK */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "pair.h"

/* Seconds a chunk of n steps takes, from step number `first` on, or -1 when a call failed: a
 * step is a pair under `depth` calls, or with depth -1 an allocation of the ramp. */
static double chunk(int depth, int first, int n)
{
    double t = bench_seconds(CLOCK_MONOTONIC);
    void *p;
    for (int i = first; i < first + n; i++)
        if (depth < 0 ? cudaMalloc(&p, 512) != cudaSuccess : pair_at_depth(depth, i))
            return -1;
    return bench_seconds(CLOCK_MONOTONIC) - t;
}

int main(int argc, char **argv)
{
    int ramp = argc == 4 && !strcmp(argv[1], "ramp");
    long live = ramp ? -1 : argc == 5 ? atol(argv[1]) : -2;
    int depth = ramp        ? -1
                : argc == 5 ? atoi(argv[2])
                            : -2,
        pairs = atoi(argv[argc > 3 ? argc - 2 : 0]), size = atoi(argv[argc > 3 ? argc - 1 : 0]);
    if ((!ramp && (live < 0 || depth < 0)) || pairs < 4 || size < 8) {
        fprintf(stderr, "usage: pair_chunks LIVE DEPTH PAIRS CHUNK\n"
                        "       pair_chunks ramp PAIRS CHUNK\n");
        return 2;
    }
    void (*record)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "vt_bench_record");
    if (!record) {
        fprintf(stderr, "pair_chunks: no vt_bench_record: run it under a library built with "
                        "-Dbench_switch=true\n");
        return 2;
    }
    for (long i = 0; i < live; i++) {
        void *p;
        if (cudaMalloc(&p, 512) != cudaSuccess) {
            fprintf(stderr, "pair_chunks: cudaMalloc failed\n");
            return 1;
        }
    }
    double *added = malloc((size_t)pairs * sizeof *added),
           *off = malloc((size_t)pairs * sizeof *off);
    if (!added || !off)
        return 1;
    uint64_t draw = 1;
    for (int k = -4; k < pairs; k++) { /* four pairs of warm-up */
        draw = draw * 6364136223846793005ULL + 1442695040888963407ULL;
        int on_first = (int)(draw >> 63);
        double t[2];
        for (int half = 0; half < 2; half++) {
            int on = half ? !on_first : on_first;
            record(on);
            if ((t[on] = chunk(depth, (2 * (k + 4) + half) * size, size)) < 0) {
                fprintf(stderr, "pair_chunks: an allocation or a free failed\n");
                return 1;
            }
        }
        if (k >= 0) {
            added[k] = (t[1] - t[0]) * 1e9 / size;
            off[k] = t[0] * 1e9 / size;
        }
    }
    record(1);
    qsort(added, (size_t)pairs, sizeof *added, bench_by_value);
    qsort(off, (size_t)pairs, sizeof *off, bench_by_value);
    printf("live=%ld depth=%d added_ns_median=%.1f added_ns_q1=%.1f added_ns_q3=%.1f "
           "off_ns_median=%.1f\n",
           live, depth, added[pairs / 2], added[pairs / 4], added[3 * pairs / 4], off[pairs / 2]);
    return 0;
}
