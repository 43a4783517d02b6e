/* The process's host RAM beside its device memory: resident memory read at each sample, and
 * at write time the kernel's high-water mark and the ceilings that apply (the machine's RAM,
 * the memory cgroup's limit). Reads of /proc and /sys files: never under a vramtap lock. */
#ifndef VT_HOSTRAM_H
#define VT_HOSTRAM_H

#include <stdio.h>

#include "table.h"

/* Resident bytes now (/proc/self/statm), -1 when unreadable. No malloc, no stdio. */
VT_HIDDEN int64_t vt_hostram_rss(void);

/* The "host_ram" member: the high-water mark, the highest sample (`high`, at `high_time_s`
 * seconds into the run) and the ceilings. */
VT_HIDDEN void vt_hostram_write_json(FILE *f, const vt_ram *high, double high_time_s);

#endif
