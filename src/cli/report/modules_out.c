/* The report's "by module" section and its JSON (docs/modules.md). */
#include <string.h>

#include "bymodule.h"
#include "report.h"

/* Without --modules all: the rows holding at least this share of what modules hold, at most
 * MAX_ROWS of them. */
#define SHOWN_SHARE 20
#define MAX_ROWS 24

static void print_row(FILE *out, const vt_module_row *r)
{
    char b[32], line[512];
    int n = snprintf(line, sizeof line, "%*s%s", 2 * r->depth, "", r->name);
    if (n < 0)
        return;
    int col = fprintf(out, "    %-28s %11s %4lld x", line, vt_fmt_bytes(b, r->bytes),
                      (long long)r->count);
    size_t used = 0;
    line[0] = '\0';
    if (r->saved)
        used += (size_t)snprintf(line + used, sizeof line - used, "saved %s",
                                 vt_fmt_bytes(b, r->saved));
    if (r->recomputed && used < sizeof line)
        used += (size_t)snprintf(line + used, sizeof line - used, "%srecomputed %s",
                                 used ? ", " : "", vt_fmt_bytes(b, r->recomputed));
    for (int c = 0; c < VT_NCATS && used < sizeof line; c++)
        if (r->cat[c])
            used += (size_t)snprintf(line + used, sizeof line - used, "%s%s %s", used ? "; " : "",
                                     vt_category_label((vt_category)c), vt_fmt_bytes(b, r->cat[c]));
    fputs("  ", out);
    vt_print_wrapped(out, col + 2, col + 2, line);
}

void vt_print_modules(FILE *out, vt_snapshot *s, const vt_bill *bill, bool all)
{
    vt_module_bill mb;
    vt_err err;
    if (!s->nmpaths)
        return;
    if (vt_module_bill_build(s, bill->dev, bill->native, &mb, &err)) {
        fprintf(out, "\n  by module: %s\n", err.msg);
        return;
    }
    int64_t in_modules = bill->dev->listed_bytes - mb.rows[mb.n - 1].bytes;
    fprintf(out,
            "\n  %sby module%s  bytes live at the peak by nn.Module path, each with the paths "
            "below it\n",
            vt_on(VT_STYLE_BOLD), vt_off());
    vt_print_wrapped(out, fprintf(out, "    "), 4,
                     bill->dev->peak_phase == VT_BACKWARD
                         ? "saved for backward (saved): made in the module's forward, still live "
                           "at this peak in backward; recomputed: made by a forward run again in "
                           "backward (activation checkpointing)"
                         : "the peak is not in a backward: nothing is saved for one");
    size_t shown = 0, hidden = 0;
    for (size_t i = 0; i + 1 < mb.n; i++) {
        const vt_module_row *r = &mb.rows[i];
        if (!r->bytes)
            continue;
        if (!all && (shown == MAX_ROWS || r->bytes * SHOWN_SHARE < in_modules)) {
            hidden++;
            continue;
        }
        print_row(out, r);
        shown++;
    }
    if (mb.rows[mb.n - 1].bytes)
        print_row(out, &mb.rows[mb.n - 1]);
    if (hidden)
        fprintf(out, "    %zu smaller path%s not shown (--modules all shows every one)\n", hidden,
                hidden == 1 ? "" : "s");
    vt_module_bill_free(&mb);
}

static json_t *row_json(const vt_module_row *r)
{
    json_t *cats = json_object();
    for (int c = 0; c < VT_NCATS; c++)
        json_object_set_new(cats, vt_category_key((vt_category)c), json_integer(r->cat[c]));
    return json_pack("{s:o, s:I, s:I, s:I, s:o, s:I, s:I}", "path",
                     r->path ? json_string(r->path) : json_null(), "bytes", (json_int_t)r->bytes,
                     "self_bytes", (json_int_t)r->self_bytes, "count", (json_int_t)r->count,
                     "categories", cats, "saved_for_backward", (json_int_t)r->saved, "recomputed",
                     (json_int_t)r->recomputed);
}

json_t *vt_modules_json(vt_snapshot *s, const vt_bill *bill)
{
    json_t *rows = json_array();
    vt_module_bill mb;
    vt_err err;
    if (!s->nmpaths || vt_module_bill_build(s, bill->dev, bill->native, &mb, &err))
        return rows;
    for (size_t i = 0; i < mb.n; i++)
        if (mb.rows[i].bytes || mb.rows[i].path)
            json_array_append_new(rows, row_json(&mb.rows[i]));
    vt_module_bill_free(&mb);
    return rows;
}

/* --- diff ----------------------------------------------------------------------------------- */

typedef struct {
    const vt_module_row *a, *b; /* either may be NULL: the path is on one side only */
} row_pair;

/* Every path of A in A's order, then those only B has in B's; each side's bill is built here
 * (a side without a bill, or a snapshot without module paths, has none). */
