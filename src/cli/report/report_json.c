/* `vramtap report --json`: the facts of the human report for machines, as documented in
 * docs/report-json.md. Bytes are integers; unknown values are null. */
#include <math.h>

#include "copies.h"
#include "offload.h"
#include "record.h"
#include "theory.h"
#include "report.h"

static json_t *int_or_null(int64_t v)
{
    return v < 0 ? json_null() : json_integer(v);
}

static json_t *real_or_null(double v)
{
    return isnan(v) ? json_null() : json_real(v);
}

static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

static json_t *phase_or_null(vt_phase p)
{
    return p == VT_NOPHASE ? json_null() : json_string(vt_phase_name(p));
}

json_t *vt_peak_json(const vt_device *d)
{
    return json_pack("{s:f, s:I, s:o}", "time_s", d->peak_time_s, "step", (json_int_t)d->peak_step,
                     "phase", phase_or_null(d->peak_phase));
}

json_t *vt_categories_json(const vt_bill *bill)
{
    /* native mode has categories only where labels split the segments */
    bool labelled = false;
    for (int i = 0; i < VT_CAT_UNATTRIBUTED_PERSISTENT; i++)
        labelled |= bill->cat_bytes[i] > 0;
    if (bill->native && !labelled)
        return json_null();
    json_t *c = json_object();
    for (int i = 0; i < VT_CAT_UNATTRIBUTED_PERSISTENT; i++)
        json_object_set_new(c, vt_category_key((vt_category)i), json_integer(bill->cat_bytes[i]));
    json_object_set_new(c, "unattributed",
                        json_integer(bill->cat_bytes[VT_CAT_UNATTRIBUTED_PERSISTENT] +
                                     bill->cat_bytes[VT_CAT_UNATTRIBUTED_TRANSIENT]));
    return c;
}

/* How each category's bytes were established: {"parameters": {"identity": N, "stack": N,
 * "timing": N}, ...}, the five categories (or, without them, nothing). */
static json_t *evidence_json(const vt_bill *bill)
{
    json_t *j = json_object();
    for (int c = 0; c < VT_NCATS; c++) {
        if (c >= VT_CAT_UNATTRIBUTED_PERSISTENT)
            break;
        json_t *e = json_object();
        for (int k = 0; k < VT_NEVIDENCE; k++)
            json_object_set_new(e, vt_evidence_key((vt_evidence)k),
                                json_integer(bill->evidence[c][k]));
        json_object_set_new(j, vt_category_key((vt_category)c), e);
    }
    return j;
}

json_t *vt_site_json(const vt_snapshot *snap, const vt_site_total *t)
{
    char label[VT_LABEL_MAX];
    const vt_site *site = t->site >= 0 ? &snap->sites[t->site] : NULL;
    json_t *frames = site ? json_object_get(site->json, "frames") : NULL;
    vt_site_label(snap, t->site, label);
    return json_pack("{s:o, s:o, s:I, s:I, s:s, s:o}", "site",
                     t->site >= 0 ? json_integer(t->site) : json_null(), "signature",
                     str_or_null(site ? site->signature : NULL), "bytes", (json_int_t)t->bytes,
                     "count", (json_int_t)t->count, "label", label, "frames",
                     frames ? json_incref(frames) : json_array());
}

static json_t *sites_json(const vt_snapshot *snap, const vt_site_total *t, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, vt_site_json(snap, &t[i]));
    return a;
}

json_t *vt_host_ram_json(const vt_snapshot *s)
{
    if (s->ram.high_water < 0 && s->ram.sampled < 0)
        return json_null();
    json_t *high = s->ram.sampled < 0
                       ? json_null()
                       : json_pack("{s:I, s:s, s:I}", "bytes", (json_int_t)s->ram.sampled, "phase",
                                   vt_phase_name(s->ram.sampled_phase), "step",
                                   (json_int_t)s->ram.sampled_step);
    json_t *workers = json_array();
    size_t i;
    json_t *w;
    json_array_foreach(s->ram.workers, i, w)
    {
        json_array_append_new(workers,
                              json_pack("{s:O, s:O, s:O}", "pid", json_object_get(w, "pid"),
                                        "pss_bytes", json_object_get(w, "pss_high_bytes"),
                                        "pss_last_bytes", json_object_get(w, "pss_last_bytes")));
    }
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "high_water_bytes",
                     int_or_null(s->ram.high_water), "sampled_high", high, "workers", workers,
                     "workers_high_bytes", int_or_null(s->ram.workers_high), "machine_bytes",
                     int_or_null(s->ram.machine), "cgroup_limit_bytes",
                     int_or_null(s->ram.cgroup_limit));
}

static json_t *levels_json(const vt_device *d)
{
    return json_pack("{s:I, s:o, s:o, s:o, s:o}", "tensors", (json_int_t)d->listed_bytes,
                     "reserved", int_or_null(d->reserved_source ? d->reserved_peak_bytes : -1),
                     "reserved_source", str_or_null(d->reserved_source), "used",
                     int_or_null(d->used_at_peak_bytes), "host_ram",
                     int_or_null(d->rss_at_peak_bytes));
}

