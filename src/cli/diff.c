/* `vramtap diff A B`: what a change of configuration did to the memory bill. Peaks and
 * categories side by side, the sites that grew or shrank most (matched by the files and
 * functions of their labels, which survive edits elsewhere in the code), and the differences in
 * command line and allocator environment. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "copies.h"
#include "offload.h"
#include "record.h"
#include "report.h"
#include "snapshot_keys.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vramtap diff [OPTIONS] A.json B.json\n"
            "\n"
            "Compares two snapshots: each device's peak and categories side by side with the\n"
            "change, the phase and step of each peak, the allocation sites that grew or shrank\n"
            "most, and the differences in command line and allocator-related environment\n"
            "('unknown' where a snapshot does not record them). Sites are matched by the\n"
            "files and functions of their labels' frames, lines only as a tie-break, so a line\n"
            "moved in a caller keeps the match. Two identical files: 'identical'.\n"
            "\n"
            "options:\n"
            "  --json       the same facts as JSON (docs/report-json.md)\n"
            "  --top N      sites shown that grew and that shrank (default %d)\n"
            "  --device N   only device N\n"
            "  --modules all  every nn.Module path that differs (default: the first %d)\n"
            "  --all-frames site labels keep the frames that are folded by default\n",
            VT_DEFAULT_TOP, 24);
}

/* --- sites matched by key ---------------------------------------------------------------- */

/* The bytes of a site, or of several sites with one key and lines. */
typedef struct {
    char key[VT_LABEL_MAX * 2], lines[64];
    int32_t site; /* a representative: the largest */
    int64_t bytes;
    bool matched;
} keyed;

typedef struct {
    const keyed *ka, *kb; /* either may be NULL: the site is on one side only */
    int64_t a, b;
} sig_delta;

static int by_key_lines(const void *pa, const void *pb)
{
    const keyed *a = pa, *b = pb;
    int c = strcmp(a->key, b->key);
    return c ? c : strcmp(a->lines, b->lines);
}

