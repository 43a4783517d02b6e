/* Chrome trace-event JSON ("JSON Object Format": traceEvents, times in microseconds) for
 * Perfetto UI and chrome://tracing. Counter events carry one argument per category (with
 * --by module: per module group), which both tools show as one track per device and argument.
 * At a device's peak the counters are its bill, so they add up to the peak exactly. */
#include <math.h>
#include <string.h>

#include "pictures.h"
#include "report.h"

enum { TID_PHASES = 1, TID_STEPS = 2, TID_HISTORY = 3 };

typedef struct {
    json_t *events;
    json_int_t pid;
    const char *dev; /* vt_device_word */
} trace;

static double us(double s)
{
    return s * 1e6;
}

static void emit(trace *t, json_t *ev)
{
    json_object_set_new(ev, "pid", json_integer(t->pid));
    json_array_append_new(t->events, ev);
}

/* One argument per category, or per module group (groups non-NULL). */
static void counter(trace *t, int device, double time_s, const int64_t cat[VT_NCATS], bool native,
                    const vt_module_groups *groups)
{
    char name[32], label[1024];
    json_t *args = json_object();
    snprintf(name, sizeof name, "%s%d live bytes", t->dev, device);
    for (size_t c = 0; groups && c < groups->n; c++)
        json_object_set_new(args, vt_module_group_label(groups, c, label, sizeof label),
                            json_integer(cat[c]));
    for (int c = 0; !groups && c < VT_NCATS; c++)
        if (!native || c == VT_CAT_UNATTRIBUTED_PERSISTENT)
            json_object_set_new(args, vt_category_key((vt_category)c), json_integer(cat[c]));
    emit(t, json_pack("{s:s, s:s, s:f, s:i, s:o}", "name", name, "ph", "C", "ts", us(time_s), "tid",
                      0, "args", args));
}

static void slice(trace *t, int tid, const char *name, double start, double end, json_t *args)
{
    emit(t, json_pack("{s:s, s:s, s:f, s:f, s:i, s:o}", "name", name, "ph", "X", "ts", us(start),
                      "dur", us(end) - us(start), "tid", tid, "args", args));
}

static void instant(trace *t, const char *name, double time_s, json_t *args)
{
    emit(t, json_pack("{s:s, s:s, s:f, s:s, s:i, s:o}", "name", name, "ph", "i", "ts", us(time_s),
                      "s", "p", "tid", 0, "args", args));
}

static void thread_name(trace *t, int tid, const char *name)
{
    emit(t, json_pack("{s:s, s:s, s:i, s:{s:s}}", "name", "thread_name", "ph", "M", "tid", tid,
                      "args", "name", name));
}

static json_t *bill_args(const vt_bill *bill)
{
    json_t *a = json_object();
    int64_t total = 0;
    for (int c = 0; c < VT_NCATS; c++) {
        total += bill->cat_bytes[c];
        if (bill->cat_bytes[c])
            json_object_set_new(a, vt_category_key((vt_category)c),
                                json_integer(bill->cat_bytes[c]));
    }
    json_object_set_new(a, "live_bytes", json_integer(total));
    return a;
}

static void device_events(trace *t, const vt_picture *p, const vt_snapshot *s)
{
    const vt_bill *bill = p->bill;
    const vt_device *d = bill->dev;
    bool oom = s->kind == VT_SNAP_OOM;
    /* the bill is what was live at the peak (in a post-mortem: at the failure) */
    double at = oom ? s->oom.time_s : d->peak_time_s;
    const vt_module_groups *groups = p->groups.any ? &p->groups : NULL;
    for (size_t i = 0; i < p->nseries; i++) {
        const vt_series *sr = &p->series[i], *drawn = groups ? &p->mseries[i] : sr;
        if (!sr->exact)
            continue;
        char name[64];
        snprintf(name, sizeof name, "%s%d history: %s", t->dev, d->device,
                 vt_window_label(sr->win));
        slice(t, TID_HISTORY, name, sr->win->start_s, sr->win->end_s,
              json_pack("{s:I, s:b}", "events", (json_int_t)sr->nevents, "truncated",
                        sr->win->truncated));
        for (size_t k = 0; k < drawn->npts; k++)
            if (us(drawn->pts[k].t) != us(at))
                counter(t, d->device, drawn->pts[k].t, drawn->pts[k].cat, bill->native, groups);
    }
    counter(t, d->device, at, groups ? groups->peak_bytes : bill->cat_bytes, bill->native, groups);
    char name[64];
    json_t *args = bill_args(bill);
    json_object_set_new(args, "phase",
                        d->peak_phase == VT_NOPHASE ? json_null()
                                                    : json_string(vt_phase_name(d->peak_phase)));
    json_object_set_new(args, "step", json_integer(d->peak_step));
    json_object_set_new(args, "peak_bytes", json_integer(d->peak_bytes));
    snprintf(name, sizeof name, "%s%d peak", t->dev, d->device);
    if (!oom)
        instant(t, name, d->peak_time_s, args);
    else
        json_decref(args);
}

