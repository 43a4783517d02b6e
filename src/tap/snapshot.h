/* Writing snapshots: at exit, and the post-mortem of an out-of-memory failure at once. */
#ifndef VT_SNAPSHOT_H
#define VT_SNAPSHOT_H

#include "tap.h"

/* vramtap.<prog>.<pid>.json, when the process made a device allocation. */
VT_HIDDEN void vt_snapshot_write_exit(void);
/* vramtap.<prog>.<pid>.oom<n>.json for out-of-memory event n (1-based). */
VT_HIDDEN void vt_snapshot_write_oom(int n);

#endif