/* The bytes of one device by key and lines, sorted, duplicates merged. The sites are loaded. */
static int totals(vt_snapshot *s, const vt_bill *bill, keyed **out, size_t *nout, vt_err *err)
{
    size_t n = bill ? bill->nsites_all : 0, m = 0;
    keyed *t = calloc(n ? n : 1, sizeof *t);
    if (!t) {
        vt_err_set(err, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const vt_site_total *st = &bill->top_all[i];
        vt_site_key(s, st->site, t[i].key, sizeof t[i].key, t[i].lines, sizeof t[i].lines);
        t[i].site = st->site;
        t[i].bytes = st->bytes;
    }
    qsort(t, n, sizeof *t, by_key_lines);
    for (size_t i = 0; i < n; i++) {
        if (m && !by_key_lines(&t[m - 1], &t[i]))
            t[m - 1].bytes += t[i].bytes;
        else
            t[m++] = t[i];
    }
    *out = t;
    *nout = m;
    return 0;
}

static int by_change_desc(const void *pa, const void *pb)
{
    const sig_delta *a = pa, *b = pb;
    int64_t da = a->b - a->a, db = b->b - b->a;
    if (da != db)
        return da > db ? -1 : 1;
    const keyed *x = a->kb ? a->kb : a->ka, *y = b->kb ? b->kb : b->ka;
    return by_key_lines(x, y);
}

/* Joins two sorted lists on cmp into deltas (either side NULL when unmatched): first on key and
 * lines, marking the pairs; then, with leftovers, what no pair took, by key. */
static void join(keyed *ta, size_t na, keyed *tb, size_t nb, int (*cmp)(const void *, const void *),
                 bool leftovers, sig_delta *d, size_t *n)
{
    for (size_t i = 0, j = 0; i < na || j < nb;) {
        if (i < na && ta[i].matched) {
            i++;
            continue;
        }
        if (j < nb && tb[j].matched) {
            j++;
            continue;
        }
        int c = i == na ? 1 : j == nb ? -1 : cmp(&ta[i], &tb[j]);
        sig_delta x = {NULL, NULL, 0, 0};
        if (c <= 0) {
            x.ka = &ta[i];
            x.a = ta[i++].bytes;
            /* the rest of the key's unmatched lines on this side */
            for (; leftovers && i < na && !cmp(x.ka, &ta[i]); i++)
                x.a += ta[i].matched ? 0 : ta[i].bytes;
        }
        if (c >= 0) {
            x.kb = &tb[j];
            x.b = tb[j++].bytes;
            for (; leftovers && j < nb && !cmp(x.kb, &tb[j]); j++)
                x.b += tb[j].matched ? 0 : tb[j].bytes;
        }
        if (!leftovers && x.ka && x.kb) {
            ((keyed *)x.ka)->matched = ((keyed *)x.kb)->matched = true;
            if (x.a != x.b)
                d[(*n)++] = x;
        } else if (leftovers && x.a != x.b) {
            d[(*n)++] = x;
        }
    }
}

static int by_key(const void *pa, const void *pb)
{
    return strcmp(((const keyed *)pa)->key, ((const keyed *)pb)->key);
}

/* Sites of both sides with the same frames and lines first; what is left is matched by frames
 * alone (a line moved in a caller), the key's sites taken together. Largest growth first. */
static int match_sites(vt_loaded *la, const vt_bill *ba, vt_loaded *lb, const vt_bill *bb,
                       keyed **ka, keyed **kb, sig_delta **out, size_t *nout, vt_err *err)
{
    size_t na = 0, nb = 0, n = 0;
    *ka = *kb = NULL;
    if (totals(&la->snap, ba, ka, &na, err) || totals(&lb->snap, bb, kb, &nb, err))
        return -1;
    sig_delta *d = malloc((na + nb + 1) * sizeof *d);
    if (!d) {
        vt_err_set(err, "out of memory");
        return -1;
    }
    join(*ka, na, *kb, nb, by_key_lines, false, d, &n);
    join(*ka, na, *kb, nb, by_key, true, d, &n);
    qsort(d, n, sizeof *d, by_change_desc);
    *out = d;
    *nout = n;
    return 0;
}

/* --- one device ---------------------------------------------------------------------------- */

typedef struct {
    int device;
    const vt_bill *a, *b;
    keyed *ka, *kb;
    sig_delta *sites;
    size_t nsites, ngrew, nshrank; /* grew: the first ngrew; shrank: the last nshrank */
} dev_diff;

static void dev_diff_free(dev_diff *d)
{
    free(d->ka);
    free(d->kb);
    free(d->sites);
}

static const vt_bill *find_bill(const vt_loaded *l, int device)
{
    for (size_t i = 0; i < l->nbills; i++)
        if (l->bills[i].dev->device == device)
            return &l->bills[i];
    return NULL;
}

static void site_label(vt_loaded *la, vt_loaded *lb, const sig_delta *d, char *buf)
{
    if (d->kb)
        vt_site_label(&lb->snap, d->kb->site, buf);
    else
        vt_site_label(&la->snap, d->ka->site, buf);
}

/* The representative site's signature, B's when B has the site; NULL without a stack. */
static const char *delta_signature(vt_loaded *la, vt_loaded *lb, const sig_delta *d)
{
    const vt_loaded *l = d->kb ? lb : la;
    int32_t site = d->kb ? d->kb->site : d->ka->site;
    return site >= 0 ? l->snap.sites[site].signature : NULL;
}

static int64_t unattributed(const vt_bill *b)
{
    return b->cat_bytes[VT_CAT_UNATTRIBUTED_PERSISTENT] +
           b->cat_bytes[VT_CAT_UNATTRIBUTED_TRANSIENT];
}

/* The rows of the side-by-side table: the peak, the categories, the live total. */
enum { ROW_PEAK = -1, ROW_UNATTRIBUTED = VT_CAT_UNATTRIBUTED_PERSISTENT, ROW_TOTAL = VT_NCATS };

static int64_t row_bytes(const vt_bill *b, int row)
{
    if (!b)
        return -1;
    if (row == ROW_PEAK)
        return b->dev->peak_bytes;
    if (row == ROW_TOTAL)
        return b->dev->listed_bytes;
    if (b->native)
        return -1;
    return row == ROW_UNATTRIBUTED ? unattributed(b) : b->cat_bytes[row];
}

static void print_row(FILE *out, const char *label, int64_t a, int64_t b)
{
    char sa[32] = "-", sb[32] = "-", sd[32] = "", pct[24] = "";
    if (a >= 0)
        vt_fmt_bytes(sa, a);
    if (b >= 0)
        vt_fmt_bytes(sb, b);
    if (a >= 0 && b >= 0) {
        vt_fmt_delta(sd, b - a);
        if (a > 0)
            snprintf(pct, sizeof pct, "%+.1f%%", 100.0 * (double)(b - a) / (double)a);
    }
    const char *colour =
        a >= 0 && b >= 0 && b != a ? vt_on(b > a ? VT_STYLE_BAD : VT_STYLE_GOOD) : "";
    fprintf(out, "  %-20s %20s %20s  %s%12s %8s%s\n", label, sa, sb, colour, sd, pct,
            *colour ? vt_off() : "");
}

static const char *peak_when(const vt_bill *b, char buf[48])
{
    return b ? vt_fmt_when(buf, b->dev->peak_phase, b->dev->peak_step) : "-";
}

/* PyTorch's own categories of imported memory timelines, side by side. */
static void print_pytorch_rows(FILE *out, const vt_loaded *la, const vt_loaded *lb, int device)
{
    json_t *ca = vt_pytorch_categories_json(&la->snap, device),
           *cb = vt_pytorch_categories_json(&lb->snap, device);
    json_t *names = json_object();
    const char *name;
    json_t *v;
    json_object_foreach(ca, name, v) json_object_set(names, name, json_true());
    json_object_foreach(cb, name, v) json_object_set(names, name, json_true());
    if (json_object_size(names))
        fprintf(out, "  %sPyTorch's own categories%s\n", vt_on(VT_STYLE_BOLD), vt_off());
    json_object_foreach(names, name, v)
    {
        json_t *x = json_object_get(ca, name), *y = json_object_get(cb, name);
        char label[64];
        snprintf(label, sizeof label, "  %s", name);
        print_row(out, label, json_is_integer(x) ? json_integer_value(x) : -1,
                  json_is_integer(y) ? json_integer_value(y) : -1);
    }
    json_decref(names);
    json_decref(ca);
    json_decref(cb);
}

static void print_device(FILE *out, vt_loaded *la, vt_loaded *lb, const dev_diff *d)
{
    char wa[48], wb[48], label[VT_LABEL_MAX], b1[32], b2[32], b3[32];
    char title[24];
    snprintf(title, sizeof title, "cuda:%d", d->device);
    fprintf(out, "\n%s%-22s%s %20s %20s  %12s\n", vt_on(VT_STYLE_BOLD), title, vt_off(), "A", "B",
            "change");
    print_row(out, "peak", row_bytes(d->a, ROW_PEAK), row_bytes(d->b, ROW_PEAK));
    fprintf(out, "  %-20s %20s %20s\n", "peak at", peak_when(d->a, wa), peak_when(d->b, wb));
    bool markers = la->snap.phase_markers || lb->snap.phase_markers;
    for (int c = 0; c < ROW_UNATTRIBUTED; c++)
        markers |= (d->a && d->a->evidence[c][VT_EV_IDENTITY]) ||
                   (d->b && d->b->evidence[c][VT_EV_IDENTITY]);
    for (int c = 0; c < ROW_UNATTRIBUTED; c++)
        if (markers)
            print_row(out, vt_category_label((vt_category)c), row_bytes(d->a, c),
                      row_bytes(d->b, c));
    if (row_bytes(d->a, ROW_UNATTRIBUTED) > 0 || row_bytes(d->b, ROW_UNATTRIBUTED) > 0)
        print_row(out, "unattributed", row_bytes(d->a, ROW_UNATTRIBUTED),
                  row_bytes(d->b, ROW_UNATTRIBUTED));
    print_row(out, "live at the peak", row_bytes(d->a, ROW_TOTAL), row_bytes(d->b, ROW_TOTAL));
    print_pytorch_rows(out, la, lb, d->device);
    if ((d->a && d->a->native) || (d->b && d->b->native))
        fprintf(out, "  (native mode in %s: no category split, see 'vramtap report')\n",
                d->a && d->a->native ? (d->b && d->b->native ? "both" : "A") : "B");
    vt_print_modules_diff(out, &la->snap, d->a, &lb->snap, d->b, la->modules_all);

    for (int grew = 1; grew >= 0; grew--) {
        size_t n = grew ? d->ngrew : d->nshrank;
        if (!n)
            continue;
        fprintf(out, "\n  %ssites that %s most%s\n", vt_on(VT_STYLE_BOLD), grew ? "grew" : "shrank",
                vt_off());
        for (size_t i = 0; i < n; i++) {
            const sig_delta *s = grew ? &d->sites[i] : &d->sites[d->nsites - 1 - i];
            site_label(la, lb, s, label);
            fprintf(out, "    %12s  %10s -> %-10s  %s\n", vt_fmt_delta(b1, s->b - s->a),
                    vt_fmt_bytes(b2, s->a), vt_fmt_bytes(b3, s->b), label);
        }
    }
}

/* --- command line and environment ---------------------------------------------------------- */

/* The same bytes: one file given twice, or a copy. */
/* Host RAM side by side, when either run recorded it. */
static void print_host(FILE *out, const vt_snapshot *a, const vt_snapshot *b)
{
    vt_copy_summary ca = vt_copy_summarize(a), cb = vt_copy_summarize(b);
    int64_t oa = vt_offloaded_bytes(a), ob = vt_offloaded_bytes(b);
    if (a->ram.high_water < 0 && b->ram.high_water < 0 && a->ram.workers_high < 0 &&
        b->ram.workers_high < 0 && !ca.any && !cb.any && oa <= 0 && ob <= 0)
        return;
    fprintf(out, "\n%shost%s %20s %20s  %12s\n", vt_on(VT_STYLE_BOLD), vt_off(), "A", "B",
            "change");
    print_row(out, "RAM high-water", a->ram.high_water, b->ram.high_water);
    if (a->ram.workers_high >= 0 || b->ram.workers_high >= 0)
        print_row(out, "workers at most", a->ram.workers_high, b->ram.workers_high);
    if (oa > 0 || ob > 0)
        print_row(out, "offloaded (pinned)", oa, ob);
    if (!ca.any && !cb.any)
        return;
    /* a typical step's copies (the report's), - for a run without copies recorded */
    print_row(out, "uploads a step", ca.present ? ca.up : -1, cb.present ? cb.up : -1);
    print_row(out, "  from pageable", ca.present ? ca.up_pageable : -1,
              cb.present ? cb.up_pageable : -1);
    char sa[24] = "-", sb[24] = "-";
    if (ca.present)
        snprintf(sa, sizeof sa, "%lld", (long long)ca.typical.sync_d2h);
    if (cb.present)
        snprintf(sb, sizeof sb, "%lld", (long long)cb.typical.sync_d2h);
    fprintf(out, "  %-20s %20s %20s\n", "sync downloads", sa, sb);
}

static bool identical(const vt_snapshot *a, const vt_snapshot *b)
{
    return a->buflen == b->buflen && !memcmp(a->buf, b->buf, a->buflen);
}

static bool same_command(const vt_snapshot *a, const vt_snapshot *b)
{
    if (a->argc != b->argc)
        return false;
    for (size_t i = 0; i < a->argc; i++)
        if (strcmp(a->argv[i], b->argv[i]))
            return false;
    return true;
}

static const char *env_value(const vt_snapshot *s, const char *key)
{
    if (!strcmp(key, "vramtap mode (pytorch)"))
        return s->pytorch_mode;
    return json_string_value(json_object_get(s->env, key));
}

static int by_string(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Names whose values differ, sorted; the PyTorch mode vramtap ran in counts as one. */
static size_t env_differences(const vt_snapshot *a, const vt_snapshot *b, const char ***out)
{
    size_t cap = json_object_size(a->env) + json_object_size(b->env) + 1, n = 0;
    const char **names = malloc(cap * sizeof *names);
    if (!names) {
        *out = NULL;
        return 0;
    }
    const vt_snapshot *sides[] = {a, b};
    for (int side = 0; side < 2; side++) {
        const char *k;
        json_t *v;
        json_object_foreach(sides[side]->env, k, v)
        {
            const char *va = env_value(a, k), *vb = env_value(b, k);
            bool seen = side == 1 && json_object_get(a->env, k);
            if (!seen && (!va || !vb || strcmp(va, vb)))
                names[n++] = k;
        }
    }
    qsort(names, n, sizeof *names, by_string);
    const char *ma = a->pytorch_mode, *mb = b->pytorch_mode;
    if ((ma || mb) && (!ma || !mb || strcmp(ma, mb)))
        names[n++] = "vramtap mode (pytorch)";
    *out = names;
    return n;
}

static void print_heading(FILE *out, const vt_loaded *la, const vt_loaded *lb, const char **env,
                          size_t nenv)
{
    const vt_snapshot *a = &la->snap, *b = &lb->snap;
    fprintf(out, "%svramtap diff%s  A: %s\n              B: %s\n", vt_on(VT_STYLE_BOLD), vt_off(),
            a->path, b->path);
    if (!a->argc || !b->argc) {
        fprintf(out, "  command   unknown%s\n",
                a->argc   ? " in B"
                : b->argc ? " in A"
                          : " (neither snapshot records it)");
    } else if (same_command(a, b)) {
        fputs("  command   the same", out);
        if (a->argc) {
            fputs(": ", out);
            vt_print_command(out, a->argv, a->argc);
        }
        fputc('\n', out);
    } else {
        fputs("  command   A: ", out);
        vt_print_command(out, a->argv, a->argc);
        fputs("\n            B: ", out);
        vt_print_command(out, b->argv, b->argc);
        fputc('\n', out);
    }
    if (!a->env || !b->env)
        fprintf(out, "  env       unknown%s\n",
                a->env   ? " in B"
                : b->env ? " in A"
                         : " (neither snapshot records it)");
    else if (!nenv)
        fputs("  env       the same allocator settings\n", out);
    for (size_t i = 0; i < nenv; i++) {
        const char *va = env_value(a, env[i]), *vb = env_value(b, env[i]);
        fprintf(out, "  %-9s %s  A: %s  B: %s\n", i ? "" : "env", env[i], va ? va : "(unset)",
                vb ? vb : "(unset)");
    }
    char changes[1024];
    if (vt_record_changes(a, b, changes, sizeof changes)) {
        int col = fprintf(out, "  %-9s ", "run");
        vt_print_wrapped(out, col, col, changes);
    } else if (json_object_get(a->root, VT_K_RUN_RECORD) &&
               json_object_get(b->root, VT_K_RUN_RECORD)) {
        fputs("  run       the same run record\n", out);
    }
}

/* --- JSON ---------------------------------------------------------------------------------- */

static json_t *side_json(const vt_bill *b)
{
    if (!b)
        return json_null();
    return json_pack("{s:I, s:o, s:I, s:o}", "peak_bytes", (json_int_t)b->dev->peak_bytes, "peak",
                     vt_peak_json(b->dev), "live_bytes", (json_int_t)b->dev->listed_bytes,
                     "categories", vt_categories_json(b));
}

static json_t *change_json(const dev_diff *d)
{
    if (!d->a || !d->b)
        return json_null();
    json_t *cats = json_null();
    if (!d->a->native && !d->b->native) {
        cats = json_object();
        for (int c = 0; c <= ROW_UNATTRIBUTED; c++)
            json_object_set_new(
                cats, c == ROW_UNATTRIBUTED ? "unattributed" : vt_category_key((vt_category)c),
                json_integer(row_bytes(d->b, c) - row_bytes(d->a, c)));
    }
    return json_pack("{s:I, s:I, s:o}", "peak_bytes",
                     (json_int_t)(d->b->dev->peak_bytes - d->a->dev->peak_bytes), "live_bytes",
                     (json_int_t)(d->b->dev->listed_bytes - d->a->dev->listed_bytes), "categories",
                     cats);
}

static json_t *sites_json(vt_loaded *la, vt_loaded *lb, const dev_diff *d, bool grew)
{
    json_t *arr = json_array();
    char label[VT_LABEL_MAX];
    size_t n = grew ? d->ngrew : d->nshrank;
    for (size_t i = 0; i < n; i++) {
        const sig_delta *s = grew ? &d->sites[i] : &d->sites[d->nsites - 1 - i];
        site_label(la, lb, s, label);
        const char *sig = delta_signature(la, lb, s);
        json_array_append_new(arr,
                              json_pack("{s:o, s:s, s:I, s:I, s:I}", "signature",
                                        sig ? json_string(sig) : json_null(), "label", label,
                                        "a_bytes", (json_int_t)s->a, "b_bytes", (json_int_t)s->b,
                                        "change", (json_int_t)(s->b - s->a)));
    }
    return arr;
}

static json_t *command_json(const vt_snapshot *s)
{
    json_t *a = json_array();
    for (size_t i = 0; i < s->argc; i++)
        json_array_append_new(a, json_string(s->argv[i]));
    return a;
}

static json_t *diff_json(vt_loaded *la, vt_loaded *lb, const dev_diff *devs, size_t ndevs,
                         const char **env, size_t nenv)
{
    json_t *envs = json_array(), *devices = json_array();
    for (size_t i = 0; i < nenv; i++) {
        const char *va = env_value(&la->snap, env[i]), *vb = env_value(&lb->snap, env[i]);
        json_array_append_new(envs, json_pack("{s:s, s:o, s:o}", "name", env[i], "a",
                                              va ? json_string(va) : json_null(), "b",
                                              vb ? json_string(vb) : json_null()));
    }
    for (size_t i = 0; i < ndevs; i++) {
        json_t *pa = vt_pytorch_categories_json(&la->snap, devs[i].device),
               *pb = vt_pytorch_categories_json(&lb->snap, devs[i].device);
        json_t *dev =
            json_pack("{s:i, s:o, s:o, s:o, s:o, s:o, s:{s:o, s:o}}", "device", devs[i].device, "a",
                      side_json(devs[i].a), "b", side_json(devs[i].b), "change",
                      change_json(&devs[i]), "sites_grew", sites_json(la, lb, &devs[i], true),
                      "sites_shrank", sites_json(la, lb, &devs[i], false), "pytorch_categories",
                      "a", pa ? pa : json_null(), "b", pb ? pb : json_null());
        json_object_set_new(dev, "modules",
                            vt_modules_diff_json(&la->snap, devs[i].a, &lb->snap, devs[i].b));
        json_array_append_new(devices, dev);
    }
    const vt_snapshot *a = &la->snap, *b = &lb->snap;
    json_t *differs = !a->argc || !b->argc ? json_null() : json_boolean(!same_command(a, b));
    char changes[1024];
    size_t nchanges = vt_record_changes(a, b, changes, sizeof changes);
    return json_pack(
        "{s:s, s:i, s:{s:s, s:o, s:o}, s:{s:s, s:o, s:o}, s:b, s:o, s:o, s:o, s:o, "
        "s:{s:o, s:o}, s:{s:o, s:o}, s:{s:o, s:o}}",
        "format", "vramtap-diff", "version", 1, "a", "file", a->path, "command", command_json(a),
        "run_record", vt_run_record_json(a), "b", "file", b->path, "command", command_json(b),
        "run_record", vt_run_record_json(b), "identical", identical(a, b), "command_differs",
        differs, "env", a->env && b->env ? envs : (json_decref(envs), json_null()), "devices",
        devices, "record_changes", nchanges ? json_string(changes) : json_null(), "host_ram", "a",
        vt_host_ram_json(a), "b", vt_host_ram_json(b), "copies", "a", vt_copies_json(a), "b",
        vt_copies_json(b), "host_offloaded", "a", vt_offloaded_json(a), "b", vt_offloaded_json(b));
}

/* --- the command --------------------------------------------------------------------------- */

static int build(vt_loaded *la, vt_loaded *lb, const vt_report_opts *o, dev_diff **out,
                 size_t *nout, vt_err *err)
{
    dev_diff *devs = calloc(la->nbills + lb->nbills + 1, sizeof *devs);
    size_t n = 0;
    if (!devs) {
        vt_err_set(err, "out of memory");
        return -1;
    }
    /* every device of A, then those only B has, in ordinal order */
    for (int side = 0; side < 2; side++) {
        const vt_loaded *l = side ? lb : la;
        for (size_t i = 0; i < l->nbills; i++) {
            int dev = l->bills[i].dev->device;
            if (side && find_bill(la, dev))
                continue;
            devs[n++] =
                (dev_diff){dev, find_bill(la, dev), find_bill(lb, dev), NULL, NULL, NULL, 0, 0, 0};
        }
    }
    for (size_t i = 0; i < n; i++) {
        dev_diff *d = &devs[i];
        if (match_sites(la, d->a, lb, d->b, &d->ka, &d->kb, &d->sites, &d->nsites, err)) {
            for (size_t j = 0; j <= i; j++)
                dev_diff_free(&devs[j]);
            free(devs);
            return -1;
        }
        while (d->ngrew < d->nsites && d->ngrew < o->top_n &&
               d->sites[d->ngrew].b > d->sites[d->ngrew].a)
            d->ngrew++;
        while (d->nshrank < d->nsites && d->nshrank < o->top_n &&
               d->sites[d->nsites - 1 - d->nshrank].b < d->sites[d->nsites - 1 - d->nshrank].a)
            d->nshrank++;
    }
    *out = devs;
    *nout = n;
    return 0;
}

int vt_cmd_diff(int argc, char **argv)
{
    vt_report_opts o;
    int first = vt_parse_opts(argc, argv, &o, false, usage);
    if (first < 0)
        return first == -2 ? 0 : 2;
    if (argc - first != 2) {
        fprintf(stderr, "vramtap diff: needs two snapshots, A and B (try 'vramtap diff --help')\n");
        return 2;
    }
    vt_term_init();
    vt_loaded la, lb;
    vt_err err;
    dev_diff *devs = NULL;
    size_t ndevs = 0;
    /* every site of both runs is matched: build the bills with no site shown */
    vt_report_opts load = o;
    load.top_n = 0;
    if (vt_loaded_open(argv[first], &load, &la, &err)) {
        fprintf(stderr, "vramtap diff: %s\n", err.msg);
        return 2;
    }
    if (vt_loaded_open(argv[first + 1], &load, &lb, &err)) {
        fprintf(stderr, "vramtap diff: %s\n", err.msg);
        vt_loaded_close(&la);
        return 2;
    }
    int rc = 0;
    if (vt_sites_load_all(&la.snap, &err) || vt_sites_load_all(&lb.snap, &err) ||
        build(&la, &lb, &o, &devs, &ndevs, &err)) {
        fprintf(stderr, "vramtap diff: %s\n", err.msg);
        rc = 2;
    } else {
        const char **env;
        size_t nenv = env_differences(&la.snap, &lb.snap, &env);
        if (o.json) {
            json_t *doc = diff_json(&la, &lb, devs, ndevs, env, nenv);
            vt_print_json(stdout, doc);
            json_decref(doc);
        } else {
            if (identical(&la.snap, &lb.snap)) {
                puts("identical");
            } else {
                print_heading(stdout, &la, &lb, env, nenv);
                for (size_t i = 0; i < ndevs; i++)
                    print_device(stdout, &la, &lb, &devs[i]);
                print_host(stdout, &la.snap, &lb.snap);
            }
        }
        free(env);
    }
    for (size_t i = 0; i < ndevs; i++)
        dev_diff_free(&devs[i]);
    free(devs);
    vt_loaded_close(&la);
    vt_loaded_close(&lb);
    return rc;
}
