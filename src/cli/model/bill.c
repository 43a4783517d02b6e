/* The bill of one device: the allocations live at its peak (or, in a post-mortem, at the
 * failure) by category and by site; in native mode, by when the allocator's segments were
 * created. */
#include <stdlib.h>
#include <string.h>

#include "snapshot.h"

static int by_bytes_desc(const void *pa, const void *pb)
{
    const vt_site_total *a = pa, *b = pb;
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    return (a->site > b->site) - (a->site < b->site);
}

/* The sites with bytes in one column of the table (row = site, row n = no stack), largest
 * first; *nshown = how many of them the report shows. */
static int top_sites(const int64_t *bytes, const int64_t *count, size_t n, size_t stride,
                     size_t top_n, vt_site_total **out, size_t *nshown, size_t *nall)
{
    size_t used = 0;
    for (size_t i = 0; i <= n; i++)
        used += count[i * stride] > 0;
    vt_site_total *all = malloc((used ? used : 1) * sizeof *all);
    if (!all)
        return -1;
    used = 0;
    for (size_t i = 0; i <= n; i++)
        if (count[i * stride] > 0)
            all[used++] =
                (vt_site_total){i == n ? -1 : (int32_t)i, bytes[i * stride], count[i * stride]};
    qsort(all, used, sizeof *all, by_bytes_desc);
    *out = all;
    *nshown = used < top_n ? used : top_n;
    *nall = used;
    return 0;
}

/* Chronological order inside a step: a batch is uploaded ("other") before its forward. */
static int phase_rank(vt_phase p)
{
    static const int rank[VT_NPHASES + 1] = {
        [VT_SETUP] = 0,    [VT_OTHER] = 1,     [VT_FORWARD] = 2,
        [VT_BACKWARD] = 3, [VT_OPTIMIZER] = 4, [VT_NOPHASE] = 5};
    return rank[p];
}

static int by_birth(const void *pa, const void *pb)
{
    const vt_birth_group *a = pa, *b = pb;
    if (a->step != b->step)
        return a->step < b->step ? -1 : 1;
    return phase_rank(a->phase) - phase_rank(b->phase);
}

static int group_by_birth(const vt_snapshot *snap, int device, vt_bill *bill)
{
    size_t n = 0;
    vt_birth_group *g = malloc((bill->dev->listed_count + 1) * sizeof *g);
    if (!g)
        return -1;
    for (size_t i = 0; i < snap->nallocs; i++) {
        const vt_alloc *a = &snap->allocs[i];
        if (a->device == device)
            g[n++] = (vt_birth_group){a->birth.phase, a->birth.step, a->size, 1};
    }
    qsort(g, n, sizeof *g, by_birth);
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        if (out && !by_birth(&g[out - 1], &g[i])) {
            g[out - 1].bytes += g[i].bytes;
            g[out - 1].count++;
        } else {
            g[out++] = g[i];
        }
    }
    bill->groups = g;
    bill->ngroups = out;
    return 0;
}

/* Sites whose labels read the same are one row to the reader: among the largest sites (a few
 * times as many as are shown), rows with the same label are merged and the rows re-sorted.
 * Loads the frames of every site it looks at. */
static int merge_labels(vt_snapshot *snap, vt_site_total *t, size_t *nshown, size_t *n,
                        size_t top_n, vt_err *err)
{
    size_t look = *n < top_n * 4 + 16 ? *n : top_n * 4 + 16, out = 0;
    if (!top_n)
        look = 0;
    char(*labels)[VT_LABEL_MAX] = malloc((look ? look : 1) * sizeof *labels);
    if (!labels) {
        vt_err_set(err, "%s: out of memory", snap->path);
        return -1;
    }
    for (size_t i = 0; i < look; i++) {
        if (t[i].site >= 0 && vt_site_load(snap, (size_t)t[i].site, err)) {
            free(labels);
            return -1;
        }
        vt_site_label(snap, t[i].site, labels[out]);
        size_t j = 0;
        while (j < out && strcmp(labels[j], labels[out]))
            j++;
        if (j < out) {
            t[j].bytes += t[i].bytes;
            t[j].count += t[i].count;
        } else {
            t[out++] = t[i];
        }
    }
    free(labels);
    /* merged rows only grew: they still come before every row not looked at */
    qsort(t, out, sizeof *t, by_bytes_desc);
    memmove(t + out, t + look, (*n - look) * sizeof *t);
    *n -= look - out;
    *nshown = *n < top_n ? *n : top_n;
    return 0;
}

