/* `vramtap report` over several processes (torchrun, Slurm, MPI, on one node or many): a table
 * per node with a line per process and its rank, then the heaviest and the spread, the ranks of
 * the world that left no file, and any GPU (by UUID: ordinals are per process) that two
 * processes used. Out-of-memory post-mortems are listed apart: they hold the live set at a
 * failure, not a peak. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report.h"

#define MAX_THREADS 16

typedef struct {
    char *uuid, *pci_bus_id;
    int device;
} gpu;

typedef struct {
    char *path, *api, *host, *job_id;
    vt_snap_kind kind;
    bool oom;
    int64_t rank, local_rank, pid, world_size;
    size_t oom_events; /* out-of-memory events of the process, its post-mortems included */
    vt_device dev;     /* the process's heaviest device */
    bool has_device, native, markers;
    vt_gaps gaps; /* an import's: its times may be invented, its device unnamed */
    vt_category dominant;
    int64_t cat_bytes[VT_NCATS];
    vt_oom request;
    gpu *gpus; /* every device with a UUID */
    size_t ngpus;
} proc;

/* One process on one GPU, for finding GPUs used twice. */
typedef struct {
    const char *uuid;
    size_t proc;
    int device;
} gpu_use;

typedef struct {
    proc *ps;
    size_t n, nexit, heavy, light;
    int64_t world_size; /* the largest any file names, -1 when none does */
    int64_t *missing;   /* ranks below world_size no file names */
    size_t nmissing;
    gpu_use *uses; /* sorted by UUID */
    size_t nuses;
} summary;

/* Host names in natural order (node2 before node10); files that do not name their host after
 * those that do. */
static int strcmp_null(const char *a, const char *b)
{
    if (!a || !b)
        return a == b ? 0 : a ? -1 : 1;
    return strverscmp(a, b);
}

static int by_node_rank(const void *pa, const void *pb)
{
    const proc *a = pa, *b = pb;
    if (a->oom != b->oom)
        return a->oom ? 1 : -1;
    int c = strcmp_null(a->host, b->host);
    if (c)
        return c;
    /* unknown ranks (-1) after known ones */
    if (a->rank != b->rank)
        return a->rank < 0 ? 1 : b->rank < 0 ? -1 : a->rank < b->rank ? -1 : 1;
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    return strcmp(a->path, b->path);
}

static char *dup_or_null(const char *s, bool *lost)
{
    char *d = s ? strdup(s) : NULL;
    *lost |= s && !d;
    return d;
}

