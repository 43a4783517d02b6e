/* Writes a replayed import as a vramtap snapshot (docs/snapshot-format.md, kind "import"),
 * plus the additive `import` object and per-allocation `before_window` flag that say what the
 * source could not tell (docs/import.md). */
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "import.h"
#include "snapshot_keys.h"

#define TIMELINE_STEPS 64
/* the library's default cap on history events */
#define VT_HISTORY_MAX_EVENTS 1000000

/* jansson's setters take the new value's reference even on failure, so building can go on
 * and one check at the end catches running out of memory. */
typedef struct {
    bool failed;
} builder;

static json_t *set(builder *b, json_t *obj, const char *key, json_t *v)
{
    if (!v || json_object_set_new(obj, key, v))
        b->failed = true;
    return v;
}

static json_t *append(builder *b, json_t *arr, json_t *v)
{
    if (!v || json_array_append_new(arr, v))
        b->failed = true;
    return v;
}

static json_t *int_or_null(int64_t v, bool known)
{
    return known ? json_integer(v) : json_null();
}

static json_t *address(uint64_t addr)
{
    char buf[24];
    if (!addr)
        return json_null();
    snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)addr);
    return json_string(buf);
}

static json_t *moment(builder *b, const vt_when *w)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    set(b, o, "phase", json_string(vt_phase_name((vt_phase)w->phase)));
    set(b, o, "step", json_integer(w->step));
    set(b, o, "instance", json_integer(w->instance));
    return o;
}

typedef struct {
    builder b;
    const vt_replay *rp;
    int64_t *ids;      /* per allocation of the replay: its id, in birth order */
    int32_t *site_map; /* trace site -> output index, -1 not yet used */
    int32_t *site_order;
    size_t nsites_out;
    vt_when before; /* the moment given to allocations from before the window */
} writer;

static json_t *site_ref(writer *w, int32_t site)
{
    if (site < 0)
        return json_null();
    if (w->site_map[site] < 0) {
        w->site_map[site] = (int32_t)w->nsites_out;
        w->site_order[w->nsites_out++] = site;
    }
    return json_integer(w->site_map[site]);
}

static json_t *frame_json(builder *b, const vt_iframe *f)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    switch (f->type) {
    case VT_FRAME_PYTHON:
        set(b, o, "type", json_string("python"));
        set(b, o, "file", json_string(f->a));
        set(b, o, "function", json_string(f->b));
        set(b, o, "line", f->line >= 0 ? json_integer(f->line) : json_null());
        break;
    case VT_FRAME_NATIVE:
        set(b, o, "type", json_string("native"));
        set(b, o, "module", f->a ? json_string(f->a) : json_null());
        set(b, o, "offset", json_null());
        set(b, o, "symbol", json_string(f->b));
        break;
    default:
        set(b, o, "type", json_string("op"));
        set(b, o, "name", json_string(f->a));
    }
    return o;
}

static json_t *sites_json(writer *w)
{
    const vt_isites *s = &w->rp->tr->sites;
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < w->nsites_out; i++) {
        json_t *o = append(&w->b, arr, json_object());
        json_t *frames = json_array();
        char sig[17];
        size_t n;
        const int32_t *f = vt_isite_frames(s, w->site_order[i], &n);
        vt_isite_signature(s, w->site_order[i], sig);
        if (!o || !frames) {
            json_decref(frames);
            w->b.failed = true;
            break;
        }
        set(&w->b, o, "id", json_integer((json_int_t)i));
        set(&w->b, o, "signature", json_string(sig));
        for (size_t j = 0; j < n; j++)
            append(&w->b, frames, frame_json(&w->b, &s->frames[f[j]]));
        set(&w->b, o, "frames", frames);
    }
    return arr;
}

static double ev_time(const vt_replay *rp, size_t ev)
{
    return ev == VT_NONE ? 0.0 : rp->tr->ev[ev].t;
}

