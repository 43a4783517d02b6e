/* CUPTI (attach.c): vramtap as a CUDA injection library. Loaded by the driver from
 * CUDA_INJECTION64_PATH at cuInit, it subscribes to CUPTI's driver-API callbacks for the calls
 * that make and release memory: without LD_PRELOAD it records through them (attach mode); under
 * LD_PRELOAD it only counts them beside interposition (the coverage check). */
#ifndef VT_ATTACH_H
#define VT_ATTACH_H

#include <stdio.h>

#include "tap.h"

/* An allocation interposition recorded (table.c): the coverage check's other side. */
VT_HIDDEN void vt_coverage_interposed(vt_api api, uint64_t size);
/* A forked child counts its own allocations, from nothing, as its books start empty. */
VT_HIDDEN void vt_coverage_reset_after_fork(void);

/* The top-level "attach" member (how vramtap was loaded: "preload" or "cupti") and, when the
 * check ran, "coverage", each followed by ",\n"; the figures are read as they stand (they are
 * counted without a lock). vt_coverage_exit warns on stderr when interposition missed some. */
VT_HIDDEN void vt_attach_write(FILE *f);
VT_HIDDEN void vt_coverage_exit(void);

#endif