static int summarise(const char *path, const vt_report_opts *o, proc *p, vt_err *err)
{
    vt_loaded l;
    vt_report_opts quiet = *o;
    quiet.top_n = 0; /* no site is shown: none is parsed */
    if (vt_loaded_open(path, &quiet, &l, err))
        return -1;
    const vt_snapshot *s = &l.snap;
    bool lost = false;
    memset(p, 0, sizeof *p);
    p->path = dup_or_null(path, &lost);
    p->kind = s->kind;
    p->oom = s->kind == VT_SNAP_OOM;
    p->rank = s->rank;
    p->local_rank = s->local_rank;
    p->pid = s->pid;
    p->world_size = s->world_size;
    p->host = dup_or_null(s->host, &lost);
    p->job_id = dup_or_null(s->job_id, &lost);
    p->oom_events = s->noom_events;
    p->markers = s->phase_markers;
    vt_gaps_of(s, &p->gaps);
    p->request = s->oom;
    p->request.api = p->request.file = NULL; /* they die with the file */
    p->api = s->has_oom ? dup_or_null(s->oom.api, &lost) : NULL;
    p->gpus = calloc(s->ndevices ? s->ndevices : 1, sizeof *p->gpus);
    lost |= !p->gpus;
    for (size_t i = 0; p->gpus && i < s->ndevices; i++) {
        const vt_device *d = &s->devices[i];
        if (!d->uuid)
            continue;
        gpu *g = &p->gpus[p->ngpus++];
        g->device = d->device;
        g->uuid = dup_or_null(d->uuid, &lost);
        g->pci_bus_id = dup_or_null(d->pci_bus_id, &lost);
    }
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
        /* they die with the file */
        p->dev.name = p->dev.uuid = p->dev.pci_bus_id = p->dev.reserved_source = NULL;
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

static void proc_free(proc *p)
{
    for (size_t i = 0; i < p->ngpus; i++) {
        free(p->gpus[i].uuid);
        free(p->gpus[i].pci_bus_id);
    }
    free(p->gpus);
    free(p->path);
    free(p->api);
    free(p->host);
    free(p->job_id);
}

static int by_uuid(const void *pa, const void *pb)
{
    const gpu_use *a = pa, *b = pb;
    int c = strcmp(a->uuid, b->uuid);
    return c ? c : a->proc < b->proc ? -1 : a->proc > b->proc;
}

static int by_int64(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return a < b ? -1 : a > b;
}

/* Post-mortems count toward their process's out-of-memory events; the world's ranks that no
 * file names are missing; GPU uses are sorted so that a GPU used twice is adjacent. */
static int analyse(summary *s)
{
    proc *ps = s->ps;
    s->world_size = -1;
    size_t nranks = 0, ngpus = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (ps[i].world_size > s->world_size)
            s->world_size = ps[i].world_size;
        nranks += ps[i].rank >= 0;
        ngpus += ps[i].oom ? 0 : ps[i].ngpus;
        if (!ps[i].oom)
            continue;
        for (size_t j = 0; j < s->nexit; j++)
            if (ps[j].pid == ps[i].pid && !strcmp_null(ps[j].host, ps[i].host) &&
                ps[j].oom_events == 0)
                ps[j].oom_events = 1;
    }
    int64_t *ranks = malloc((nranks ? nranks : 1) * sizeof *ranks);
    s->uses = malloc((ngpus ? ngpus : 1) * sizeof *s->uses);
    if (!ranks || !s->uses) {
        free(ranks);
        return -1;
    }
    nranks = 0;
    for (size_t i = 0; i < s->n; i++)
        if (ps[i].rank >= 0)
            ranks[nranks++] = ps[i].rank;
    qsort(ranks, nranks, sizeof *ranks, by_int64);
    if (s->world_size > 0) {
        size_t upto = 0;
        for (int64_t r = 0; r < s->world_size; r++) {
            while (upto < nranks && ranks[upto] < r)
                upto++;
            if (upto == nranks || ranks[upto] != r)
                s->nmissing++;
        }
        s->missing = malloc((s->nmissing ? s->nmissing : 1) * sizeof *s->missing);
        if (!s->missing) {
            free(ranks);
            return -1;
        }
        s->nmissing = upto = 0;
        for (int64_t r = 0; r < s->world_size; r++) {
            while (upto < nranks && ranks[upto] < r)
                upto++;
            if (upto == nranks || ranks[upto] != r)
                s->missing[s->nmissing++] = r;
        }
    }
    free(ranks);
    for (size_t i = 0; i < s->nexit; i++)
        for (size_t g = 0; g < ps[i].ngpus; g++)
            s->uses[s->nuses++] = (gpu_use){ps[i].gpus[g].uuid, i, ps[i].gpus[g].device};
    qsort(s->uses, s->nuses, sizeof *s->uses, by_uuid);
    return 0;
}

/* The uses [i, *end) of one GPU; whether more than one process made them. */
static bool shared_gpu(const summary *s, size_t i, size_t *end)
{
    size_t j = i + 1;
    bool shared = false;
    while (j < s->nuses && !strcmp(s->uses[j].uuid, s->uses[i].uuid)) {
        shared |= s->uses[j].proc != s->uses[i].proc;
        j++;
    }
    *end = j;
    return shared;
}