static int cmp_birth(const void *pa, const void *pb)
{
    const vt_ialloc *a = *(const vt_ialloc *const *)pa, *b = *(const vt_ialloc *const *)pb;
    /* before the window (birth VT_NONE) first, then in birth order */
    size_t ba = a->birth == VT_NONE ? 0 : a->birth + 1, bb = b->birth == VT_NONE ? 0 : b->birth + 1;
    if (ba != bb)
        return ba < bb ? -1 : 1;
    return (a > b) - (a < b);
}

static json_t *alloc_json(writer *w, const vt_ialloc *a)
{
    const vt_replay *rp = w->rp;
    const vt_trace *tr = rp->tr;
    json_t *o = json_object();
    if (!o)
        return NULL;
    set(&w->b, o, "id", json_integer(w->ids[a - rp->allocs]));
    set(&w->b, o, "device", json_integer(a->device));
    set(&w->b, o, "size", json_integer(a->size));
    set(&w->b, o, "address", address(a->addr));
    set(&w->b, o, "api", json_string("pytorch"));
    set(&w->b, o, "kind", json_string("device"));
    set(&w->b, o, "birth_time_s", json_real(ev_time(rp, a->birth)));
    set(&w->b, o, "death_time_s",
        a->death == VT_NONE ? json_null() : json_real(ev_time(rp, a->death)));
    set(&w->b, o, "birth_seq", json_integer(a->birth == VT_NONE ? 0 : (json_int_t)a->birth + 1));
    set(&w->b, o, "death_seq", int_or_null((int64_t)a->death + 1, a->death != VT_NONE));
    vt_when before = w->before;
    before.phase = a->birth_phase;
    set(&w->b, o, "birth", moment(&w->b, a->birth == VT_NONE ? &before : &rp->when[a->birth]));
    set(&w->b, o, "death", a->death == VT_NONE ? json_null() : moment(&w->b, &rp->when[a->death]));
    set(&w->b, o, "site", site_ref(w, a->site));
    if (a->mpath)
        set(&w->b, o, "module_path", json_integer(a->mpath - 1));
    set(&w->b, o, "before_window", json_boolean(a->before_window));
    if (a->before_window)
        set(&w->b, o, "birth_phase_from",
            a->birth_from == VT_BIRTH_FROM_STACK  ? json_string("allocation_stack")
            : a->birth_from == VT_BIRTH_FROM_FREE ? json_string("freeing_phase")
                                                  : json_null());
    if (tr->ncategories)
        set(&w->b, o, "pytorch_category",
            json_string(a->category < tr->ncategories ? tr->category_names[a->category]
                                                      : "unknown"));
    return o;
}

static bool live_at_its_peak(const vt_replay *rp, const vt_ialloc *a)
{
    for (size_t d = 0; d < rp->ndevs; d++)
        if (rp->devs[d].device == a->device)
            return vt_ialloc_live_at(a, rp->devs[d].peak_ev);
    return false;
}

/* Ids in birth order for every allocation of the replay: allocations[] and the history name
 * them alike. */
static int number_allocations(writer *w)
{
    const vt_replay *rp = w->rp;
    const vt_ialloc **order = malloc((rp->nallocs + 1) * sizeof *order);
    w->ids = malloc((rp->nallocs + 1) * sizeof *w->ids);
    if (!order || !w->ids) {
        free(order);
        return -1;
    }
    for (size_t j = 0; j < rp->nallocs; j++)
        order[j] = &rp->allocs[j];
    qsort(order, rp->nallocs, sizeof *order, cmp_birth);
    for (size_t i = 0; i < rp->nallocs; i++)
        w->ids[order[i] - rp->allocs] = (int64_t)i;
    free(order);
    return 0;
}

