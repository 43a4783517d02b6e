/* Writes a synthetic exit snapshot shaped like a training run whose peak falls inside backward:
 * parameters, lazily built state, gradients, optimizer state, an input batch, activations and
 * temporaries, spread over many distinct sites. It exists to time `vramtap report` on large
 * inputs and to cross-check the classifier: with --expect it also writes the category totals
 * it built in, as JSON.
 *
 *   gen_snapshot [--allocs N] [--sites N] [--depth N] [--seed N] [--expect FILE]
 *                [--host NAME --rank N --world N] OUT.json
 *
 * With --host, the process is rank N of --world on that host (pid 4242 + N, local rank N mod 8,
 * torchrun) on a GPU whose UUID is made of the host and local rank.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PARAM, LAZY, GRAD, OPTIM, INPUT, ACT, TEMP, NKINDS };

/* One row per kind: its category, where it is born and where it dies. Steps and instances
 * follow a loop of forward, backward, optimizer per step, so step s has instances 3s+1..3s+3.
 * The peak falls in the backward of step PEAK_STEP. */
#define PEAK_STEP 3
#define FINAL_STEPS 10
static const struct {
    const char *category;
    const char *birth_phase;
    int birth_step, birth_instance;
    const char *death_phase; /* NULL: alive at the end */
    int death_step, death_instance;
    int share; /* of every 100 allocations */
} kinds[NKINDS] = {
    [PARAM] = {"parameters", "setup", 0, 0, NULL, 0, 0, 10},
    [LAZY] = {"parameters", "forward", 0, 1, NULL, 0, 0, 2},
    [GRAD] = {"gradients", "backward", 0, 2, NULL, 0, 0, 10},
    [OPTIM] = {"optimizer_state", "optimizer", 0, 3, NULL, 0, 0, 18},
    [INPUT] = {"activations", "other", PEAK_STEP, 3 * PEAK_STEP, "other", PEAK_STEP + 1,
               3 * PEAK_STEP + 3, 2},
    [ACT] = {"activations", "forward", PEAK_STEP, 3 * PEAK_STEP + 1, "backward", PEAK_STEP,
             3 * PEAK_STEP + 2, 50},
    [TEMP] = {"temporary", "backward", PEAK_STEP, 3 * PEAK_STEP + 2, "backward", PEAK_STEP,
              3 * PEAK_STEP + 2, 8},
};

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rng(void)
{
    /* xorshift64*: deterministic across platforms, so a seed names one file */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1du;
}

static int kind_of(long i)
{
    int slot = (int)(i % 100), acc = 0;
    for (int k = 0; k < NKINDS; k++) {
        acc += kinds[k].share;
        if (slot < acc)
            return k;
    }
    return ACT;
}

static int parse_long(const char *s, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 0)
        return -1;
    *out = v;
    return 0;
}

static void write_sites(FILE *f, long nsites, long depth)
{
    long native = depth - depth / 3;
    for (long s = 0; s < nsites; s++) {
        fprintf(f, "%s\n{\"id\":%ld,\"signature\":\"%016" PRIx64 "\",\"frames\":[", s ? "," : "", s,
                rng());
        for (long d = 0; d < depth; d++) {
            if (d)
                fputc(',', f);
            if (d < native)
                fprintf(f,
                        "{\"type\":\"native\",\"module\":\"libtorch_cuda.so\",\"offset\":"
                        "\"0x%" PRIx64 "\",\"symbol\":\"at::native::kernel_%ld_%ld\"}",
                        rng() & 0xffffff, s % 977, d);
            else
                fprintf(f,
                        "{\"type\":\"python\",\"file\":\"model/layer_%ld.py\",\"function\":"
                        "\"forward_%ld\",\"line\":%ld}",
                        s % 331, d, 10 + (s * 7 + d) % 900);
        }
        fputs("]}", f);
    }
}