static const char *bus_of(const summary *s, const gpu_use *u)
{
    const proc *p = &s->ps[u->proc];
    for (size_t g = 0; g < p->ngpus; g++)
        if (p->gpus[g].device == u->device)
            return p->gpus[g].pci_bus_id;
    return NULL;
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

/* "rank 3, pid 42" or "pid 42", with " on HOST" when known; the file when the pid is not
 * (imports). */
static const char *who(char *buf, size_t len, const proc *p, bool with_host)
{
    int n = p->rank >= 0 ? snprintf(buf, len, "rank %lld, ", (long long)p->rank) : 0;
    if (p->pid >= 0)
        n += snprintf(buf + n, len - (size_t)n, "pid %lld", (long long)p->pid);
    else
        n += snprintf(buf + n, len - (size_t)n, "%s", p->path);
    if (with_host && p->host)
        snprintf(buf + n, len - (size_t)n, " on %s", p->host);
    return buf;
}

/* "cuda:0", or "device 0" when an import does not say which (a GPU or the CPU) */
static const char *device_name(char *buf, size_t len, const proc *p)
{
    snprintf(buf, len, "%s%d", p->gaps.device_unnamed ? "device " : "cuda:", p->dev.device);
    return buf;
}

/* by_file: some rows have no pid (imports), so each row ends with its file; devw: the device
 * column's width */
static void print_row(FILE *out, const proc *p, bool by_file, int devw)
{
    char b[32], when[64], moment[48], rank[24] = "-", local[24] = "-", pid[24] = "-", dev[24] = "-",
                                      cat[64] = "-";
    if (p->rank >= 0)
        snprintf(rank, sizeof rank, "%lld", (long long)p->rank);
    if (p->local_rank >= 0)
        snprintf(local, sizeof local, "%lld", (long long)p->local_rank);
    if (p->pid >= 0)
        snprintf(pid, sizeof pid, "%lld", (long long)p->pid);
    if (p->has_device)
        device_name(dev, sizeof dev, p);
    int n =
        snprintf(when, sizeof when, "%s", vt_fmt_when(moment, p->dev.peak_phase, p->dev.peak_step));
    if (!p->gaps.times_invented)
        snprintf(when + n, sizeof when - (size_t)n, ", %.2f s", p->dev.peak_time_s);
    if (p->has_device && p->dev.listed_bytes && p->native)
        snprintf(cat, sizeof cat, "(native mode: segments)");
    else if (p->has_device && p->dev.listed_bytes)
        snprintf(cat, sizeof cat, "%s %.1f%%",
                 p->dominant == VT_CAT_UNATTRIBUTED_PERSISTENT ? "unattributed"
                                                               : vt_category_label(p->dominant),
                 100.0 * (double)dominant_bytes(p) / (double)p->dev.listed_bytes);
    fprintf(out, "  %5s %5s %8s %*s %12s  %-28s %-24s ", rank, local, pid, devw, dev,
            vt_fmt_bytes(b, p->dev.peak_bytes), p->has_device ? when : "-", cat);
    if (by_file)
        fprintf(out, "%-3s  %s\n", p->oom_events ? "yes" : "-", p->path);
    else
        fprintf(out, "%s\n", p->oom_events ? "yes" : "-");
}

/* "3, 5-9, 12" */
static void print_ranges(FILE *out, const int64_t *v, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && v[j + 1] == v[j] + 1)
            j++;
        fprintf(out, "%s%lld", i ? ", " : "", (long long)v[i]);
        if (j > i)
            fprintf(out, "%s%lld", j == i + 1 ? ", " : "-", (long long)v[j]);
        i = j + 1;
    }
}

static void print_human(FILE *out, const summary *s)
{
    const proc *ps = s->ps;
    size_t nodes = 0;
    for (size_t i = 0; i < s->nexit; i++)
        nodes += !i || strcmp_null(ps[i].host, ps[i - 1].host);
    char b[32];
    bool by_file = false;
    int devw = 7; /* "device 0" of an import that does not say which takes 8 */
    for (size_t i = 0; i < s->nexit; i++) {
        by_file |= ps[i].pid < 0;
        if (ps[i].gaps.device_unnamed)
            devw = 8;
    }
    fprintf(out, "%svramtap report%s  %zu process%s on %zu node%s\n", vt_on(VT_STYLE_BOLD),
            vt_off(), s->nexit, s->nexit == 1 ? "" : "es", nodes, nodes == 1 ? "" : "s");
    for (size_t i = 0; i < s->nexit; i++) {
        if (!i || strcmp_null(ps[i].host, ps[i - 1].host)) {
            size_t k = i;
            while (k < s->nexit && !strcmp_null(ps[k].host, ps[i].host))
                k++;
            fprintf(out, "\n%s%s%s  %zu process%s\n", vt_on(VT_STYLE_BOLD),
                    ps[i].host ? ps[i].host : "host not recorded", vt_off(), k - i,
                    k - i == 1 ? "" : "es");
            fprintf(out, "  %5s %5s %8s %*s %12s  %-28s %-24s %s\n", "rank", "local", "pid", devw,
                    "device", "peak", "when", "largest category", by_file ? "oom  file" : "oom");
        }
        print_row(out, &ps[i], by_file, devw);
    }
    if (s->nexit > 1) {
        const proc *h = &ps[s->heavy], *lt = &ps[s->light];
        char w[320], lo[32], d[32], dev[24];
        fprintf(out, "\n  heaviest  %s%s%s: %s on %s\n", vt_on(VT_STYLE_BOLD),
                who(w, sizeof w, h, true), vt_off(), vt_fmt_bytes(b, h->dev.peak_bytes),
                device_name(dev, sizeof dev, h));
        int64_t spread = h->dev.peak_bytes - lt->dev.peak_bytes;
        fprintf(out, "  spread    %s to %s: %s", vt_fmt_bytes(lo, lt->dev.peak_bytes),
                vt_fmt_bytes(b, h->dev.peak_bytes), vt_fmt_bytes(d, spread));
        if (lt->dev.peak_bytes > 0)
            fprintf(out, ", the heaviest is %.1f%% above the lightest",
                    100.0 * (double)spread / (double)lt->dev.peak_bytes);
        fputc('\n', out);
    }
    if (s->nmissing) {
        fprintf(out, "  %smissing%s   rank%s ", vt_on(VT_STYLE_WARN), vt_off(),
                s->nmissing == 1 ? "" : "s");
        print_ranges(out, s->missing, s->nmissing);
        fprintf(out, " of world size %lld: no snapshot given\n", (long long)s->world_size);
    }
    for (size_t i = 0, end; i < s->nuses; i = end) {
        if (!shared_gpu(s, i, &end))
            continue;
        const char *bus = bus_of(s, &s->uses[i]);
        fprintf(out, "  %sshared GPU%s %s%s%s%s used by", vt_on(VT_STYLE_WARN), vt_off(),
                s->uses[i].uuid, bus ? " (" : "", bus ? bus : "", bus ? ")" : "");
        for (size_t j = i; j < end; j++) {
            char w[320];
            fprintf(out, "%s %s (cuda:%d)", j > i ? ";" : "",
                    who(w, sizeof w, &ps[s->uses[j].proc], true), s->uses[j].device);
        }
        fputc('\n', out);
    }
    if (s->nexit < s->n)
        fprintf(out, "\n%sout-of-memory post-mortems%s\n", vt_on(VT_STYLE_BAD), vt_off());
    for (size_t i = s->nexit; i < s->n; i++) {
        const proc *p = &ps[i];
        char w[320], when[48];
        fprintf(out, "  %s: %s asked on cuda:%d via %s, %s  (vramtap report %s)\n",
                who(w, sizeof w, p, true), vt_fmt_bytes(b, p->request.size), p->request.device,
                p->api, vt_fmt_when(when, p->request.phase, p->request.step), p->path);
    }
}

