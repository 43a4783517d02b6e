/* The pictures grouped by nn.Module path (docs/modules.md): a chart stacks at most VT_NCATS
 * groups, so the module tree at the peak is cut into a few subtrees. The top paths are groups;
 * the heaviest group is replaced by its children (and its own allocations, when it has some)
 * while they fit, so a model whose memory sits in one branch is drawn by that branch's parts.
 * The slots left are "other modules" (paths in no group), the memory whose path the file does
 * not say (the library's history_allocations carry none) and "(outside modules)". */
#include <stdlib.h>
#include <string.h>

#include "pictures.h"

typedef struct {
    size_t row;
    bool own; /* the row's own allocations only: its children are groups of their own */
} cut;

/* The rows right below rows[i] that hold bytes at the peak. */
static size_t kids_of(const vt_module_bill *mb, size_t i, size_t *kids)
{
    size_t n = 0;
    for (size_t k = i + 1; k < mb->n && mb->rows[k].path && mb->rows[k].depth > mb->rows[i].depth;
         k++)
        if (mb->rows[k].depth == mb->rows[i].depth + 1 && mb->rows[k].bytes > 0)
            kids[n++] = k;
    return n;
}

/* Replaces the heaviest whole group whose parts fit in room; false when none does. */
static bool split_one(const vt_module_bill *mb, size_t room, cut *cuts, size_t *n, size_t *kids)
{
    size_t best = SIZE_MAX, nbest = 0;
    for (size_t g = 0; g < *n; g++) {
        if (cuts[g].own)
            continue;
        const vt_module_row *r = &mb->rows[cuts[g].row];
        size_t nk = kids_of(mb, cuts[g].row, kids);
        size_t parts = nk + (r->self_bytes > 0);
        if (nk && *n - 1 + parts <= room &&
            (best == SIZE_MAX || r->bytes > mb->rows[cuts[best].row].bytes)) {
            best = g;
            nbest = nk;
        }
    }
    if (best == SIZE_MAX)
        return false;
    const vt_module_row *r = &mb->rows[cuts[best].row];
    size_t row = cuts[best].row;
    kids_of(mb, row, kids);
    memmove(&cuts[best], &cuts[best + 1], (*n - best - 1) * sizeof *cuts);
    (*n)--;
    if (r->self_bytes > 0)
        cuts[(*n)++] = (cut){row, true};
    for (size_t k = 0; k < nbest; k++)
        cuts[(*n)++] = (cut){kids[k], false};
    return true;
}

static int64_t cut_bytes(const vt_module_bill *mb, const cut *c)
{
    return c->own ? mb->rows[c->row].self_bytes : mb->rows[c->row].bytes;
}

static const vt_module_bill *sorting;

static int heavier_first(const void *pa, const void *pb)
{
    const cut *a = pa, *b = pb;
    int64_t x = cut_bytes(sorting, a), y = cut_bytes(sorting, b);
    if (x != y)
        return x > y ? -1 : 1;
    return strcmp(sorting->rows[a->row].path, sorting->rows[b->row].path);
}

/* The group of one interned path: the deepest cut above or at it, if it covers it. */
static int slot_of_path(const vt_module_bill *mb, const cut *cuts, size_t n, const char *path,
                        int other)
{
    int slot = other;
    size_t best = 0;
    for (size_t g = 0; g < n; g++) {
        const char *gp = mb->rows[cuts[g].row].path;
        size_t len = strlen(gp);
        bool exact = !strcmp(path, gp);
        bool under = !strncmp(path, gp, len) && path[len] == '.';
        if ((exact || (under && !cuts[g].own)) && len + exact > best) {
            best = len + exact;
            slot = (int)g;
        }
    }
    return slot;
}

/* The cut of the tree into at most room groups, heavier first. */
static size_t cut_tree(const vt_module_bill *mb, size_t room, cut *cuts, size_t *kids)
{
    size_t n = 0;
    /* rows come heavier first among siblings: the first top paths holding bytes */
    for (size_t i = 0; i < mb->n && n < room; i++)
        if (mb->rows[i].path && mb->rows[i].depth == 0 && mb->rows[i].bytes > 0)
            cuts[n++] = (cut){i, false};
    while (split_one(mb, room, cuts, &n, kids))
        ;
    sorting = mb;
    qsort(cuts, n, sizeof *cuts, heavier_first);
    return n;
}

static bool in_history_only(const vt_snapshot *snap, const vt_alloc *a)
{
    return snap->nhextra && a >= snap->hextra && a < snap->hextra + snap->nhextra;
}

static int slot_module(vt_snapshot *snap, const vt_alloc *a, bool native, const void *ctx,
                       int *slot, vt_err *err)
{
    (void)native, (void)err;
    const vt_module_groups *g = ctx;
    if (a->mpath >= 0)
        *slot = g->slot_of_path[a->mpath];
    else
        *slot = g->unknown >= 0 && in_history_only(snap, a) ? g->unknown : g->outside;
    return 0;
}