int main(int argc, char **argv)
{
    long nallocs = 200000, nsites = 50000, depth = 12, seed = 1, rank = 0, world = 1;
    const char *expect = NULL, *out = NULL, *host = NULL;
    for (int i = 1; i < argc; i++) {
        long *target = !strcmp(argv[i], "--allocs")  ? &nallocs
                       : !strcmp(argv[i], "--sites") ? &nsites
                       : !strcmp(argv[i], "--depth") ? &depth
                       : !strcmp(argv[i], "--seed")  ? &seed
                       : !strcmp(argv[i], "--rank")  ? &rank
                       : !strcmp(argv[i], "--world") ? &world
                                                     : NULL;
        if (!strcmp(argv[i], "--host") && i + 1 < argc) {
            host = argv[++i];
        } else if (target || !strcmp(argv[i], "--expect")) {
            if (i + 1 == argc || (target && parse_long(argv[i + 1], target))) {
                fprintf(stderr, "gen_snapshot: %s needs a number\n", argv[i]);
                return 2;
            }
            if (!target)
                expect = argv[i + 1];
            i++;
        } else if (!out && argv[i][0] != '-') {
            out = argv[i];
        } else {
            fprintf(stderr, "usage: gen_snapshot [--allocs N] [--sites N] [--depth N] [--seed N] "
                            "[--expect FILE] [--host NAME --rank N --world N] OUT.json\n");
            return 2;
        }
    }
    if (!out || nsites < 1 || depth < 1) {
        fprintf(stderr, "gen_snapshot: needs OUT.json, --sites >= 1 and --depth >= 1\n");
        return 2;
    }
    rng_state ^= (uint64_t)seed * 0x100000001b3u;
    FILE *f = fopen(out, "w");
    if (!f) {
        perror(out);
        return 2;
    }

    int64_t total[NKINDS] = {0}, peak = 0;
    int64_t *sizes = malloc(sizeof *sizes * (size_t)(nallocs ? nallocs : 1));
    if (!sizes) {
        fprintf(stderr, "gen_snapshot: out of memory\n");
        return 2;
    }
    for (long i = 0; i < nallocs; i++) {
        /* multiples of 512 bytes, 512 B .. 4 MiB, like caching-allocator rounded tensors */
        sizes[i] = (int64_t)(1 + rng() % 8192) * 512;
        total[kind_of(i)] += sizes[i];
        peak += sizes[i];
    }

    char where[1024] = "\"rank\":{\"rank\":null,\"local_rank\":null,\"source\":null},",
         uuid[128] = "null";
    if (host) {
        snprintf(where, sizeof where,
                 "\"rank\":{\"rank\":%ld,\"local_rank\":%ld,\"source\":\"RANK\"},"
                 "\"launcher\":{\"name\":\"torchrun\",\"job_id\":\"bench\",\"world_size\":%ld,"
                 "\"local_rank\":%ld,\"slurm_job_id\":null},\"host\":{\"name\":\"%s\","
                 "\"peak_bytes\":0,\"peak_time_s\":0,\"live_bytes_at_end\":0,\"allocations\":0},",
                 rank, rank % 8, world, rank % 8, host);
        snprintf(uuid, sizeof uuid, "\"GPU-%.20s-%ld\"", host, rank % 8);
    }
    fprintf(f,
            "{\"format\":\"vramtap-snapshot\",\"version\":1,\"kind\":\"exit\","
            "\"vramtap_version\":\"0.1.0\",\"pid\":%ld,\"prog\":\"python\","
            "\"command\":[\"python\",\"train.py\",\"--synthetic\"],\"start_unix\":1700000000.0,"
            "\"end_time_s\":120.5,%s"
            "\"env\":{\"PYTORCH_CUDA_ALLOC_CONF\":\"backend:cudaMallocAsync\"},"
            "\"env_set\":{\"PYTORCH_CUDA_ALLOC_CONF\":\"backend:cudaMallocAsync\"},"
            "\"modes\":{\"pytorch\":{\"mode\":\"tensor\",\"reason\":\"default\"}},"
            "\"phase_markers\":true,\"steps\":%d,"
            "\"stacks\":{\"native\":true,\"python\":true,\"depth\":%ld},"
            "\"counters\":{\"allocs\":%ld,\"frees\":0,\"unknown_frees\":0,\"failed_calls\":0,"
            "\"oom_calls\":0,\"dropped\":0},"
            "\"devices\":[{\"device\":0,\"uuid\":%s,\"name\":\"Synthetic GPU\","
            "\"total_bytes\":%" PRId64 ",\"peak_bytes\":%" PRId64 ",\"peak_time_s\":60.25,"
            "\"peak_seq\":%ld,\"peak_phase\":\"backward\",\"peak_step\":%d,"
            "\"live_bytes_at_end\":0,\"allocs\":%ld,\"reserved\":{\"source\":\"pool\","
            "\"peak_bytes\":%" PRId64 ",\"current_bytes\":null},\"samples\":[],"
            "\"used_at_peak_bytes\":%" PRId64 "}],\n\"allocations\":[",
            4242 + rank, where, FINAL_STEPS, depth, nallocs, uuid, peak * 2, peak, nallocs,
            PEAK_STEP, nallocs, peak + peak / 8, peak + peak / 8 + (512 << 20));

    for (long i = 0; i < nallocs; i++) {
        int k = kind_of(i);
        double birth_t = kinds[k].birth_step * 15.0 + (double)i * 1e-5;
        fprintf(f,
                "%s\n{\"id\":%ld,\"device\":0,\"size\":%" PRId64 ",\"address\":\"0x%" PRIx64
                "\",\"api\":\"cudaMallocAsync\",\"kind\":\"pool\",\"birth_time_s\":%.6f,",
                i ? "," : "", i, sizes[i], 0x7f0000000000u + (uint64_t)i * 0x1000, birth_t);
        if (kinds[k].death_phase)
            fprintf(f, "\"death_time_s\":%.6f,\"birth_seq\":%ld,\"death_seq\":%ld,", birth_t + 50,
                    i, nallocs + i);
        else
            fprintf(f, "\"death_time_s\":null,\"birth_seq\":%ld,\"death_seq\":null,", i);
        fprintf(f, "\"birth\":{\"phase\":\"%s\",\"step\":%d,\"instance\":%d},",
                kinds[k].birth_phase, kinds[k].birth_step, kinds[k].birth_instance);
        if (kinds[k].death_phase)
            fprintf(f, "\"death\":{\"phase\":\"%s\",\"step\":%d,\"instance\":%d},",
                    kinds[k].death_phase, kinds[k].death_step, kinds[k].death_instance);
        else
            fputs("\"death\":null,", f);
        fprintf(f, "\"site\":%" PRIu64 "}", rng() % (uint64_t)nsites);
    }
    fputs("],\n\"sites\":[", f);
    write_sites(f, nsites, depth);
    fputs("],\n\"timeline\":[],\"timeline_summary\":null,\"oom_events\":[]}\n", f);
    free(sizes);
    if (fclose(f)) {
        perror(out);
        return 2;
    }

    if (expect) {
        FILE *e = fopen(expect, "w");
        if (!e) {
            perror(expect);
            return 2;
        }
        static const char *const categories[] = {"parameters", "gradients", "optimizer_state",
                                                 "activations", "temporary"};
        fprintf(e, "{\"peak_bytes\":%" PRId64, peak);
        for (size_t c = 0; c < sizeof categories / sizeof categories[0]; c++) {
            int64_t bytes = 0;
            for (int k = 0; k < NKINDS; k++)
                if (!strcmp(kinds[k].category, categories[c]))
                    bytes += total[k];
            fprintf(e, ",\"%s\":%" PRId64, categories[c], bytes);
        }
        fputs(",\"unattributed\":0}\n", e);
        if (fclose(e)) {
            perror(expect);
            return 2;
        }
    }
    return 0;
}