/* Every allocation live at its device's peak, in birth order (ids ascend). */
static json_t *allocations_json(writer *w)
{
    const vt_replay *rp = w->rp;
    const vt_ialloc **live = malloc((rp->nallocs + 1) * sizeof *live);
    json_t *arr = json_array();
    if (!live || !arr) {
        free(live);
        json_decref(arr);
        return NULL;
    }
    size_t n = 0;
    for (size_t j = 0; j < rp->nallocs; j++)
        if (live_at_its_peak(rp, &rp->allocs[j]))
            live[n++] = &rp->allocs[j];
    qsort(live, n, sizeof *live, cmp_birth);
    for (size_t i = 0; i < n && !w->b.failed; i++)
        append(&w->b, arr, alloc_json(w, live[i]));
    free(live);
    return arr;
}

/* The whole trace is one history window: every allocation and free, up to the cap. */
typedef struct {
    size_t ev;
    const vt_ialloc *a;
} hist_event;

static int by_event(const void *pa, const void *pb)
{
    const hist_event *a = pa, *b = pb;
    return (a->ev > b->ev) - (a->ev < b->ev);
}

static void history_json(writer *w, json_t *root)
{
    const vt_replay *rp = w->rp;
    builder *b = &w->b;
    hist_event *ev = malloc((2 * rp->nallocs + 1) * sizeof *ev);
    bool *listed = calloc(rp->nallocs + 1, sizeof *listed);
    json_t *h = set(b, root, VT_K_HISTORY, json_object());
    json_t *extra = set(b, root, VT_K_HISTORY_ALLOCATIONS, json_array());
    json_t *events = set(b, root, VT_K_HISTORY_EVENTS, json_array());
    if (!ev || !listed || !h || !extra || !events) {
        free(ev);
        free(listed);
        b->failed = true;
        return;
    }
    size_t n = 0;
    for (size_t j = 0; j < rp->nallocs; j++) {
        const vt_ialloc *a = &rp->allocs[j];
        if (a->birth != VT_NONE)
            ev[n++] = (hist_event){a->birth, a};
        if (a->death != VT_NONE)
            ev[n++] = (hist_event){a->death, a};
    }
    qsort(ev, n, sizeof *ev, by_event);
    size_t kept = n < VT_HISTORY_MAX_EVENTS ? n : VT_HISTORY_MAX_EVENTS;
    for (size_t i = 0; i < kept && !b->failed; i++) {
        const vt_ialloc *a = ev[i].a;
        json_t *e = append(b, events, json_array());
        if (!e)
            break;
        append(b, e, json_real(rp->tr->ev[ev[i].ev].t));
        append(b, e, json_integer(w->ids[a - rp->allocs]));
        append(b, e, json_integer(ev[i].ev == a->birth ? a->size : -a->size));
        if (!listed[a - rp->allocs] && !live_at_its_peak(rp, a))
            append(b, extra, alloc_json(w, a));
        listed[a - rp->allocs] = true;
    }
    set(b, h, "steps", json_null());
    set(b, h, "max_events", json_integer(VT_HISTORY_MAX_EVENTS));
    set(b, h, "dropped", json_integer((json_int_t)(n - kept)));
    json_t *wins = set(b, h, "windows", json_array());
    json_t *win = wins ? append(b, wins, json_object()) : NULL;
    json_t *devs = win ? set(b, win, "devices", json_array()) : NULL;
    for (size_t d = 0; devs && d < rp->ndevs; d++)
        append(b, devs, json_integer(rp->devs[d].device));
    if (win) {
        set(b, win, "reason", json_string("trace"));
        set(b, win, "start_s", json_real(rp->tr->nev ? rp->tr->ev[0].t : 0.0));
        set(b, win, "end_s", json_real(kept ? rp->tr->ev[ev[kept - 1].ev].t : 0.0));
        set(b, win, "start_seq", json_integer(1));
        set(b, win, "first_event", json_integer(0));
        set(b, win, "events", json_integer((json_int_t)kept));
        set(b, win, "truncated", json_boolean(kept < n));
    }
    free(ev);
    free(listed);
}