static json_t *int_or_null(int64_t v)
{
    return v < 0 ? json_null() : json_integer(v);
}

static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
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
    json_t *gpus = json_array();
    for (size_t g = 0; g < p->ngpus; g++)
        json_array_append_new(gpus, json_pack("{s:i, s:s, s:o}", "device", p->gpus[g].device,
                                              "uuid", p->gpus[g].uuid, "pci_bus_id",
                                              str_or_null(p->gpus[g].pci_bus_id)));
    return json_pack("{s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:I, s:o, s:o, s:o, s:I, s:o}", "file",
                     p->path, "kind",
                     p->kind == VT_SNAP_OOM       ? "oom"
                     : p->kind == VT_SNAP_IMPORT  ? "import"
                     : p->kind == VT_SNAP_INTERIM ? "interim"
                                                  : "exit",
                     "host", str_or_null(p->host), "rank", int_or_null(p->rank), "local_rank",
                     int_or_null(p->local_rank), "pid", int_or_null(p->pid), "device",
                     p->has_device ? json_integer(p->dev.device) : json_null(), "peak_bytes",
                     (json_int_t)p->dev.peak_bytes, "peak",
                     p->has_device ? vt_peak_json(&p->dev) : json_null(), "categories", cats,
                     "dominant", dom ? json_string(dom) : json_null(), "oom_events",
                     (json_int_t)p->oom_events, "gpus", gpus);
}

static json_t *who_json(const proc *p)
{
    return json_pack("{s:s, s:o, s:o, s:o}", "file", p->path, "host", str_or_null(p->host), "rank",
                     int_or_null(p->rank), "pid", int_or_null(p->pid));
}