typedef struct {
    vt_module_bill a, b;
    row_pair *pairs;
    size_t n;
} module_diff;

static bool module_bill(vt_snapshot *s, const vt_bill *bill, vt_module_bill *mb)
{
    vt_err err;
    memset(mb, 0, sizeof *mb);
    return !bill || !s->nmpaths || !vt_module_bill_build(s, bill->dev, bill->native, mb, &err);
}

static void module_diff_free(module_diff *d)
{
    vt_module_bill_free(&d->a);
    vt_module_bill_free(&d->b);
    free(d->pairs);
}

static int module_diff_build(vt_snapshot *sa, const vt_bill *ba, vt_snapshot *sb, const vt_bill *bb,
                             module_diff *d)
{
    memset(d, 0, sizeof *d);
    if (!module_bill(sa, ba, &d->a) || !module_bill(sb, bb, &d->b) ||
        !(d->pairs = malloc((d->a.n + d->b.n + 1) * sizeof *d->pairs))) {
        module_diff_free(d);
        return -1;
    }
    for (size_t i = 0; i < d->a.n; i++)
        d->pairs[d->n++] = (row_pair){&d->a.rows[i], vt_module_row_of(&d->b, d->a.rows[i].path)};
    for (size_t i = 0; i < d->b.n; i++)
        if (!vt_module_row_of(&d->a, d->b.rows[i].path))
            d->pairs[d->n++] = (row_pair){NULL, &d->b.rows[i]};
    return 0;
}

static bool pair_differs(const row_pair *p)
{
    const vt_module_row none = {0}, *a = p->a ? p->a : &none, *b = p->b ? p->b : &none;
    return a->bytes != b->bytes || a->saved != b->saved || a->recomputed != b->recomputed;
}

static void print_change(FILE *out, const char *what, int64_t a, int64_t b)
{
    char sa[32], sb[32];
    if (a != b)
        fprintf(out, "  %s %s -> %s", what, vt_fmt_bytes(sa, a), vt_fmt_bytes(sb, b));
}

void vt_print_modules_diff(FILE *out, vt_snapshot *sa, const vt_bill *ba, vt_snapshot *sb,
                           const vt_bill *bb, bool all)
{
    module_diff d;
    if ((!sa->nmpaths && !sb->nmpaths) || module_diff_build(sa, ba, sb, bb, &d))
        return;
    size_t shown = 0, hidden = 0;
    for (size_t i = 0; i < d.n; i++) {
        const row_pair *p = &d.pairs[i];
        if (!pair_differs(p))
            continue;
        if (!all && shown == MAX_ROWS) {
            hidden++;
            continue;
        }
        if (!shown++)
            fprintf(out,
                    "\n  %sby module%s  (paths whose bytes at the peak, saved for backward or "
                    "recomputed differ)\n",
                    vt_on(VT_STYLE_BOLD), vt_off());
        const vt_module_row none = {0}, *a = p->a ? p->a : &none, *b = p->b ? p->b : &none;
        const char *path = (p->a ? p->a : p->b)->path;
        char s1[32], s2[32], s3[32];
        fprintf(out, "    %-28s %10s -> %-10s %12s", path ? path : "(outside modules)",
                vt_fmt_bytes(s1, a->bytes), vt_fmt_bytes(s2, b->bytes),
                vt_fmt_delta(s3, b->bytes - a->bytes));
        print_change(out, "saved", a->saved, b->saved);
        print_change(out, "recomputed", a->recomputed, b->recomputed);
        fputc('\n', out);
    }
    if (hidden)
        fprintf(out, "    %zu more path%s differ (--modules all shows every one)\n", hidden,
                hidden == 1 ? "" : "s");
    module_diff_free(&d);
}

static json_t *side_json(const vt_module_row *r)
{
    return r ? json_pack("{s:I, s:I, s:I}", "bytes", (json_int_t)r->bytes, "saved_for_backward",
                         (json_int_t)r->saved, "recomputed", (json_int_t)r->recomputed)
             : json_null();
}

json_t *vt_modules_diff_json(vt_snapshot *sa, const vt_bill *ba, vt_snapshot *sb, const vt_bill *bb)
{
    json_t *rows = json_array();
    module_diff d;
    if ((!sa->nmpaths && !sb->nmpaths) || module_diff_build(sa, ba, sb, bb, &d))
        return rows;
    for (size_t i = 0; i < d.n; i++) {
        const row_pair *p = &d.pairs[i];
        const char *path = (p->a ? p->a : p->b)->path;
        int64_t change = (p->b ? p->b->bytes : 0) - (p->a ? p->a->bytes : 0);
        json_array_append_new(rows, json_pack("{s:o, s:o, s:o, s:I}", "path",
                                              path ? json_string(path) : json_null(), "a",
                                              side_json(p->a), "b", side_json(p->b), "change",
                                              (json_int_t)change));
    }
    module_diff_free(&d);
    return rows;
}