static json_t *devices_json(writer *w)
{
    const vt_replay *rp = w->rp;
    const vt_trace *tr = rp->tr;
    json_t *arr = json_array();
    for (size_t d = 0; arr && d < rp->ndevs; d++) {
        const vt_idev *dev = &rp->devs[d];
        const vt_devinfo *info = NULL;
        for (size_t i = 0; i < tr->ndevs; i++)
            if (tr->devs[i].device == dev->device)
                info = &tr->devs[i];
        json_t *o = append(&w->b, arr, json_object());
        if (!o)
            break;
        const vt_when *pw = dev->peak_ev == VT_NONE ? &w->before : &rp->when[dev->peak_ev];
        set(&w->b, o, "device", json_integer(dev->device));
        set(&w->b, o, "uuid", json_null());
        set(&w->b, o, "pci_bus_id", json_null());
        set(&w->b, o, "name", info && info->name ? json_string(info->name) : json_null());
        set(&w->b, o, "total_bytes",
            int_or_null(info ? info->total_bytes : -1, info && info->total_bytes >= 0));
        set(&w->b, o, "peak_bytes", json_integer(dev->peak));
        set(&w->b, o, "peak_time_s", json_real(ev_time(rp, dev->peak_ev)));
        set(&w->b, o, "peak_seq",
            json_integer(dev->peak_ev == VT_NONE ? 0 : (json_int_t)dev->peak_ev + 1));
        set(&w->b, o, "peak_phase", json_string(vt_phase_name((vt_phase)pw->phase)));
        set(&w->b, o, "peak_step", json_integer(pw->step));
        set(&w->b, o, "live_bytes_at_end", json_integer(dev->live_end));
        set(&w->b, o, "allocs", json_integer(dev->allocs));
        if (info && info->reserved_peak >= 0) {
            json_t *r = set(&w->b, o, "reserved", json_object());
            if (r) {
                set(&w->b, r, "source", json_string("segments"));
                set(&w->b, r, "peak_bytes", json_integer(info->reserved_peak));
                set(&w->b, r, "current_bytes",
                    int_or_null(info->reserved_end, info->reserved_end >= 0));
            }
        } else {
            set(&w->b, o, "reserved", json_null());
        }
        set(&w->b, o, "samples", json_array());
        set(&w->b, o, "used_at_peak_bytes", json_null());
    }
    return arr;
}

/* The first TIMELINE_STEPS steps in full, the rest folded into the summary. */
static json_t *timeline_json(writer *w, json_t **summary)
{
    const vt_replay *rp = w->rp;
    json_t *arr = json_array();
    *summary = json_null();
    int64_t first_step = rp->ninst ? rp->inst[0].step : 0;
    json_t *folded_max = NULL;
    size_t folded = 0;
    int64_t folded_first = 0, folded_last = 0;
    for (size_t k = 0; arr && k < rp->ninst && !w->b.failed; k++) {
        const vt_inst *in = &rp->inst[k];
        const int64_t *live = &rp->inst_live[k * rp->ndevs * 3];
        if (in->step - first_step >= TIMELINE_STEPS) {
            if (!folded++) {
                folded_first = in->step;
                folded_max = json_object();
            }
            folded_last = in->step;
            for (size_t d = 0; folded_max && d < rp->ndevs; d++) {
                char key[16];
                snprintf(key, sizeof key, "%d", (int)rp->devs[d].device);
                json_t *cur = json_object_get(folded_max, key);
                if (!cur || json_integer_value(cur) < live[d * 3 + 2])
                    set(&w->b, folded_max, key, json_integer(live[d * 3 + 2]));
            }
            continue;
        }
        json_t *o = append(&w->b, arr, json_object());
        json_t *devs = o ? set(&w->b, o, "devices", json_array()) : NULL;
        if (!devs)
            break;
        set(&w->b, o, "instance", json_integer((json_int_t)k + 1));
        set(&w->b, o, "phase", json_string(vt_phase_name((vt_phase)in->phase)));
        set(&w->b, o, "step", json_integer(in->step));
        set(&w->b, o, "start_s", json_real(in->start));
        set(&w->b, o, "end_s", json_real(in->end));
        for (size_t d = 0; d < rp->ndevs; d++) {
            json_t *dv = append(&w->b, devs, json_object());
            if (!dv)
                break;
            set(&w->b, dv, "device", json_integer(rp->devs[d].device));
            set(&w->b, dv, "live_start", json_integer(live[d * 3]));
            set(&w->b, dv, "live_end", json_integer(live[d * 3 + 1]));
            set(&w->b, dv, "live_max", json_integer(live[d * 3 + 2]));
        }
    }
    if (folded) {
        json_decref(*summary);
        *summary = json_object();
        if (*summary) {
            set(&w->b, *summary, "instances", json_integer((json_int_t)folded));
            set(&w->b, *summary, "first_step", json_integer(folded_first));
            set(&w->b, *summary, "last_step", json_integer(folded_last));
            set(&w->b, *summary, "live_max", folded_max);
        } else {
            json_decref(folded_max);
        }
    }
    return arr;
}

