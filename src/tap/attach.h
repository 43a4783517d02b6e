/* CUPTI (attach.c): vramtap as a CUDA injection library. Loaded by the driver from
 * CUDA_INJECTION64_PATH at cuInit, it subscribes to CUPTI's driver-API callbacks for the calls
 * that make and release memory: without LD_PRELOAD it records through them (attach mode); under
 * LD_PRELOAD it only counts them beside interposition (the coverage check). */
#ifndef VT_ATTACH_H
#define VT_ATTACH_H

#include <stdio.h>

#include "tap.h"

/* What CUPTI's callbacks do: nothing (not loaded by the driver), record (attach mode), or count
 * beside interposition (the coverage check). */
enum { VT_ATTACH_NONE, VT_ATTACH_RECORD, VT_ATTACH_COUNT };
extern VT_HIDDEN _Atomic int vt_attach_role;
VT_HIDDEN void vt_coverage_count_interposed(vt_api api, uint64_t size);
/* An allocation interposition recorded (table.c): the coverage check's other side. The test is
 * inline: every allocation asks, and only the coverage check counts. */
static inline void vt_coverage_interposed(vt_api api, uint64_t size)
{
    if (atomic_load_explicit(&vt_attach_role, memory_order_relaxed) == VT_ATTACH_COUNT)
        vt_coverage_count_interposed(api, size);
}
/* A forked child counts its own allocations, from nothing, as its books start empty. */
VT_HIDDEN void vt_coverage_reset_after_fork(void);

/* The top-level "attach" member (how vramtap was loaded: "preload" or "cupti") and, when the
 * check ran, "coverage", each followed by ",\n"; the figures are read as they stand (they are
 * counted without a lock). vt_coverage_exit warns on stderr when interposition missed some. */
VT_HIDDEN void vt_attach_write(FILE *f);
VT_HIDDEN void vt_coverage_exit(void);

#endif
