/* The page of `vramtap view`: one HTML file holding its data as JSON, the script that draws it
 * (view.js) and its style sheet (view.css), both allowed by hash in a Content-Security-Policy
 * that allows nothing else: no network, no other script, no inline style. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "pictures.h"

extern const char vt_asset_js[], vt_asset_js_sha256[], vt_asset_css[], vt_asset_css_sha256[];

/* Frames are merged from the outermost: children are few, so a list searched in turn. */
typedef struct node {
    char *name;
    int64_t value, cats[VT_NCATS];
    struct node **kids;
    size_t nkids, cap;
} node;

static node *child(node *n, const char *name)
{
    for (size_t i = 0; i < n->nkids; i++)
        if (!strcmp(n->kids[i]->name, name))
            return n->kids[i];
    if (vt_grow(&n->kids, &n->cap, n->nkids + 1, sizeof *n->kids, 4))
        return NULL;
    node *c = calloc(1, sizeof *c);
    if (!c || !(c->name = strdup(name))) {
        free(c);
        return NULL;
    }
    return n->kids[n->nkids++] = c;
}

static void add_bytes(node *n, vt_category c, int64_t bytes)
{
    n->value += bytes;
    n->cats[c] += bytes;
}

static int by_value(const void *pa, const void *pb)
{
    const node *a = *(node *const *)pa, *b = *(node *const *)pb;
    return (a->value < b->value) - (a->value > b->value);
}

static json_t *node_json(node *n)
{
    json_t *o = json_object(), *cats = json_array(), *kids = json_array();
    for (int c = 0; c < VT_NCATS; c++)
        json_array_append_new(cats, json_integer(n->cats[c]));
    if (n->nkids)
        qsort(n->kids, n->nkids, sizeof *n->kids, by_value);
    for (size_t i = 0; i < n->nkids; i++)
        json_array_append_new(kids, node_json(n->kids[i]));
    json_object_set_new(o, "name", json_string(n->name));
    json_object_set_new(o, "value", json_integer(n->value));
    json_object_set_new(o, "cats", cats);
    json_object_set_new(o, "children", kids);
    return o;
}

static void node_free(node *n)
{
    for (size_t i = 0; i < n->nkids; i++)
        node_free(n->kids[i]);
    free(n->kids);
    free(n->name);
    free(n);
}

/* The allocations listed for the device (live at its peak, or at the failure) by stack,
 * outermost frame at the top. */
static json_t *flame_json(vt_snapshot *s, const vt_bill *bill, vt_err *err)
{
    char name[1024];
    node *root = calloc(1, sizeof *root);
    if (!root || !(root->name = malloc(32))) {
        free(root);
        vt_err_set(err, "%s: out of memory", s->path);
        return NULL;
    }
    snprintf(root->name, 32, "%s%d", vt_device_word(s), bill->dev->device);
    bool ok = true;
    for (size_t i = 0; i < s->nallocs && ok; i++) {
        const vt_alloc *a = &s->allocs[i];
        if (a->device != bill->dev->device)
            continue;
        vt_category c;
        if (vt_category_of(s, a, bill->native, &c, err)) {
            node_free(root);
            return NULL;
        }
        node *n = root;
        add_bytes(n, c, a->size);
        const vt_site *site = a->site >= 0 ? &s->sites[a->site] : NULL;
        if (!site) {
            ok = (n = child(n, "[no stack]")) != NULL;
            if (ok)
                add_bytes(n, c, a->size);
            continue;
        }
        for (size_t f = site->nframes; f-- > 0 && ok;) {
            vt_frame_name(&site->frames[f], name, sizeof name);
            ok = (n = child(n, name)) != NULL;
            if (ok)
                add_bytes(n, c, a->size);
        }
    }
    json_t *j = ok ? node_json(root) : NULL;
    node_free(root);
    if (!j)
        vt_err_set(err, "%s: out of memory", s->path);
    return j;
}

