/* The process's host RAM beside its device memory: resident memory read at each sample, and
 * at write time the kernel's high-water mark and the ceilings that apply (the machine's RAM,
 * the memory cgroup's limit). Reads of /proc and /sys files: never under a vramtap lock. */
#ifndef VT_HOSTRAM_H
#define VT_HOSTRAM_H

#include <stdio.h>

#include "table.h"

/* Resident bytes now (/proc/self/statm), -1 when unreadable. No malloc, no stdio. */
VT_HIDDEN int64_t vt_hostram_rss(void);

/* This process's children and each one's proportional set size (/proc/PID/smaps_rollup: pages
 * shared copy-on-write with this process are not counted twice), at most `max`; returns how
 * many there are, which may be more than `max`, or -1 when /proc cannot be read. Reading a
 * large process's smaps costs about a millisecond: the caller rate-limits it. */
VT_HIDDEN int vt_hostram_workers(int *pids, int64_t *pss, int max);

/* The "host_ram" member: the high-water mark, the highest sample (`high`, at `high_time_s`
 * seconds into the run), the workers and the ceilings. */
VT_HIDDEN void vt_hostram_write_json(FILE *f, const vt_ram *high, double high_time_s,
                                     const vt_workers *workers);

#endif
