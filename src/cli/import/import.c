/* vramtap import FILE [-o OUT.json]: recognises the file by its content and hands it to the
 * reader for its format; the replay and the writer are the same for all. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "cli.h"
#include "import.h"
#include "import_jsonstream.h"

typedef int (*reader_fn)(const char *path, vt_trace *tr, vt_err *err);

static void usage(FILE *out)
{
    fprintf(out, "usage: vramtap import FILE [-o OUT.json]\n\n"
                 "Turns a PyTorch trace into a vramtap snapshot for 'vramtap report' and 'vramtap "
                 "diff':\n"
                 "  Kineto profiler traces (.json, .json.gz) recorded with profile_memory=True\n"
                 "  memory snapshots (.pickle, .pickle.gz) from torch.cuda.memory._dump_snapshot\n"
                 "  export_memory_timeline raw files (.raw.json, .raw.json.gz)\n\n"
                 "  -o OUT.json  where to write (default: FILE's name without its extensions,\n"
                 "               plus .vramtap.json, in the working directory; '-': stdout)\n");
}

/* Decides the format from the first bytes (after gzip), never from the name. */
static int sniff(const char *path, reader_fn *reader, vt_err *err)
{
    gzFile gz = gzopen(path, "rb");
    if (!gz) {
        vt_err_set(err, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    unsigned char head[256];
    int n = gzread(gz, head, sizeof head);
    int code;
    const char *msg = vt_gz_message(gz, path, &code);
    /* a damaged stream that still gave some bytes is reported by the reader, with its offset */
    if (n <= 0 && code != Z_OK) {
        vt_err_set(err, "%s: %s: %s", path,
                   code == Z_ERRNO ? "cannot read" : "damaged compressed data",
                   code == Z_ERRNO ? strerror(errno) : msg);
        gzclose(gz);
        return -1;
    }
    gzclose(gz);
    int i = 0;
    while (i < n && strchr(" \t\r\n", head[i]) && head[i])
        i++;
    if (n == 0) {
        vt_err_set(err, "%s: empty file", path);
        return -1;
    }
    if (head[0] == 0x80)
        *reader = vt_read_pickle;
    else if (i < n && head[i] == '{')
        *reader = vt_read_kineto;
    else if (i < n && head[i] == '[')
        *reader = vt_read_timeline;
    else {
        vt_err_set(err,
                   "%s: not a Kineto trace, PyTorch memory snapshot or memory timeline "
                   "(a JSON object, a pickle or a JSON array, optionally gzipped)",
                   path);
        return -1;
    }
    return 0;
}

/* "dir/run.pt.trace.json.gz" -> "run.pt.trace.vramtap.json" */
static char *default_output(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strlen(base);
    if (len > 3 && !strcmp(base + len - 3, ".gz"))
        len -= 3;
    for (size_t i = len; i-- > 1;)
        if (base[i] == '.') {
            len = i;
            break;
        }
    char *out;
    return asprintf(&out, "%.*s.vramtap.json", (int)len, base) < 0 ? NULL : out;
}

static void summary(FILE *out, const vt_replay *rp, const char *dest)
{
    const vt_trace *tr = rp->tr;
    fprintf(out, "vramtap import: %s (%s) -> %s\n", tr->source, tr->format, dest);
    for (size_t d = 0; d < rp->ndevs; d++) {
        const vt_idev *dev = &rp->devs[d];
        const vt_when *w = dev->peak_ev == VT_NONE ? NULL : &rp->when[dev->peak_ev];
        fprintf(out, "  device %d: peak %lld bytes (%.1f MiB)", (int)dev->device,
                (long long)dev->peak, (double)dev->peak / (1 << 20));
        /* outside phases is no phase: "setup" and "other" are the report's words for where
         * such memory was born, not phases the trace ran */
        if (w && (w->phase == VT_SETUP || w->phase == VT_OTHER) && !rp->ninst)
            fprintf(out, ", step %lld (the trace has no phases)", (long long)w->step);
        else if (w && (w->phase == VT_SETUP || w->phase == VT_OTHER))
            fprintf(out, " %s phase, step %lld",
                    w->phase == VT_SETUP ? "before the first" : "after the last",
                    (long long)w->step);
        else if (w)
            fprintf(out, " in %s, step %lld", vt_phase_name((vt_phase)w->phase),
                    (long long)w->step);
        else
            fprintf(out, " at the start of the recording");
        fprintf(out, "; %lld bytes from before the recording\n",
                (long long)dev->before_window_bytes);
        if (dev->unphased_allocs)
            fprintf(out,
                    "  device %d: %lld allocation(s) had no phase evidence (%lld of them "
                    "outside every phase)\n",
                    (int)dev->device, (long long)dev->unphased_allocs,
                    (long long)dev->unphased_outside);
    }
    fprintf(out, "  %zu phase instance(s), %lld step(s) at the end\n", rp->ninst,
            (long long)rp->steps);
    for (size_t i = 0; i < tr->nnotes; i++)
        fprintf(out, "  note: %s\n", tr->notes[i]);
}

int vt_import_read(const char *path, vt_trace *tr, vt_replay *rp, vt_err *err)
{
    *tr = (vt_trace){.source = path, .pid = -1, .rank = -1, .start_unix = NAN};
    *rp = (vt_replay){0};
    reader_fn reader;
    int rc = sniff(path, &reader, err);
    if (!rc)
        rc = reader(path, tr, err);
    if (!rc)
        rc = vt_replay_run(tr, rp, err);
    if (!rc && !rp->ndevs) {
        vt_err_set(err, "%s: no GPU allocations or frees recorded", path);
        rc = -1;
    }
    return rc;
}

int vt_cmd_import(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) {
            if (++i == argc) {
                fprintf(stderr, "vramtap import: %s needs a file name\n", argv[i - 1]);
                return 2;
            }
            out = argv[i];
        } else if (!strncmp(argv[i], "--output=", 9)) {
            out = argv[i] + 9;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "vramtap import: unknown option '%s' (try 'vramtap import --help')\n",
                    argv[i]);
            return 2;
        } else if (in) {
            fprintf(stderr, "vramtap import: one file at a time ('%s' and '%s')\n", in, argv[i]);
            return 2;
        } else {
            in = argv[i];
        }
    }
    if (!in) {
        usage(stderr);
        return 2;
    }
    char *dflt = out ? NULL : default_output(in);
    if (!out && !(out = dflt)) {
        fprintf(stderr, "vramtap import: out of memory\n");
        return 2;
    }
    vt_err err = {{0}};
    vt_trace tr;
    vt_replay rp;
    int rc = vt_import_read(in, &tr, &rp, &err);
    if (!rc)
        rc = vt_snapshot_write(&rp, out, &err);
    if (!rc) {
        for (size_t i = 0; i < tr.nlacks; i++)
            fprintf(stderr, "vramtap import: %s lacks %s\n", in, tr.lacks[i]);
        summary(strcmp(out, "-") ? stdout : stderr, &rp, out);
    } else if (rc != 2) {
        fprintf(stderr, "vramtap import: %s\n", err.msg);
    }
    vt_replay_free(&rp);
    vt_trace_free(&tr);
    free(dflt);
    return rc ? 2 : 0;
}
