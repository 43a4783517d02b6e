/* Messages to the user at start and at exit (notice.c). */
#ifndef VT_NOTICE_H
#define VT_NOTICE_H

#include "tap.h"

/* At start, after the allocator settings are chosen: VRAMTAP_QUIET, which process is the one
 * the user started, VRAMTAP_OUT checked (vt_cfg.out_dir falls back to the working directory),
 * and under `vramtap run` what vramtap changed. */
VT_HIDDEN void vt_notice_init(void);
/* A file was written: the snapshot (oom_n 0) or post-mortem oom_n. */
VT_HIDDEN void vt_notice_written(const char *path, int oom_n);
/* At exit, after the snapshot: one line per file written, or that nothing was seen. */
VT_HIDDEN void vt_notice_exit(void);

#endif
