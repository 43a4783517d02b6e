/* The records of a compact snapshot (src/common/compact.h): the allocations and history events
 * its sections hold, decoded and checked as load.c checks the same elements in a JSON file. */
#ifndef VT_COMPACT_READ_H
#define VT_COMPACT_READ_H

#include "alloc_read.h"
#include "compact.h"

/* The head's `compact` member: the names records refer to by index. Strings point into the
 * snapshot's root. */
typedef struct {
    const char **apis, **kinds, **phases, **categories;
    size_t napis, nkinds, nphases, ncategories;
    /* what the loader makes of them: unknown kinds are VT_KIND_OTHER, unknown phases
     * VT_NPHASES (a record naming one is refused), unknown categories -1 (ignored) */
    vt_alloc_kind *kind_of;
    vt_phase *phase_of;
    int *category_of;
} vt_cnames;

/* 0, or -1 with err when the member is missing or not four arrays of strings. */
int vt_cnames_load(json_t *root, vt_cnames *n, vt_err *err);
void vt_cnames_free(vt_cnames *n);

/* A section's records: its count, checked against its length (every record takes a byte at
 * least), and a cursor on the first. -1 with err when the count does not fit. */
int vt_csection_start(const uint8_t *p, size_t len, vt_creader *r, size_t *count, vt_err *err);

/* Allocation records into out[0..count), zeroed by the caller. -1 with err and *at, the index
 * of the record at fault. */
int vt_callocs_read(vt_creader *r, size_t count, const vt_cnames *names, const vt_alloc_limits *lim,
                    vt_alloc *out, size_t *at, vt_err *err);
/* History events into events[0..count) and ids[0..count). */
int vt_cevents_read(vt_creader *r, size_t count, vt_hevent *events, int64_t *ids, size_t *at,
                    vt_err *err);

#endif
