/* Live bytes over time by category, from the snapshot's allocation history; and the per-phase
 * timeline, for the time outside it. Both the HTML view and the Perfetto export draw these. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot.h"
#include "snapshot_keys.h"

int64_t vt_point_total(const vt_point *p)
{
    int64_t t = 0;
    for (int c = 0; c < VT_NCATS; c++)
        t += p->cat[c];
    return t;
}

static bool window_knows(const vt_window *win, int device)
{
    for (size_t i = 0; i < sizeof win->devices / sizeof win->devices[0] && win->devices[i] >= 0;
         i++)
        if (win->devices[i] == device)
            return true;
    return false;
}

/* Runs of events are reduced to their lowest, highest and last moments. */
typedef struct {
    vt_point lo, hi, last;
    size_t lo_i, hi_i, last_i; /* order inside the run */
    size_t n;
} run;

static void keep(vt_series *s, const vt_point *p)
{
    s->pts[s->npts++] = *p;
}

static void flush(vt_series *s, run *r)
{
    if (!r->n)
        return;
    const vt_point *order[3] = {&r->lo, &r->hi, &r->last};
    size_t idx[3] = {r->lo_i, r->hi_i, r->last_i};
    for (int a = 0; a < 3; a++)
        for (int b = a + 1; b < 3; b++)
            if (idx[b] < idx[a]) {
                size_t ti = idx[a];
                idx[a] = idx[b];
                idx[b] = ti;
                const vt_point *tp = order[a];
                order[a] = order[b];
                order[b] = tp;
            }
    for (int a = 0; a < 3; a++)
        if (a == 0 || idx[a] != idx[a - 1])
            keep(s, order[a]);
    r->n = 0;
}

static int slot_category(vt_snapshot *snap, const vt_alloc *a, bool native, const void *ctx,
                         int *slot, vt_err *err)
{
    (void)ctx;
    vt_category c;
    if (vt_category_of(snap, a, native, &c, err))
        return -1;
    *slot = (int)c;
    return 0;
}

int vt_series_build(vt_snapshot *snap, const vt_window *win, int device, bool native,
                    size_t max_points, vt_series *out, vt_err *err)
{
    return vt_series_build_by(snap, win, device, native, slot_category, NULL, max_points, out, err);
}

int vt_series_build_by(vt_snapshot *snap, const vt_window *win, int device, bool native,
                       vt_slot_fn slot, const void *ctx, size_t max_points, vt_series *out,
                       vt_err *err)
{
    memset(out, 0, sizeof *out);
    out->win = win;
    out->device = device;
    out->exact = window_knows(win, device);
    vt_point cur = {.t = win->start_s};
    for (size_t i = 0; i < snap->nhallocs; i++) {
        const vt_alloc *a = snap->hallocs[i];
        if (a->device == device && a->birth_seq >= 0 && a->birth_seq < win->start_seq &&
            (a->alive_at_end || a->death_seq < 0 || a->death_seq >= win->start_seq)) {
            int c;
            if (slot(snap, a, native, ctx, &c, err))
                return -1;
            cur.cat[c] += a->size;
        }
    }
    for (size_t i = win->first; i < win->first + win->n; i++)
        out->nevents += snap->hallocs[snap->hevents[i].alloc]->device == device;
    /* at most three points per run, and the start */
    size_t per_run = 1;
    if (max_points < 8)
        max_points = 8;
    while (out->nevents / per_run * 3 + 6 > max_points)
        per_run *= 2;
    out->pts = malloc((out->nevents / per_run * 3 + 8) * sizeof *out->pts);
    if (!out->pts) {
        vt_err_set(err, "%s: out of memory", snap->path);
        return -1;
    }
    keep(out, &cur);
    run r = {0};
    for (size_t i = win->first; i < win->first + win->n; i++) {
        const vt_hevent *e = &snap->hevents[i];
        const vt_alloc *a = snap->hallocs[e->alloc];
        if (a->device != device)
            continue;
        int c;
        if (slot(snap, a, native, ctx, &c, err)) {
            free(out->pts);
            out->pts = NULL;
            return -1;
        }
        cur.cat[c] += e->bytes;
        cur.t = e->t;
        if (cur.cat[c] < 0)
            out->exact = false; /* a free of bytes the window never saw live */
        int64_t total = vt_point_total(&cur);
        if (!r.n || total < vt_point_total(&r.lo)) {
            r.lo = cur;
            r.lo_i = r.n;
        }
        if (!r.n || total > vt_point_total(&r.hi)) {
            r.hi = cur;
            r.hi_i = r.n;
        }
        r.last = cur;
        r.last_i = r.n++;
        if (r.n == per_run)
            flush(out, &r);
    }
    flush(out, &r);
    /* a run keeps its first highest moment, so the first point at the top is the first time
     * the window reached it */
    int64_t best = -1;
    for (size_t i = 0; i < out->npts; i++)
        if (vt_point_total(&out->pts[i]) > best) {
            best = vt_point_total(&out->pts[i]);
            out->peak_pt = i;
        }
    return 0;
}

