/* Writing snapshots: at exit, and the post-mortem of an out-of-memory failure at once. */
#ifndef VT_SNAPSHOT_H
#define VT_SNAPSHOT_H

#include "tap.h"

/* vramtap.<prog>.<host>[.r<rank>].<pid>.json (outfile.h), when the process made a device
 * allocation. */
VT_HIDDEN void vt_snapshot_write_exit(void);
/* At a step boundary: when a device's peak rose since the last file, the same file as at exit,
 * marked "interim" (the first three at once, then at most one per VRAMTAP_INTERIM_S). A job killed
 * by SIGTERM or SIGKILL (a time limit, torchrun tearing down its workers) never reaches exit; it
 * leaves this. */
VT_HIDDEN void vt_snapshot_write_interim(void);
/* Whether the next step boundary may write an interim file: a device's peak rose since the last
 * one. A caller that holds the GIL lets go of it only then. */
VT_HIDDEN int vt_snapshot_interim_may_write(void);
/* vramtap.<prog>.<host>[.r<rank>].<pid>.oom<n>.json for out-of-memory event n (1-based). */
VT_HIDDEN void vt_snapshot_write_oom(int n);

#endif