/* The moment of time t: that of the last event at or before it. */
static const vt_when *when_at(const vt_replay *rp, double t, const vt_when *before)
{
    size_t lo = 0, hi = rp->tr->nev;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rp->tr->ev[mid].t <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? &rp->when[lo - 1] : before;
}

static json_t *ooms_json(writer *w)
{
    const vt_replay *rp = w->rp;
    const vt_trace *tr = rp->tr;
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < tr->nooms; i++) {
        const vt_ioom *oo = &tr->ooms[i];
        const vt_when *wh = when_at(rp, oo->t, &w->before);
        bool retried = false;
        for (size_t j = 0; j < tr->nev && !retried; j++)
            retried = tr->ev[j].t > oo->t && tr->ev[j].device == oo->device &&
                      tr->ev[j].bytes >= oo->size;
        json_t *o = append(&w->b, arr, json_object());
        if (!o)
            break;
        set(&w->b, o, "n", json_integer((json_int_t)i + 1));
        set(&w->b, o, "time_s", json_real(oo->t));
        set(&w->b, o, "device", json_integer(oo->device));
        set(&w->b, o, "size", json_integer(oo->size));
        set(&w->b, o, "api", json_string("pytorch"));
        set(&w->b, o, "phase", json_string(vt_phase_name((vt_phase)wh->phase)));
        set(&w->b, o, "step", json_integer(wh->step));
        set(&w->b, o, "site", site_ref(w, oo->site));
        set(&w->b, o, "retry_succeeded", json_boolean(retried));
        set(&w->b, o, "file", json_null());
    }
    return arr;
}

static json_t *strings_json(builder *b, char *const *s, size_t n)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++)
        append(b, arr, json_string(s[i]));
    return arr;
}

static json_t *import_json(writer *w)
{
    const vt_replay *rp = w->rp;
    const vt_trace *tr = rp->tr;
    json_t *o = json_object();
    if (!o)
        return NULL;
    set(&w->b, o, "source", json_string(tr->source));
    set(&w->b, o, "format", json_string(tr->format));
    set(&w->b, o, "lacks", strings_json(&w->b, tr->lacks, tr->nlacks));
    set(&w->b, o, "notes", strings_json(&w->b, tr->notes, tr->nnotes));
    set(&w->b, o, "times_recorded", json_boolean(!tr->times_invented));
    set(&w->b, o, "device_named", json_boolean(!tr->device_unnamed));
    set(&w->b, o, "misses_memory", json_boolean(tr->misses_memory));
    json_t *devs = set(&w->b, o, "devices", json_array());
    for (size_t d = 0; devs && d < rp->ndevs; d++) {
        const vt_idev *dev = &rp->devs[d];
        json_t *dv = append(&w->b, devs, json_object());
        if (!dv)
            break;
        set(&w->b, dv, "device", json_integer(dev->device));
        set(&w->b, dv, "before_window_bytes", json_integer(dev->before_window_bytes));
        set(&w->b, dv, "unseen_bytes", json_integer(dev->unseen_bytes));
        set(&w->b, dv, "frees_from_before_window", json_integer(dev->unknown_frees));
        set(&w->b, dv, "running_total_peak", int_or_null(dev->total_peak, dev->total_peak >= 0));
        set(&w->b, dv, "running_total_mismatches", json_integer(dev->total_mismatches));
        set(&w->b, dv, "allocations_without_phase_evidence", json_integer(dev->unphased_allocs));
        set(&w->b, dv, "of_those_outside_phases", json_integer(dev->unphased_outside));
        if (tr->ncategories) {
            json_t *c = set(&w->b, dv, "pytorch_categories_at_peak", json_object());
            for (size_t i = 0; c && i < tr->ncategories; i++)
                set(&w->b, c, tr->category_names[i], json_integer(dev->cat_bytes_at_peak[i]));
        }
    }
    return o;
}

