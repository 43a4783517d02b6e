/* `vramtap report` over several processes (torchrun, Slurm, MPI): one line per process with
 * its rank, then the heaviest and the spread. Out-of-memory post-mortems are listed apart:
 * they hold the live set at a failure, not a peak. */
#include <stdlib.h>
#include <string.h>

#include "report.h"

typedef struct {
    char *path, *api;
    vt_snap_kind kind;
    bool oom;
    int64_t rank, local_rank, pid;
    vt_device dev; /* the process's heaviest device */
    bool has_device, native, markers;
    vt_category dominant;
    int64_t cat_bytes[VT_NCATS];
    vt_oom request;
} proc;

static int by_rank(const void *pa, const void *pb)
{
    const proc *a = pa, *b = pb;
    if (a->oom != b->oom)
        return a->oom ? 1 : -1;
    /* unknown ranks (-1) after known ones */
    if (a->rank != b->rank)
        return a->rank < 0 ? 1 : b->rank < 0 ? -1 : a->rank < b->rank ? -1 : 1;
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    return strcmp(a->path, b->path);
}

static int summarise(const char *path, const vt_report_opts *o, proc *p, vt_err *err)
{
    vt_loaded l;
    vt_report_opts quiet = *o;
    quiet.top_n = 0; /* no site is shown: none is parsed */
    if (vt_loaded_open(path, &quiet, &l, err))
        return -1;
    const vt_snapshot *s = &l.snap;
    memset(p, 0, sizeof *p);
    p->path = strdup(path);
    p->kind = s->kind;
    p->oom = s->kind == VT_SNAP_OOM;
    p->rank = s->rank;
    p->local_rank = s->local_rank;
    p->pid = s->pid;
    p->markers = s->phase_markers;
    p->request = s->oom;
    p->request.api = p->request.file = NULL; /* they die with the file */
    p->api = s->has_oom ? strdup(s->oom.api) : NULL;
    bool lost = !p->path || (s->has_oom && !p->api);
    const vt_bill *heaviest = NULL;
    for (size_t i = 0; i < l.nbills; i++) {
        const vt_bill *b = &l.bills[i];
        /* a post-mortem counts the device that failed, an exit snapshot its largest peak */
        if (p->oom ? b->dev->device == s->oom.device
                   : !heaviest || b->dev->peak_bytes > heaviest->dev->peak_bytes)
            heaviest = b;
    }
    if (heaviest) {
        p->has_device = true;
        p->dev = *heaviest->dev;
        p->dev.name = p->dev.uuid = p->dev.reserved_source = NULL; /* they die with the file */
        p->native = heaviest->native;
        p->dominant = vt_bill_dominant(heaviest);
        memcpy(p->cat_bytes, heaviest->cat_bytes, sizeof p->cat_bytes);
    }
    vt_loaded_close(&l);
    if (lost) {
        vt_err_set(err, "%s: out of memory", path);
        return -1;
    }
    return 0;
}

static int64_t dominant_bytes(const proc *p)
{
    return p->cat_bytes[p->dominant] +
           (p->dominant == VT_CAT_UNATTRIBUTED_PERSISTENT ? p->cat_bytes[p->dominant + 1] : 0);
}

static const char *dominant_key(const proc *p)
{
    if (p->native)
        return NULL;
    return p->dominant == VT_CAT_UNATTRIBUTED_PERSISTENT ? "unattributed"
                                                         : vt_category_key(p->dominant);
}

static void print_human(FILE *out, const proc *ps, size_t n, size_t nexit, size_t heavy,
                        size_t light)
{
    char b[32], when[64];
    fprintf(out, "%svramtap report%s  %zu process%s\n\n", vt_on(VT_STYLE_BOLD), vt_off(), nexit,
            nexit == 1 ? "" : "es");
    if (nexit)
        fprintf(out, "  %5s %5s %8s %7s %12s  %-28s %s\n", "rank", "local", "pid", "device", "peak",
                "when", "largest category");
    for (size_t i = 0; i < nexit; i++) {
        const proc *p = &ps[i];
        char rank[24] = "-", local[24] = "-", dev[24] = "-";
        if (p->rank >= 0)
            snprintf(rank, sizeof rank, "%lld", (long long)p->rank);
        if (p->local_rank >= 0)
            snprintf(local, sizeof local, "%lld", (long long)p->local_rank);
        if (p->has_device)
            snprintf(dev, sizeof dev, "cuda:%d", p->dev.device);
        char moment[48];
        snprintf(when, sizeof when, "%s, %.2f s",
                 vt_fmt_when(moment, p->dev.peak_phase, p->dev.peak_step), p->dev.peak_time_s);
        fprintf(out, "  %5s %5s %8lld %7s %12s  %-28s ", rank, local, (long long)p->pid, dev,
                vt_fmt_bytes(b, p->dev.peak_bytes), p->has_device ? when : "-");
        if (!p->has_device || !p->dev.listed_bytes)
            fputs("-\n", out);
        else if (p->native)
            fputs("(native mode: segments)\n", out);
        else
            fprintf(out, "%s %.1f%%\n",
                    p->dominant == VT_CAT_UNATTRIBUTED_PERSISTENT ? "unattributed"
                                                                  : vt_category_label(p->dominant),
                    100.0 * (double)dominant_bytes(p) / (double)p->dev.listed_bytes);
    }
    if (nexit > 1) {
        const proc *h = &ps[heavy], *lt = &ps[light];
        char r[32] = "";
        if (h->rank >= 0)
            snprintf(r, sizeof r, "rank %lld, ", (long long)h->rank);
        fprintf(out, "\n  heaviest  %s%spid %lld%s: %s on cuda:%d\n", vt_on(VT_STYLE_BOLD), r,
                (long long)h->pid, vt_off(), vt_fmt_bytes(b, h->dev.peak_bytes), h->dev.device);
        char lo[32], d[32];
        int64_t spread = h->dev.peak_bytes - lt->dev.peak_bytes;
        fprintf(out, "  spread    %s to %s: %s", vt_fmt_bytes(lo, lt->dev.peak_bytes),
                vt_fmt_bytes(b, h->dev.peak_bytes), vt_fmt_bytes(d, spread));
        if (lt->dev.peak_bytes > 0)
            fprintf(out, ", the heaviest is %.1f%% above the lightest",
                    100.0 * (double)spread / (double)lt->dev.peak_bytes);
        fputc('\n', out);
    }
    if (nexit < n)
        fprintf(out, "\n%sout-of-memory post-mortems%s\n", vt_on(VT_STYLE_BAD), vt_off());
    for (size_t i = nexit; i < n; i++) {
        const proc *p = &ps[i];
        char r[32] = "";
        if (p->rank >= 0)
            snprintf(r, sizeof r, "rank %lld, ", (long long)p->rank);
        fprintf(out, "  %spid %lld: %s asked on cuda:%d via %s, %s  (vramtap report %s)\n", r,
                (long long)p->pid, vt_fmt_bytes(b, p->request.size), p->request.device, p->api,
                vt_fmt_when(when, p->request.phase, p->request.step), p->path);
    }
}