static json_t *i64_array(const int64_t *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

/* The module tree at the peak as the icicle's nodes: the report's rows by module, each path
 * holding those below it, and the memory made outside every module beside them. */
static json_t *module_flame_json(vt_snapshot *s, const vt_bill *bill, vt_err *err)
{
    vt_module_bill mb;
    if (vt_module_bill_build(s, bill->dev, bill->native, &mb, err))
        return NULL;
    char name[32];
    snprintf(name, sizeof name, "%s%d", vt_device_word(s), bill->dev->device);
    json_t *root = json_pack("{s:s, s:[]}", "name", name, "children");
    json_t *stack[64] = {json_object_get(root, "children")};
    int64_t total = 0, cats[VT_NCATS] = {0};
    for (size_t i = 0; i < mb.n; i++) {
        const vt_module_row *r = &mb.rows[i];
        /* a path deeper than the stack holds hangs from the deepest level kept */
        int depth = !r->path ? 0 : r->depth < 63 ? r->depth : 62;
        if (r->depth == 0 || !r->path) {
            total += r->bytes;
            for (int c = 0; c < VT_NCATS; c++)
                cats[c] += r->cat[c];
        }
        if (!r->bytes)
            continue; /* nor anything below it */
        json_t *kids = json_array();
        json_t *node =
            json_pack("{s:s, s:o, s:I, s:I, s:I, s:o, s:o}", "name", r->name, "path",
                      r->path ? json_string(r->path) : json_null(), "value", (json_int_t)r->bytes,
                      "count", (json_int_t)r->count, "saved", (json_int_t)r->saved, "cats",
                      i64_array(r->cat, VT_NCATS), "children", kids);
        json_array_append_new(stack[depth], node);
        stack[depth + 1] = kids;
    }
    json_object_set_new(root, "value", json_integer(total));
    json_object_set_new(root, "cats", i64_array(cats, VT_NCATS));
    vt_module_bill_free(&mb);
    return root;
}

/* The slots' columns of a series: one array per category or group, a value per point. */
static json_t *columns_json(const vt_series *sr, size_t nslots)
{
    json_t *cols = json_array();
    for (size_t c = 0; c < nslots; c++) {
        json_t *col = json_array();
        for (size_t i = 0; i < sr->npts; i++)
            json_array_append_new(col, json_integer(sr->pts[i].cat[c]));
        json_array_append_new(cols, col);
    }
    return cols;
}

/* by module: the same moments (the points kept depend on the totals only) stacked by group */
static json_t *series_json(const vt_series *sr, const vt_series *by_module, size_t ngroups)
{
    json_t *o = json_object(), *t = json_array();
    for (size_t i = 0; i < sr->npts; i++)
        json_array_append_new(t, json_real(sr->pts[i].t));
    json_object_set_new(o, "label", json_string(vt_window_label(sr->win)));
    json_object_set_new(o, "start_s", json_real(sr->win->start_s));
    json_object_set_new(o, "end_s", json_real(sr->win->end_s));
    json_object_set_new(o, "exact", json_boolean(sr->exact));
    json_object_set_new(o, "truncated", json_boolean(sr->win->truncated));
    json_object_set_new(o, "events", json_integer((json_int_t)sr->nevents));
    json_object_set_new(o, "points", json_integer((json_int_t)sr->npts));
    json_object_set_new(o, "max_total", json_integer(vt_point_total(&sr->pts[sr->peak_pt])));
    json_object_set_new(o, "t", t);
    json_object_set_new(o, "cats", columns_json(sr, VT_NCATS));
    json_object_set_new(o, "groups", ngroups ? columns_json(by_module, ngroups) : json_null());
    return o;
}

static json_t *timeline_json(const vt_picture *p)
{
    json_t *a = json_array();
    for (size_t i = 0; i < p->ntimeline; i++) {
        const vt_tl_span *sp = &p->timeline[i];
        json_array_append_new(
            a, json_pack("{s:I, s:s, s:I, s:f, s:o, s:I, s:I, s:I}", "instance",
                         (json_int_t)sp->instance, "phase", vt_phase_name(sp->phase), "step",
                         (json_int_t)sp->step, "start_s", sp->start_s, "end_s",
                         isnan(sp->end_s) ? json_null() : json_real(sp->end_s), "live_start",
                         (json_int_t)sp->live_start, "live_end", (json_int_t)sp->live_end,
                         "live_max", (json_int_t)sp->live_max));
    }
    return a;
}

static json_t *groups_json(const vt_module_groups *g)
{
    char buf[1024];
    json_t *a = json_array();
    for (size_t i = 0; i < g->n; i++)
        json_array_append_new(a, json_pack("{s:s, s:o, s:b, s:s, s:I}", "label",
                                           vt_module_group_label(g, i, buf, sizeof buf), "path",
                                           g->path[i] ? json_string(g->path[i]) : json_null(),
                                           "rest", g->rest[i], "color", vt_module_group_color(g, i),
                                           "peak_bytes", (json_int_t)g->peak_bytes[i]));
    return a;
}

static json_t *device_json(vt_loaded *l, const vt_bill *bill, vt_err *err)
{
    const vt_device *d = bill->dev;
    vt_picture p;
    if (vt_picture_build(l, bill, VT_VIEW_POINTS, true, &p, err))
        return NULL;
    json_t *flame = flame_json(&l->snap, bill, err);
    json_t *mflame = flame && p.groups.any ? module_flame_json(&l->snap, bill, err) : NULL;
    if (!flame || (p.groups.any && !mflame)) {
        json_decref(flame);
        vt_picture_free(&p);
        return NULL;
    }
    size_t ngroups = p.groups.any ? p.groups.n : 0;
    json_t *o = json_object(), *wins = json_array();
    for (size_t i = 0; i < p.nseries; i++)
        json_array_append_new(wins, series_json(&p.series[i], &p.mseries[i], ngroups));
    json_object_set_new(o, "device", json_integer(d->device));
    json_object_set_new(o, "name", d->name ? json_string(d->name) : json_null());
    json_object_set_new(o, "peak_bytes", json_integer(d->peak_bytes));
    json_object_set_new(o, "peak_time_s", json_real(d->peak_time_s));
    json_object_set_new(o, "peak_phase",
                        d->peak_phase == VT_NOPHASE ? json_null()
                                                    : json_string(vt_phase_name(d->peak_phase)));
    json_object_set_new(o, "peak_step", json_integer(d->peak_step));
    json_object_set_new(o, "bill", i64_array(bill->cat_bytes, VT_NCATS));
    json_object_set_new(o, "bill_count", i64_array(bill->cat_count, VT_NCATS));
    json_object_set_new(o, "windows", wins);
    json_object_set_new(o, "timeline", timeline_json(&p));
    json_object_set_new(o, "flame", flame);
    json_object_set_new(o, "module_groups", ngroups ? groups_json(&p.groups) : json_null());
    json_object_set_new(o, "module_flame", mflame ? mflame : json_null());
    vt_picture_free(&p);
    return o;
}

static json_t *page_data(vt_loaded *l, bool by_module, vt_err *err)
{
    vt_snapshot *s = &l->snap;
    if (vt_sites_load_all(s, err))
        return NULL;
    json_t *data = json_object(), *cats = json_array(), *devs = json_array();
    for (int c = 0; c < VT_NCATS; c++)
        json_array_append_new(cats,
                              json_pack("{s:s, s:s, s:s}", "key", vt_category_key((vt_category)c),
                                        "label", vt_category_label((vt_category)c), "color",
                                        vt_category_color((vt_category)c)));
    json_object_set_new(data, "file", json_string(s->path));
    json_object_set_new(data, "end_s", json_real(vt_picture_end(s)));
    json_object_set_new(data, "categories", cats);
    json_object_set_new(data, "by", json_string(by_module ? "module" : "category"));
    json_object_set_new(data, "report", vt_report_json(l));
    json_object_set_new(data, "history",
                        s->nwindows
                            ? json_pack("{s:I, s:I, s:I}", "steps", (json_int_t)s->history_steps,
                                        "max_events", (json_int_t)s->history_max_events, "dropped",
                                        (json_int_t)s->history_dropped)
                            : json_null());
    json_object_set_new(data, "history_unused",
                        s->history_unused[0] ? json_string(s->history_unused) : json_null());
    json_object_set_new(data, "device_word", json_string(vt_device_word(&l->snap)));
    json_object_set_new(data, "devices", devs);
    for (size_t i = 0; i < l->nbills; i++) {
        json_t *d = device_json(l, &l->bills[i], err);
        if (!d) {
            json_decref(data);
            return NULL;
        }
        json_array_append_new(devs, d);
    }
    return data;
}

/* JSON inside a script element: '<' only occurs in strings, where \u003c means the same and
 * cannot close the element. */
static void put_script_json(FILE *out, const char *text)
{
    for (const char *p = text; *p; p++)
        if (*p == '<')
            fputs("\\u003c", out);
        else
            fputc(*p, out);
}

static void put_html_text(FILE *out, const char *text)
{
    for (const char *p = text; *p; p++)
        switch (*p) {
        case '<':
            fputs("&lt;", out);
            break;
        case '>':
            fputs("&gt;", out);
            break;
        case '&':
            fputs("&amp;", out);
            break;
        default:
            fputc(*p, out);
        }
}

int vt_render_html(FILE *out, vt_loaded *l, bool by_module, vt_err *err)
{
    json_t *data = page_data(l, by_module, err);
    if (!data)
        return -1;
    char *text = json_dumps(data, JSON_COMPACT | JSON_REAL_PRECISION(12));
    json_decref(data);
    if (!text) {
        vt_err_set(err, "%s: out of memory", l->snap.path);
        return -1;
    }
    fprintf(out,
            "<!DOCTYPE html>\n<html lang=\"en\" data-rendered=\"false\">\n<head>\n"
            "<meta charset=\"utf-8\">\n"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            "script-src 'sha256-%s'; style-src 'sha256-%s'; base-uri 'none'; "
            "form-action 'none'\">\n"
            "<title>vramtap: ",
            vt_asset_js_sha256, vt_asset_css_sha256);
    put_html_text(out, l->snap.path);
    fprintf(out,
            "</title>\n<style>%s</style>\n</head>\n<body>\n<div id=\"app\"></div>\n"
            "<script type=\"application/json\" id=\"vt-data\">",
            vt_asset_css);
    put_script_json(out, text);
    fprintf(out, "</script>\n<script>%s</script>\n</body>\n</html>\n", vt_asset_js);
    free(text);
    return 0;
}