static json_t *to_json(const summary *s)
{
    const proc *ps = s->ps;
    json_t *procs = json_array(), *ooms = json_array(), *missing = json_array(),
           *shared = json_array();
    for (size_t i = 0; i < s->n; i++) {
        json_t *j = proc_json(&ps[i]);
        if (ps[i].oom)
            json_object_set_new(j, "size", json_integer(ps[i].request.size));
        json_array_append_new(ps[i].oom ? ooms : procs, j);
    }
    json_t *heaviest = json_null(), *spread = json_null();
    if (s->nexit > 1) {
        const proc *h = &ps[s->heavy], *l = &ps[s->light];
        heaviest = who_json(h);
        json_object_set_new(heaviest, "device", json_integer(h->dev.device));
        json_object_set_new(heaviest, "peak_bytes", json_integer(h->dev.peak_bytes));
        spread = json_pack("{s:I, s:I, s:I, s:o}", "min_bytes", (json_int_t)l->dev.peak_bytes,
                           "max_bytes", (json_int_t)h->dev.peak_bytes, "bytes",
                           (json_int_t)(h->dev.peak_bytes - l->dev.peak_bytes), "ratio",
                           l->dev.peak_bytes > 0
                               ? json_real((double)h->dev.peak_bytes / (double)l->dev.peak_bytes)
                               : json_null());
    }
    for (size_t i = 0; i < s->nmissing; i++)
        json_array_append_new(missing, json_integer(s->missing[i]));
    for (size_t i = 0, end; i < s->nuses; i = end) {
        if (!shared_gpu(s, i, &end))
            continue;
        json_t *users = json_array();
        for (size_t j = i; j < end; j++) {
            json_t *u = who_json(&ps[s->uses[j].proc]);
            json_object_set_new(u, "device", json_integer(s->uses[j].device));
            json_array_append_new(users, u);
        }
        json_array_append_new(shared,
                              json_pack("{s:s, s:o, s:o}", "uuid", s->uses[i].uuid, "pci_bus_id",
                                        str_or_null(bus_of(s, &s->uses[i])), "processes", users));
    }
    return json_pack("{s:s, s:i, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "format",
                     "vramtap-report-processes", "version", 1, "processes", procs, "heaviest",
                     heaviest, "spread", spread, "world_size", int_or_null(s->world_size),
                     "missing_ranks", missing, "shared_gpus", shared, "oom_postmortems", ooms);
}

/* Files are read by several threads: a job's worth of snapshots (hundreds of ranks) is parsed
 * JSON in the hundreds of megabytes. Each thread takes the next file; the first failure in
 * file order is the one reported. */
typedef struct {
    char **paths;
    const vt_report_opts *o;
    proc *ps;
    size_t n;
    atomic_size_t next;
    atomic_size_t first_bad; /* n when none */
    vt_err *errs;
} loader;

static void *load_files(void *arg)
{
    loader *ld = arg;
    for (size_t i; (i = atomic_fetch_add(&ld->next, 1)) < ld->n;) {
        if (atomic_load(&ld->first_bad) < i)
            continue;
        if (summarise(ld->paths[i], ld->o, &ld->ps[i], &ld->errs[i]) == 0)
            continue;
        size_t bad = atomic_load(&ld->first_bad);
        while (i < bad && !atomic_compare_exchange_weak(&ld->first_bad, &bad, i))
            ;
    }
    return NULL;
}

static int load_all(char **paths, size_t n, const vt_report_opts *o, proc *ps)
{
    loader ld = {paths, o, ps, n, 0, n, calloc(n, sizeof *ld.errs)};
    if (!ld.errs) {
        fprintf(stderr, "vramtap report: out of memory\n");
        return -1;
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t nthreads = cpus < 1 ? 1 : cpus > MAX_THREADS ? MAX_THREADS : (size_t)cpus;
    if (nthreads > n)
        nthreads = n;
    pthread_t threads[MAX_THREADS];
    size_t started = 0;
    while (started + 1 < nthreads && !pthread_create(&threads[started], NULL, load_files, &ld))
        started++;
    load_files(&ld);
    for (size_t i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    size_t bad = atomic_load(&ld.first_bad);
    if (bad < n)
        fprintf(stderr, "vramtap report: %s\n", ld.errs[bad].msg);
    free(ld.errs);
    return bad < n ? -1 : 0;
}

int vt_report_ranks(char **paths, size_t n, const vt_report_opts *o)
{
    summary s = {.ps = calloc(n, sizeof *s.ps), .n = n};
    int rc = 0;
    if (!s.ps) {
        fprintf(stderr, "vramtap report: out of memory\n");
        return 2;
    }
    if (load_all(paths, n, o, s.ps))
        rc = 2;
    if (rc == 0) {
        qsort(s.ps, n, sizeof *s.ps, by_node_rank);
        while (s.nexit < n && !s.ps[s.nexit].oom)
            s.nexit++;
        for (size_t i = 1; i < s.nexit; i++) {
            if (s.ps[i].dev.peak_bytes > s.ps[s.heavy].dev.peak_bytes)
                s.heavy = i;
            if (s.ps[i].dev.peak_bytes < s.ps[s.light].dev.peak_bytes)
                s.light = i;
        }
        if (analyse(&s)) {
            fprintf(stderr, "vramtap report: out of memory\n");
            rc = 2;
        }
    }
    if (rc == 0 && o->json) {
        json_t *doc = to_json(&s);
        vt_print_json(stdout, doc);
        json_decref(doc);
    } else if (rc == 0) {
        print_human(stdout, &s);
    }
    for (size_t i = 0; i < n; i++)
        proc_free(&s.ps[i]);
    free(s.ps);
    free(s.missing);
    free(s.uses);
    return rc;
}