static json_t *int_or_null(int64_t v)
{
    return v < 0 ? json_null() : json_integer(v);
}

static json_t *proc_json(const proc *p)
{
    json_t *cats = json_null();
    if (p->has_device && !p->native) {
        vt_bill fake = {.dev = &p->dev};
        memcpy(fake.cat_bytes, p->cat_bytes, sizeof fake.cat_bytes);
        cats = vt_categories_json(&fake);
    }
    const char *dom = p->has_device && p->dev.listed_bytes ? dominant_key(p) : NULL;
    return json_pack("{s:s, s:s, s:o, s:o, s:o, s:o, s:I, s:o, s:o, s:o}", "file", p->path, "kind",
                     p->kind == VT_SNAP_OOM       ? "oom"
                     : p->kind == VT_SNAP_IMPORT  ? "import"
                     : p->kind == VT_SNAP_INTERIM ? "interim"
                                                  : "exit",
                     "rank", int_or_null(p->rank), "local_rank", int_or_null(p->local_rank), "pid",
                     int_or_null(p->pid), "device",
                     p->has_device ? json_integer(p->dev.device) : json_null(), "peak_bytes",
                     (json_int_t)p->dev.peak_bytes, "peak",
                     p->has_device ? vt_peak_json(&p->dev) : json_null(), "categories", cats,
                     "dominant", dom ? json_string(dom) : json_null());
}

static json_t *to_json(const proc *ps, size_t n, size_t nexit, size_t heavy, size_t light)
{
    json_t *procs = json_array(), *ooms = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *j = proc_json(&ps[i]);
        if (ps[i].oom)
            json_object_set_new(j, "size", json_integer(ps[i].request.size));
        json_array_append_new(ps[i].oom ? ooms : procs, j);
    }
    json_t *heaviest = json_null(), *spread = json_null();
    if (nexit > 1) {
        const proc *h = &ps[heavy], *l = &ps[light];
        heaviest = json_pack("{s:s, s:o, s:o, s:i, s:I}", "file", h->path, "rank",
                             int_or_null(h->rank), "pid", int_or_null(h->pid), "device",
                             h->dev.device, "peak_bytes", (json_int_t)h->dev.peak_bytes);
        spread = json_pack("{s:I, s:I, s:I, s:o}", "min_bytes", (json_int_t)l->dev.peak_bytes,
                           "max_bytes", (json_int_t)h->dev.peak_bytes, "bytes",
                           (json_int_t)(h->dev.peak_bytes - l->dev.peak_bytes), "ratio",
                           l->dev.peak_bytes > 0
                               ? json_real((double)h->dev.peak_bytes / (double)l->dev.peak_bytes)
                               : json_null());
    }
    return json_pack("{s:s, s:i, s:o, s:o, s:o, s:o}", "format", "vramtap-report-processes",
                     "version", 1, "processes", procs, "heaviest", heaviest, "spread", spread,
                     "oom_postmortems", ooms);
}

int vt_report_ranks(char **paths, size_t n, const vt_report_opts *o)
{
    proc *ps = calloc(n, sizeof *ps);
    vt_err err;
    int rc = 0;
    size_t loaded = 0;
    if (!ps) {
        fprintf(stderr, "vramtap report: out of memory\n");
        return 2;
    }
    for (; loaded < n; loaded++)
        if (summarise(paths[loaded], o, &ps[loaded], &err)) {
            fprintf(stderr, "vramtap report: %s\n", err.msg);
            rc = 2;
            break;
        }
    if (rc == 0) {
        qsort(ps, n, sizeof *ps, by_rank);
        size_t nexit = 0, heavy = 0, light = 0;
        while (nexit < n && !ps[nexit].oom)
            nexit++;
        for (size_t i = 1; i < nexit; i++) {
            if (ps[i].dev.peak_bytes > ps[heavy].dev.peak_bytes)
                heavy = i;
            if (ps[i].dev.peak_bytes < ps[light].dev.peak_bytes)
                light = i;
        }
        if (o->json) {
            json_t *doc = to_json(ps, n, nexit, heavy, light);
            vt_print_json(stdout, doc);
            json_decref(doc);
        } else {
            print_human(stdout, ps, n, nexit, heavy, light);
        }
    }
    for (size_t i = 0; i < n; i++) {
        free(ps[i].path);
        free(ps[i].api);
    }
    free(ps);
    return rc;
}