void vt_series_free(vt_series *s)
{
    free(s->pts);
    memset(s, 0, sizeof *s);
}

static int span_fields(json_t *o, int device, vt_tl_span *sp)
{
    static const char *const names[] = {"forward", "backward", "optimizer"};
    static const vt_phase phases[] = {VT_FORWARD, VT_BACKWARD, VT_OPTIMIZER};
    json_t *ph = json_object_get(o, "phase"), *st = json_object_get(o, "start_s"),
           *en = json_object_get(o, "end_s"), *in = json_object_get(o, "instance"),
           *step = json_object_get(o, "step"), *devs = json_object_get(o, "devices");
    if (!json_is_string(ph) || !json_is_number(st) || !(json_is_number(en) || json_is_null(en)) ||
        !json_is_integer(in) || !json_is_integer(step) || !json_is_array(devs))
        return -1;
    sp->phase = VT_NPHASES;
    for (int i = 0; i < 3; i++)
        if (!strcmp(json_string_value(ph), names[i]))
            sp->phase = phases[i];
    if (sp->phase == VT_NPHASES)
        return -1;
    sp->instance = json_integer_value(in);
    sp->step = json_integer_value(step);
    sp->start_s = json_number_value(st);
    sp->end_s = json_is_null(en) ? NAN : json_number_value(en);
    if (!(sp->start_s >= 0) || sp->end_s < sp->start_s)
        return -1;
    sp->live_start = sp->live_end = sp->live_max = -1;
    size_t i;
    json_t *d;
    json_array_foreach(devs, i, d)
    {
        json_t *dev = json_object_get(d, "device");
        if (!json_is_integer(dev) || json_integer_value(dev) != device)
            continue;
        json_t *v[3] = {json_object_get(d, "live_start"), json_object_get(d, "live_end"),
                        json_object_get(d, "live_max")};
        int64_t *f[3] = {&sp->live_start, &sp->live_end, &sp->live_max};
        for (int j = 0; j < 3; j++) {
            if (!json_is_integer(v[j]) || json_integer_value(v[j]) < 0 ||
                json_integer_value(v[j]) > VT_MAX_BYTES)
                return -1;
            *f[j] = json_integer_value(v[j]);
        }
    }
    return 0;
}

int vt_timeline_load(const vt_snapshot *snap, int device, vt_tl_span **out, size_t *n, vt_err *err)
{
    json_t *tl = json_object_get(snap->root, VT_K_TIMELINE);
    *out = NULL;
    *n = 0;
    if (!tl || json_is_null(tl))
        return 0;
    if (!json_is_array(tl)) {
        vt_err_set(err, "%s: timeline: expected an array", snap->path);
        return -1;
    }
    vt_tl_span *sp = calloc(json_array_size(tl) + 1, sizeof *sp);
    if (!sp) {
        vt_err_set(err, "%s: out of memory", snap->path);
        return -1;
    }
    for (size_t i = 0; i < json_array_size(tl); i++)
        if (span_fields(json_array_get(tl, i), device, &sp[i]) ||
            (i && sp[i].start_s < sp[i - 1].start_s)) {
            free(sp);
            vt_err_set(err,
                       "%s: timeline[%zu]: expected {instance, phase, step, start_s, end_s, "
                       "devices} in time order",
                       snap->path, i);
            return -1;
        }
    *out = sp;
    *n = json_array_size(tl);
    return 0;
}