int vt_bill_build(vt_snapshot *snap, const vt_device *dev, size_t top_n, vt_bill *bill, vt_err *err)
{
    memset(bill, 0, sizeof *bill);
    bill->dev = dev;
    bill->native = vt_snapshot_native(snap);
    for (size_t i = 0; i < snap->nallocs && !bill->native; i++)
        bill->native =
            snap->allocs[i].device == dev->device && snap->allocs[i].kind == VT_KIND_SEGMENT;

    /* per site (row) and category (column); the last row is "no stack", the last column the
     * sum over categories */
    size_t rows = snap->nsites + 1, cols = VT_NCATS + 1;
    int64_t *bytes = calloc(rows * cols, sizeof *bytes),
            *count = calloc(rows * cols, sizeof *count);
    if (!bytes || !count)
        goto nomem;
    for (size_t i = 0; i < snap->nallocs; i++) {
        const vt_alloc *a = &snap->allocs[i];
        if (a->device != dev->device)
            continue;
        int64_t split[VT_NCATS][VT_NEVIDENCE] = {{0}};
        if (vt_split_alloc(snap, a, bill->native, split, &bill->workspace_bytes, err))
            goto fail_counts;
        size_t row = a->site < 0 ? snap->nsites : (size_t)a->site;
        for (int c = 0; c < VT_NCATS; c++) {
            int64_t in_c = 0;
            for (int e = 0; e < VT_NEVIDENCE; e++) {
                bill->evidence[c][e] += split[c][e];
                in_c += split[c][e];
            }
            if (!in_c)
                continue;
            /* an allocation split by labels counts once in each category it has bytes in */
            bill->cat_bytes[c] += in_c;
            bill->cat_count[c]++;
            bytes[row * cols + c] += in_c;
            count[row * cols + c]++;
        }
        bytes[row * cols + VT_NCATS] += a->size;
        count[row * cols + VT_NCATS]++;
    }
    for (int c = 0; c < VT_NCATS; c++)
        if (top_sites(bytes + c, count + c, snap->nsites, cols, top_n, &bill->top[c],
                      &bill->ntop[c], &bill->nsites_in[c]))
            goto nomem;
    if (top_sites(bytes + VT_NCATS, count + VT_NCATS, snap->nsites, cols, top_n, &bill->top_all,
                  &bill->ntop_all, &bill->nsites_all) ||
        (bill->native && group_by_birth(snap, dev->device, bill)))
        goto nomem;
    free(bytes);
    free(count);
    for (int c = 0; c < VT_NCATS; c++)
        if (merge_labels(snap, bill->top[c], &bill->ntop[c], &bill->nsites_in[c], top_n, err))
            goto fail;
    if (merge_labels(snap, bill->top_all, &bill->ntop_all, &bill->nsites_all, top_n, err))
        goto fail;
    return 0;

nomem:
    vt_err_set(err, "%s: out of memory", snap->path);
fail_counts:
    free(bytes);
    free(count);
fail:
    vt_bill_free(bill);
    return -1;
}

void vt_bill_free(vt_bill *bill)
{
    for (int c = 0; c < VT_NCATS; c++)
        free(bill->top[c]);
    free(bill->top_all);
    free(bill->groups);
    memset(bill, 0, sizeof *bill);
}

vt_category vt_bill_dominant(const vt_bill *bill)
{
    vt_category best = VT_CAT_PARAMETERS;
    int64_t best_bytes = -1;
    for (int c = 0; c <= VT_CAT_UNATTRIBUTED_PERSISTENT; c++) {
        int64_t b =
            bill->cat_bytes[c] + (c == VT_CAT_UNATTRIBUTED_PERSISTENT ? bill->cat_bytes[c + 1] : 0);
        if (b > best_bytes) {
            best = (vt_category)c;
            best_bytes = b;
        }
    }
    return best;
}