static json_t *counters_json(builder *b, const vt_replay *rp)
{
    static const char *const zero[] = {"failed_calls", "host_allocs",  "host_frees",
                                       "vmm_creates",  "vmm_releases", "vmm_maps",
                                       "vmm_unmaps",   "nested_calls", "dropped"};
    int64_t allocs = 0, frees = 0;
    for (size_t d = 0; d < rp->ndevs; d++) {
        allocs += rp->devs[d].allocs;
        frees += rp->devs[d].frees;
    }
    json_t *o = json_object();
    if (!o)
        return NULL;
    set(b, o, "allocs", json_integer(allocs));
    set(b, o, "frees", json_integer(frees));
    /* frees of blocks from before the window are accounted (import.devices[]), not ignored */
    set(b, o, "unknown_frees", json_integer(0));
    set(b, o, "oom_calls", json_integer((json_int_t)rp->tr->nooms));
    for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++)
        set(b, o, zero[i], json_integer(0));
    return o;
}

/* "traces/run.pt.trace.json.gz" -> "run" */
static json_t *prog_name(const char *source)
{
    char *copy = strdup(source);
    if (!copy)
        return NULL;
    char *base = basename(copy);
    char *dot = strchr(base, '.');
    if (dot && dot != base)
        *dot = 0;
    json_t *v = json_string(base);
    free(copy);
    return v;
}

static json_t *build(writer *w)
{
    const vt_replay *rp = w->rp;
    const vt_trace *tr = rp->tr;
    builder *b = &w->b;
    json_t *root = json_object();
    if (!root)
        return NULL;
    double end = tr->nev ? tr->ev[tr->nev - 1].t : 0.0;
    set(b, root, VT_K_FORMAT, json_string(VT_SNAPSHOT_FORMAT));
    set(b, root, VT_K_VERSION, json_integer(VT_SNAPSHOT_VERSION));
    set(b, root, VT_K_KIND, json_string("import"));
    set(b, root, VT_K_VRAMTAP_VERSION, json_string(VT_VERSION));
    set(b, root, VT_K_PID, int_or_null(tr->pid, tr->pid >= 0));
    set(b, root, VT_K_PROG, prog_name(tr->source));
    set(b, root, VT_K_COMMAND, json_null());
    set(b, root, VT_K_START_UNIX, isnan(tr->start_unix) ? json_null() : json_real(tr->start_unix));
    set(b, root, VT_K_END_TIME_S, json_real(end));
    json_t *rank = set(b, root, VT_K_RANK, json_object());
    if (rank) {
        set(b, rank, "rank", int_or_null(tr->rank, tr->rank >= 0));
        set(b, rank, "local_rank", json_null());
        set(b, rank, "source", json_null());
    }
    set(b, root, VT_K_ENV, json_object());
    set(b, root, VT_K_ENV_SET, json_object());
    set(b, root, VT_K_MODES, json_object());
    set(b, root, VT_K_PHASE_MARKERS, json_boolean(rp->ninst > 0));
    set(b, root, VT_K_STEPS, json_integer(rp->steps));
    bool native = false;
    for (size_t i = 0; i < tr->sites.nframes; i++)
        native |= tr->sites.frames[i].type == VT_FRAME_NATIVE;
    json_t *st = set(b, root, VT_K_STACKS, json_object());
    if (st) {
        set(b, st, "native", json_boolean(native));
        set(b, st, "python", json_boolean(tr->python_stacks));
        set(b, st, "depth", json_integer(64));
    }
    set(b, root, VT_K_COUNTERS, counters_json(b, rp));
    set(b, root, VT_K_DEVICES, devices_json(w));
    set(b, root, VT_K_HOST, json_null());
    json_t *paths = set(b, root, VT_K_MODULE_PATHS, json_array());
    for (size_t i = 0; paths && i < tr->nmpaths; i++)
        append(b, paths, json_string(tr->mpaths[i]));
    set(b, root, VT_K_ALLOCATIONS, allocations_json(w));
    json_t *summary;
    set(b, root, VT_K_TIMELINE, timeline_json(w, &summary));
    set(b, root, VT_K_TIMELINE_SUMMARY, summary);
    set(b, root, VT_K_OOM_EVENTS, ooms_json(w));
    /* last: the allocations and out-of-memory events above choose which sites appear */
    history_json(w, root);
    set(b, root, VT_K_SITES, sites_json(w));
    set(b, root, VT_K_IMPORT, import_json(w));
    return root;
}