static void phase_events(trace *t, const vt_picture *p, double end)
{
    int64_t step = -1;
    double step_start = 0, step_end = 0;
    for (size_t i = 0; i <= p->ntimeline; i++) {
        const vt_tl_span *sp = i < p->ntimeline ? &p->timeline[i] : NULL;
        if (sp) {
            double e = isnan(sp->end_s) ? end : sp->end_s;
            slice(t, TID_PHASES, vt_phase_name(sp->phase), sp->start_s, e,
                  json_pack("{s:I, s:I, s:I, s:I, s:I}", "step", (json_int_t)sp->step, "instance",
                            (json_int_t)sp->instance, "live_start", (json_int_t)sp->live_start,
                            "live_end", (json_int_t)sp->live_end, "live_max",
                            (json_int_t)sp->live_max));
        }
        if (step >= 0 && (!sp || sp->step != step)) {
            char name[32];
            snprintf(name, sizeof name, "step %lld", (long long)step);
            slice(t, TID_STEPS, name, step_start, step_end, json_pack("{s:I}", "step", step));
        }
        if (!sp)
            break;
        if (sp->step != step) {
            step = sp->step;
            step_start = sp->start_s;
        }
        step_end = isnan(sp->end_s) ? end : sp->end_s;
    }
}

static void oom_event(trace *t, const vt_oom *o, bool post_mortem)
{
    char name[64];
    snprintf(name, sizeof name, "%s%d out of memory", t->dev, o->device);
    instant(t, name, o->time_s,
            json_pack("{s:I, s:s, s:o, s:I, s:o, s:b}", "size", (json_int_t)o->size, "api",
                      o->api ? o->api : "?", "phase",
                      o->phase == VT_NOPHASE ? json_null() : json_string(vt_phase_name(o->phase)),
                      "step", (json_int_t)o->step, "free_bytes",
                      post_mortem && o->free_bytes >= 0 ? json_integer(o->free_bytes) : json_null(),
                      "retry_succeeded", o->retry_succeeded));
}

/* every failure the snapshot lists, and a post-mortem's own one once */
static void oom_events(trace *t, const vt_snapshot *s)
{
    bool listed = false;
    for (size_t i = 0; i < s->noom_events; i++) {
        bool same = s->has_oom && s->oom_events[i].n == s->oom.n;
        oom_event(t, same ? &s->oom : &s->oom_events[i], same);
        listed |= same;
    }
    if (s->has_oom && !listed)
        oom_event(t, &s->oom, true);
}

int vt_render_perfetto(FILE *out, vt_loaded *l, bool by_module, vt_err *err)
{
    vt_snapshot *s = &l->snap;
    double end = vt_picture_end(s);
    trace t = {json_array(), s->pid >= 0 ? s->pid : 0, vt_device_word(s)};
    vt_gaps gaps;
    vt_gaps_of(s, &gaps);
    /* Without timestamps the events are one microsecond apart in their order: said in the
     * trace, since Perfetto shows them as times. */
    char title[400];
    snprintf(title, sizeof title, "vramtap: %s%s", s->prog ? s->prog : s->path,
             gaps.times_invented ? " (no timestamps: events in their order, 1 us apart)" : "");
    emit(&t, json_pack("{s:s, s:s, s:i, s:{s:s}}", "name", "process_name", "ph", "M", "tid", 0,
                       "args", "name", title));
    thread_name(&t, TID_PHASES, "phases");
    thread_name(&t, TID_STEPS, "steps");
    thread_name(&t, TID_HISTORY, "history windows");
    for (size_t i = 0; i < l->nbills; i++) {
        vt_picture p;
        if (vt_picture_build(l, &l->bills[i], VT_TRACE_POINTS, by_module, &p, err)) {
            json_decref(t.events);
            return -1;
        }
        if (i == 0)
            phase_events(&t, &p, end);
        device_events(&t, &p, s);
        vt_picture_free(&p);
    }
    oom_events(&t, s);
    json_t *doc = json_pack("{s:o, s:s, s:{s:s, s:s, s:b}}", "traceEvents", t.events,
                            "displayTimeUnit", "ms", "otherData", "source", s->path, "generator",
                            "vramtap " VT_VERSION, "times_recorded", !gaps.times_invented);
    if (!doc || json_dumpf(doc, out, JSON_COMPACT | JSON_REAL_PRECISION(15)) ||
        fputc('\n', out) == EOF) {
        json_decref(doc);
        vt_err_set(err, "%s: cannot write the trace", s->path);
        return -1;
    }
    json_decref(doc);
    return 0;
}
