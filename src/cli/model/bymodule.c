#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "bymodule.h"
#include "grow.h"

typedef struct {
    UT_hash_handle hh;
    size_t index;
    const char *path; /* the row's */
} node_key;

typedef struct {
    node_key *map;
    vt_module_row *rows;
    size_t *parent; /* SIZE_MAX: a top node */
    size_t n, cap, parent_cap;
} tree;

/* The node of path[0..len), made with its ancestors when new; SIZE_MAX when out of memory. */
static size_t node_of(tree *t, const char *path, size_t len)
{
    node_key *k;
    HASH_FIND(hh, t->map, path, len, k);
    if (k)
        return k->index;
    const char *dot = NULL;
    for (size_t i = len; i > 0 && !dot; i--)
        if (path[i - 1] == '.')
            dot = path + i - 1;
    size_t parent = SIZE_MAX;
    if (dot && dot > path && (parent = node_of(t, path, (size_t)(dot - path))) == SIZE_MAX)
        return SIZE_MAX;
    if (vt_grow(&t->rows, &t->cap, t->n + 1, sizeof *t->rows, 64) ||
        vt_grow(&t->parent, &t->parent_cap, t->n + 1, sizeof *t->parent, 64))
        return SIZE_MAX;
    char *copy = strndup(path, len);
    if (!copy || !(k = malloc(sizeof *k))) {
        free(copy);
        return SIZE_MAX;
    }
    k->path = copy;
    k->index = t->n;
    HASH_ADD_KEYPTR(hh, t->map, copy, len, k);
    vt_module_row *r = &t->rows[t->n];
    memset(r, 0, sizeof *r);
    r->path = copy;
    r->name = parent == SIZE_MAX ? copy : copy + (dot - path) + 1;
    r->depth = parent == SIZE_MAX ? 0 : t->rows[parent].depth + 1;
    t->parent[t->n] = parent;
    return t->n++;
}

static void add(vt_module_row *r, const vt_module_row *a)
{
    r->bytes += a->bytes;
    r->count += a->count;
    for (int c = 0; c < VT_NCATS; c++)
        r->cat[c] += a->cat[c];
    r->saved += a->saved;
    r->recomputed += a->recomputed;
}

static const tree *sorting;

static int heavier_first(const void *pa, const void *pb)
{
    const vt_module_row *a = &sorting->rows[*(const size_t *)pa],
                        *b = &sorting->rows[*(const size_t *)pb];
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    return strcmp(a->path, b->path);
}

/* The children of `parent` (SIZE_MAX: the top nodes), heavier first, each followed by its own. */
static void walk(const tree *t, size_t parent, vt_module_row *out, size_t *n, size_t *scratch)
{
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++)
        if (t->parent[i] == parent)
            scratch[k++] = i;
    size_t *kids = malloc((k ? k : 1) * sizeof *kids);
    if (!kids) /* out of memory: in index order, unsorted */
        kids = scratch;
    else
        memcpy(kids, scratch, k * sizeof *kids);
    sorting = t;
    qsort(kids, k, sizeof *kids, heavier_first);
    for (size_t i = 0; i < k; i++) {
        out[(*n)++] = t->rows[kids[i]];
        walk(t, kids[i], out, n, scratch);
    }
    if (kids != scratch)
        free(kids);
}

/* The map goes; the paths too unless the rows took them. */
static void drop_tree(tree *t, bool paths)
{
    node_key *k, *tmp;
    HASH_ITER(hh, t->map, k, tmp)
    {
        HASH_DEL(t->map, k);
        if (paths)
            free((char *)k->path);
        free(k);
    }
    free(t->rows);
    free(t->parent);
}

int vt_module_bill_build(vt_snapshot *snap, const vt_device *dev, bool native, vt_module_bill *out,
                         vt_err *err)
{
    memset(out, 0, sizeof *out);
    out->any = snap->nmpaths > 0;
    tree t = {0};
    vt_module_row outside = {0};
    size_t *leaf = calloc(snap->nmpaths + 1, sizeof *leaf);
    if (!leaf)
        goto nomem;
    for (size_t i = 0; i < snap->nmpaths; i++) {
        leaf[i] = node_of(&t, snap->mpaths[i], strlen(snap->mpaths[i]));
        if (leaf[i] == SIZE_MAX)
            goto nomem;
        t.rows[leaf[i]].interned = true;
    }
    for (size_t i = 0; i < snap->nallocs; i++) {
        const vt_alloc *a = &snap->allocs[i];
        if (a->device != dev->device)
            continue;
        int64_t split[VT_NCATS][VT_NEVIDENCE] = {{0}}, workspace = 0;
        if (vt_split_alloc(snap, a, native, split, &workspace, err))
            goto fail;
        vt_module_row one = {.bytes = a->size, .count = 1};
        for (int c = 0; c < VT_NCATS; c++)
            for (int e = 0; e < VT_NEVIDENCE; e++)
                one.cat[c] += split[c][e];
        one.saved = a->birth.phase == VT_FORWARD && dev->peak_phase == VT_BACKWARD && !a->recomputed
                        ? a->size
                        : 0;
        one.recomputed = a->recomputed ? a->size : 0;
        if (a->mpath < 0) {
            add(&outside, &one);
            continue;
        }
        size_t n = leaf[a->mpath];
        t.rows[n].self_bytes += a->size;
        for (; n != SIZE_MAX; n = t.parent[n])
            add(&t.rows[n], &one);
    }
    size_t *scratch = malloc((t.n + 1) * sizeof *scratch);
    out->rows = malloc((t.n + 1) * sizeof *out->rows);
    if (!scratch || !out->rows) {
        free(scratch);
        goto nomem;
    }
    walk(&t, SIZE_MAX, out->rows, &out->n, scratch);
    free(scratch);
    outside.name = "(outside modules)";
    out->rows[out->n++] = outside;
    drop_tree(&t, false);
    free(leaf);
    return 0;
nomem:
    vt_err_set(err, "%s: out of memory", snap->path);
fail:
    drop_tree(&t, true);
    free(leaf);
    free(out->rows);
    memset(out, 0, sizeof *out);
    return -1;
}

void vt_module_bill_free(vt_module_bill *mb)
{
    for (size_t i = 0; i < mb->n; i++)
        free((char *)mb->rows[i].path);
    free(mb->rows);
    memset(mb, 0, sizeof *mb);
}

const vt_module_row *vt_module_row_of(const vt_module_bill *mb, const char *path)
{
    for (size_t i = 0; i < mb->n; i++)
        if (path ? mb->rows[i].path && !strcmp(mb->rows[i].path, path) : !mb->rows[i].path)
            return &mb->rows[i];
    return NULL;
}
