/* The memory cgroup this process is in, shared by the library (the limit it runs under) and
 * `vramtap run` (whether the OOM killer ended the job). Plain reads of small files: callers
 * hold no vramtap lock. */
#ifndef VT_CGROUP_H
#define VT_CGROUP_H

#include <stddef.h>

/* The directory: VRAMTAP_CGROUP when set, else the v1 memory controller's (where there is
 * one, it is the one that limits) or v2's unified one from /proc/self/cgroup, under
 * /sys/fs/cgroup. 0, or -1 when none is found. */
int vt_cgroup_dir(char *dir, size_t size);

/* The N of a "KEY N" line of DIR/FILE (memory.events, memory.oom_control); -1 when absent. */
long long vt_cgroup_key(const char *dir, const char *file, const char *key);

/* The memory limit: v2 memory.max or v1 memory.limit_in_bytes; 0 when unlimited ("max", or
 * v1's page-rounded LONG_MAX), -1 when neither can be read. */
long long vt_cgroup_limit(const char *dir);

#endif
