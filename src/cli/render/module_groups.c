/* The pictures grouped by nn.Module path (docs/modules.md): a chart stacks at most VT_NCATS
 * groups, so the module tree at the peak is cut into a few subtrees. The top paths are groups;
 * the heaviest group is split while there is room: its heaviest children become groups, and it
 * keeps the rest (its own allocations and those of the children left), so a model whose memory
 * sits in one branch is drawn by that branch's parts. The slots left are "other modules" (paths
 * in no group), the memory whose path the file does not say (the library's history_allocations
 * carry none) and "(outside modules)". */
#include <stdlib.h>
#include <string.h>

#include "pictures.h"

typedef struct {
    size_t row;
    bool rest;     /* the row but for its children that are groups of their own */
    int64_t bytes; /* at the peak */
} cut;

/* The rows right below rows[i] that hold bytes at the peak, heavier first; *all counts those
 * that hold none too. */
static size_t kids_of(const vt_module_bill *mb, size_t i, size_t *kids, size_t *all)
{
    size_t n = 0;
    *all = 0;
    for (size_t k = i + 1; k < mb->n && mb->rows[k].path && mb->rows[k].depth > mb->rows[i].depth;
         k++)
        if (mb->rows[k].depth == mb->rows[i].depth + 1) {
            ++*all;
            if (mb->rows[k].bytes > 0)
                kids[n++] = k;
        }
    return n;
}

/* How many of a group's nk children can become groups, with free slots for the parts; *rest:
 * whether the group stays for the rest. 0: it cannot be split. */
static size_t parts_of(const vt_module_row *r, size_t nk, size_t all, size_t free, bool *rest)
{
    *rest = r->self_bytes > 0 || all > nk;
    if (nk + *rest > free) {
        *rest = true;
        nk = free - 1;
    }
    return nk;
}

/* Splits the heaviest whole group that can be split in room; false when none can. */
static bool split_one(const vt_module_bill *mb, size_t room, cut *cuts, size_t *n, size_t *kids)
{
    size_t best = SIZE_MAX, all;
    bool rest;
    for (size_t g = 0; g < *n; g++) {
        size_t nk = kids_of(mb, cuts[g].row, kids, &all);
        if (!cuts[g].rest && nk &&
            parts_of(&mb->rows[cuts[g].row], nk, all, room - *n + 1, &rest) &&
            (best == SIZE_MAX || cuts[g].bytes > cuts[best].bytes))
            best = g;
    }
    if (best == SIZE_MAX)
        return false;
    cut split = cuts[best];
    size_t nk = kids_of(mb, split.row, kids, &all);
    size_t m = parts_of(&mb->rows[split.row], nk, all, room - *n + 1, &rest);
    memmove(&cuts[best], &cuts[best + 1], (*n - best - 1) * sizeof *cuts);
    (*n)--;
    split.rest = true;
    for (size_t k = 0; k < m; k++) {
        cuts[(*n)++] = (cut){kids[k], false, mb->rows[kids[k]].bytes};
        split.bytes -= mb->rows[kids[k]].bytes;
    }
    if (rest)
        cuts[(*n)++] = split;
    return true;
}

static const vt_module_bill *sorting;

static int heavier_first(const void *pa, const void *pb)
{
    const cut *a = pa, *b = pb;
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    return strcmp(sorting->rows[a->row].path, sorting->rows[b->row].path);
}

/* The group of one interned path: the deepest cut at or above it. */
static int slot_of_path(const vt_module_bill *mb, const cut *cuts, size_t n, const char *path,
                        int other)
{
    int slot = other;
    size_t best = 0;
    for (size_t g = 0; g < n; g++) {
        const char *gp = mb->rows[cuts[g].row].path;
        size_t len = strlen(gp);
        if (!strncmp(path, gp, len) && (!path[len] || path[len] == '.') && len + 1 > best) {
            best = len + 1;
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
            cuts[n++] = (cut){i, false, mb->rows[i].bytes};
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

/* Whether the history's own allocations (those not live at the peak) cannot say where they
 * were made: libraries before `history.module_paths` wrote them without a path (an import names
 * every path it knows). */
static bool history_unnamed(const vt_snapshot *snap, int device)
{
    if (snap->kind == VT_SNAP_IMPORT || snap->history_module_paths)
        return false;
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
        g->rest[i] = cuts[i].rest;
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
    snprintf(buf, len, "%s%s", g->path[i], g->rest[i] ? " (rest)" : "");
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
