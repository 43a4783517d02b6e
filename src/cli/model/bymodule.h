/* The bill by nn.Module path (docs/modules.md): what each module's calls left live at a
 * device's peak, as a tree of paths ("enc.layers" holds "enc.layers.0" and its children). */
#ifndef VT_BYMODULE_H
#define VT_BYMODULE_H

#include "snapshot.h"

typedef struct {
    const char *path; /* NULL: made outside every module; else the full dotted path */
    const char *name; /* its last part ("attn"), or the path of a node without a parent */
    int depth;        /* 0 for a top node */
    bool interned;    /* a path the hooks named; false: only a prefix of named ones */
    /* the node's own allocations and those of the paths below it */
    int64_t bytes, count, self_bytes;
    int64_t cat[VT_NCATS];
    /* saved for backward: born in the module's forward, live at a peak that fell in backward
     * (recomputations excluded); recomputed: made by a forward run again inside backward */
    int64_t saved, recomputed;
} vt_module_row;

typedef struct {
    vt_module_row *rows; /* depth first, heavier siblings first; the outside row last */
    size_t n;
    bool any; /* the snapshot names module paths */
} vt_module_bill;

/* Rows for the allocations of dev in the snapshot (the live set at its peak). */
int vt_module_bill_build(vt_snapshot *snap, const vt_device *dev, bool native, vt_module_bill *out,
                         vt_err *err);
void vt_module_bill_free(vt_module_bill *mb);
/* The row of path in mb, NULL when none (path NULL: the outside row). */
const vt_module_row *vt_module_row_of(const vt_module_bill *mb, const char *path);

#endif