static json_t *groups_json(const vt_bill *bill)
{
    json_t *a = json_array();
    for (size_t i = 0; i < bill->ngroups; i++) {
        const vt_birth_group *g = &bill->groups[i];
        json_array_append_new(a, json_pack("{s:o, s:I, s:I, s:I}", "phase", phase_or_null(g->phase),
                                           "step", (json_int_t)g->step, "bytes",
                                           (json_int_t)g->bytes, "count", (json_int_t)g->count));
    }
    return a;
}

static json_t *phase_peaks_json(const vt_phase_peaks *pp)
{
    static const vt_phase phases[] = {VT_FORWARD, VT_BACKWARD, VT_OPTIMIZER};
    json_t *j = json_object();
    for (size_t i = 0; i < 3; i++) {
        vt_phase p = phases[i];
        json_object_set_new(j, vt_phase_name(p),
                            pp->bytes[p] < 0
                                ? json_null()
                                : json_pack("{s:I, s:I}", "bytes", (json_int_t)pp->bytes[p], "step",
                                            (json_int_t)pp->step[p]));
    }
    return j;
}

/* {"parameters": {"expected_bytes", "measured_bytes", "explanation"}, ...} for the rows the
 * run record allows, or null. */
static json_t *theory_json(const vt_snapshot *s, const vt_bill *bill)
{
    vt_theory t;
    vt_theory_build(s, bill, &t);
    if (!t.any)
        return json_null();
    json_t *j = json_object();
    for (int i = 0; i < VT_THEORY_ROWS; i++) {
        const vt_theory_row *row = &t.rows[i];
        if (row->known)
            json_object_set_new(j, vt_category_key(row->cat),
                                json_pack("{s:I, s:I, s:o}", "expected_bytes",
                                          (json_int_t)row->expected, "measured_bytes",
                                          (json_int_t)row->measured, "explanation",
                                          row->why[0] ? json_string(row->why) : json_null()));
    }
    return j;
}

static json_t *device_json(vt_snapshot *s, const vt_bill *bill, const vt_phase_peaks *pp)
{
    const vt_device *d = bill->dev;
    bool checks = !bill->native && s->phase_markers;
    json_t *top = json_object();
    for (int c = 0; c < VT_NCATS; c++)
        if (bill->ntop[c])
            json_object_set_new(top, bill->native ? "segments" : vt_category_key((vt_category)c),
                                sites_json(s, bill->top[c], bill->ntop[c]));
    json_t *j = json_pack(
        "{s:i, s:o, s:o, s:o, s:I, s:o, s:s, s:I, s:I, s:o, s:{s:I, s:I}, s:o, s:{s:o, s:o}, "
        "s:o}",
        "device", d->device, "name", str_or_null(d->name), "uuid", str_or_null(d->uuid),
        "total_bytes", int_or_null(d->total_bytes), "peak_bytes", (json_int_t)d->peak_bytes, "peak",
        vt_peak_json(d), "view", bill->native ? "segments" : "tensors", "live_bytes",
        (json_int_t)d->listed_bytes, "live_allocations", (json_int_t)d->listed_count, "categories",
        vt_categories_json(bill), "unattributed_split", "persistent",
        (json_int_t)bill->cat_bytes[VT_CAT_UNATTRIBUTED_PERSISTENT], "transient",
        (json_int_t)bill->cat_bytes[VT_CAT_UNATTRIBUTED_TRANSIENT], "levels", levels_json(d),
        "checks", "gradients_per_parameter",
        real_or_null(checks ? vt_ratio(bill, VT_CAT_GRADIENTS) : NAN),
        "optimizer_state_per_parameter",
        real_or_null(checks ? vt_ratio(bill, VT_CAT_OPTIMIZER_STATE) : NAN), "top_sites", top);
    json_object_set_new(j, "phase_peaks", phase_peaks_json(pp));
    json_object_set_new(j, "evidence", evidence_json(bill));
    json_object_set_new(j, "library_workspace_bytes", json_integer(bill->workspace_bytes));
    json_object_set_new(j, "theory", theory_json(s, bill));
    json_object_set_new(j, "modules", vt_modules_json(s, bill));
    json_t *pytorch = vt_pytorch_categories_json(s, d->device);
    if (pytorch)
        json_object_set_new(j, "pytorch_categories", pytorch);
    if (bill->native)
        json_object_set_new(j, "segments_by_birth", groups_json(bill));
    return j;
}

static json_t *oom_event_json(const vt_oom *e)
{
    return json_pack("{s:I, s:f, s:i, s:I, s:s, s:o, s:I, s:b, s:o}", "n", (json_int_t)e->n,
                     "time_s", e->time_s, "device", e->device, "size", (json_int_t)e->size, "api",
                     e->api, "phase", phase_or_null(e->phase), "step", (json_int_t)e->step,
                     "retry_succeeded", e->retry_succeeded, "file", str_or_null(e->file));
}