/* The paths that some allocation of the device names, in the live set or the history. */
static bool *paths_used(const vt_snapshot *snap, int device)
{
    bool *used = calloc(snap->nmpaths + 1, sizeof *used);
    for (size_t i = 0; used && i < snap->nhallocs + snap->nallocs; i++) {
        const vt_alloc *a = i < snap->nallocs ? &snap->allocs[i] : snap->hallocs[i - snap->nallocs];
        if (a->device == device && a->mpath >= 0)
            used[a->mpath] = true;
    }
    return used;
}

/* Whether the history's own allocations (those not live at the peak) can say where they were
 * made: not when none of them names a path, as the library writes them. */
static bool history_unnamed(const vt_snapshot *snap, int device)
{
    bool any = false;
    for (size_t i = 0; i < snap->nhextra; i++) {
        if (snap->hextra[i].mpath >= 0)
            return false;
        any |= snap->hextra[i].device == device;
    }
    return any;
}

int vt_module_groups_build(vt_snapshot *snap, const vt_bill *bill, vt_module_groups *g, vt_err *err)
{
    memset(g, 0, sizeof *g);
    g->slot = slot_module;
    if (!snap->nmpaths)
        return 0;
    vt_module_bill mb;
    if (vt_module_bill_build(snap, bill->dev, bill->native, &mb, err))
        return -1;
    cut cuts[VT_NCATS];
    size_t *kids = malloc((mb.n + 1) * sizeof *kids);
    bool *used = paths_used(snap, bill->dev->device);
    g->slot_of_path = malloc(snap->nmpaths * sizeof *g->slot_of_path);
    if (!kids || !used || !g->slot_of_path) {
        free(kids);
        free(used);
        vt_module_bill_free(&mb);
        vt_module_groups_free(g);
        vt_err_set(err, "%s: out of memory", snap->path);
        return -1;
    }
    bool unknown = history_unnamed(snap, bill->dev->device);
    /* outside modules and unknown paths take a slot each; "other modules" one when needed */
    size_t room = VT_NCATS - 1 - unknown, n;
    bool any_other;
    /* a second cut, one group smaller, when "other modules" needs a slot the first one took */
    for (int pass = 0; pass < 2; pass++, room--) {
        n = cut_tree(&mb, room, cuts, kids);
        any_other = false;
        for (size_t i = 0; i < snap->nmpaths; i++) {
            g->slot_of_path[i] = slot_of_path(&mb, cuts, n, snap->mpaths[i], (int)n);
            any_other |= used[i] && g->slot_of_path[i] == (int)n;
        }
        if (!any_other || n < room)
            break;
    }
    free(kids);
    free(used);
    for (size_t i = 0; i < n; i++) {
        const vt_module_row *r = &mb.rows[cuts[i].row];
        g->path[i] = strdup(r->path);
        g->own[i] = cuts[i].own;
    }
    g->n = n;
    g->other = any_other ? (int)g->n++ : -1;
    g->unknown = unknown ? (int)g->n++ : -1;
    g->outside = (int)g->n++;
    vt_module_bill_free(&mb);
    for (size_t i = 0; i < n; i++)
        if (!g->path[i]) {
            vt_module_groups_free(g);
            vt_err_set(err, "%s: out of memory", snap->path);
            return -1;
        }
    /* at the peak: what the series' slots hold then, from the live set the bill counts */
    for (size_t i = 0; i < snap->nallocs; i++) {
        const vt_alloc *a = &snap->allocs[i];
        int s;
        if (a->device == bill->dev->device && !slot_module(snap, a, bill->native, g, &s, err))
            g->peak_bytes[s] += a->size;
    }
    g->any = true;
    return 0;
}

void vt_module_groups_free(vt_module_groups *g)
{
    for (size_t i = 0; i < VT_NCATS; i++)
        free(g->path[i]);
    free(g->slot_of_path);
    memset(g, 0, sizeof *g);
}

const char *vt_module_group_label(const vt_module_groups *g, size_t i, char *buf, size_t len)
{
    if ((int)i == g->outside)
        return "(outside modules)";
    if ((int)i == g->other)
        return "other modules";
    if ((int)i == g->unknown)
        return "(path not recorded)";
    snprintf(buf, len, "%s%s", g->path[i], g->own[i] ? " (own)" : "");
    return buf;
}

const char *vt_module_group_color(const vt_module_groups *g, size_t i)
{
    /* not the categories' colours, so that the two groupings cannot be mistaken */
    static const char *const colors[VT_NCATS] = {"#2f6b9a", "#d4a017", "#8c564b", "#17becf",
                                                 "#c44e97", "#9467bd", "#bcbd22"};
    if ((int)i == g->outside)
        return "#c7c7c7";
    if ((int)i == g->unknown)
        return "#e7dcc0";
    return (int)i == g->other ? "#7f7f7f" : colors[i];
}