static int dump(json_t *root, const char *path, vt_err *err)
{
    const size_t flags = JSON_COMPACT | JSON_REAL_PRECISION(15);
    if (!strcmp(path, "-")) {
        if (json_dumpf(root, stdout, flags) || fputc('\n', stdout) == EOF || fflush(stdout)) {
            vt_err_set(err, "cannot write the snapshot to standard output: %s", strerror(errno));
            return -1;
        }
        return 0;
    }
    /* a temporary file beside the target, renamed over it: readers never see half a file */
    char *tmp;
    if (asprintf(&tmp, "%s.tmp.XXXXXX", path) < 0) {
        vt_err_set(err, "out of memory");
        return -1;
    }
    int fd = mkstemp(tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    int rc = 0;
    if (!f) {
        vt_err_set(err, "%s: cannot create: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        rc = -1;
    } else {
        bool bad = json_dumpf(root, f, flags) || fputc('\n', f) == EOF || fflush(f);
        int saved = errno;
        if (fclose(f) || bad) {
            vt_err_set(err, "%s: cannot write: %s", path, strerror(bad ? saved : errno));
            rc = -1;
        } else if (rename(tmp, path)) {
            vt_err_set(err, "%s: cannot rename the temporary file: %s", path, strerror(errno));
            rc = -1;
        }
    }
    if (rc && fd >= 0)
        unlink(tmp);
    free(tmp);
    return rc;
}

int vt_snapshot_write(const vt_replay *rp, const char *path, vt_err *err)
{
    const vt_trace *tr = rp->tr;
    writer w = {.rp = rp};
    w.site_map = malloc((tr->sites.nsites + 1) * sizeof *w.site_map);
    w.site_order = malloc((tr->sites.nsites + 1) * sizeof *w.site_order);
    if (!w.site_map || !w.site_order) {
        free(w.site_map);
        free(w.site_order);
        vt_err_set(err, "out of memory");
        return -1;
    }
    memset(w.site_map, 0xff, (tr->sites.nsites + 1) * sizeof *w.site_map);
    if (number_allocations(&w)) {
        free(w.site_map);
        free(w.site_order);
        vt_err_set(err, "out of memory");
        return -1;
    }
    /* allocations from before the window: setup as far as the window can tell, in the step it
     * began with */
    w.before = (vt_when){.phase = VT_SETUP, .step = tr->nev ? rp->when[0].step : 0};
    json_t *root = build(&w);
    int rc = 0;
    if (!root || w.b.failed) {
        vt_err_set(err, "out of memory");
        rc = -1;
    } else {
        rc = dump(root, path, err);
    }
    json_decref(root);
    free(w.site_map);
    free(w.site_order);
    free(w.ids);
    return rc;
}