static json_t *postmortem_json(const vt_loaded *l)
{
    const vt_snapshot *s = &l->snap;
    const vt_oom *o = &s->oom;
    const vt_bill *bill = NULL;
    for (size_t i = 0; i < l->nbills; i++)
        if (l->bills[i].dev->device == o->device)
            bill = &l->bills[i];
    vt_site_total request = {o->site, o->size, 1};
    vt_advice items[8];
    size_t n = vt_advise(s, bill, items, 8);
    json_t *advice = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(advice, json_string(items[i].text));
    vt_category dominant = bill ? vt_bill_dominant(bill) : VT_CAT_UNATTRIBUTED_PERSISTENT;
    return json_pack(
        "{s:I, s:f, s:i, s:I, s:s, s:o, s:I, s:o, s:o, s:o, s:o, s:o, s:I, s:o, s:s, s:o, s:o}",
        "n", (json_int_t)o->n, "time_s", o->time_s, "device", o->device, "size",
        (json_int_t)o->size, "api", o->api, "phase", phase_or_null(o->phase), "step",
        (json_int_t)o->step, "error", o->error >= 0 ? json_integer(o->error) : json_null(),
        "free_bytes", int_or_null(o->free_bytes), "total_bytes", int_or_null(o->total_bytes),
        "outside_bytes", int_or_null(vt_oom_outside(s, bill)), "stack", vt_site_json(s, &request),
        "live_bytes", (json_int_t)(bill ? bill->dev->listed_bytes : 0), "categories",
        bill ? vt_categories_json(bill) : json_null(), "dominant",
        dominant == VT_CAT_UNATTRIBUTED_PERSISTENT ? "unattributed" : vt_category_key(dominant),
        "top_sites", bill ? sites_json(s, bill->top_all, bill->ntop_all) : json_array(), "advice",
        advice);
}

/* An import without timestamps: its times are the events' order, not times to show. */
static void no_times(json_t *doc)
{
    size_t i;
    json_t *v;
    json_object_set_new(doc, "duration_s", json_null());
    json_array_foreach(json_object_get(doc, "devices"), i, v)
        json_object_set_new(json_object_get(v, "peak"), "time_s", json_null());
    json_array_foreach(json_object_get(doc, "oom_events"), i, v)
        json_object_set_new(v, "time_s", json_null());
}

json_t *vt_report_json(vt_loaded *l)
{
    const vt_snapshot *s = &l->snap;
    static const char *const kinds[] = {"exit", "oom", "import", "interim"};
    json_t *command = json_array(), *devices = json_array(), *events = json_array();
    for (size_t i = 0; i < s->argc; i++)
        json_array_append_new(command, json_string(s->argv[i]));
    for (size_t i = 0; i < l->nbills; i++)
        json_array_append_new(devices, device_json(&l->snap, &l->bills[i], &l->phase_peaks[i]));
    for (size_t i = 0; i < s->noom_events; i++)
        json_array_append_new(events, oom_event_json(&s->oom_events[i]));
    json_t *doc = json_pack(
        "{s:s, s:i, s:s, s:s, s:o, s:o, s:{s:o, s:o}, s:o, s:o, s:I, s:b, s:o, s:b, s:I, s:I, "
        "s:o, s:o, s:o}",
        "format", "vramtap-report", "version", 1, "file", s->path, "kind", kinds[s->kind], "prog",
        str_or_null(s->prog), "pid", int_or_null(s->pid), "rank", "rank", int_or_null(s->rank),
        "local_rank", int_or_null(s->local_rank), "command", command, "duration_s",
        real_or_null(s->end_time_s), "steps", (json_int_t)s->steps, "phase_markers",
        s->phase_markers, "mode", str_or_null(s->pytorch_mode), "lower_bound", vt_lower_bound(s),
        "dropped_events", (json_int_t)s->dropped, "unknown_frees", (json_int_t)s->unknown_frees,
        "host_peak_bytes", int_or_null(s->host_peak_bytes), "devices", devices, "oom_events",
        events);
    json_object_set_new(doc, "run_record", vt_run_record_json(s));
    json_object_set_new(doc, "host_ram", vt_host_ram_json(s));
    json_object_set_new(doc, "copies", vt_copies_json(s));
    json_object_set_new(doc, "host_offloaded", vt_offloaded_json(s));
    vt_coverage_add_json(doc, s);
    json_object_set_new(doc, "import", vt_gaps_json(s));
    if (s->has_oom)
        json_object_set_new(doc, "oom", postmortem_json(l));
    vt_gaps g;
    vt_gaps_of(s, &g);
    if (g.times_invented)
        no_times(doc);
    return doc;
}

void vt_print_json(FILE *out, json_t *doc)
{
    json_dumpf(doc, out, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    fputc('\n', out);
}
