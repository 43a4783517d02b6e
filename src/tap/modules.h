/* The loaded objects that native frames point into: absolute path, GNU build id and load bias,
 * recorded when a stack that uses one is first interned. A snapshot names frames by these, so
 * a library unloaded before the file is written keeps its name, its symbols (read from the
 * file on disk) and its signature. */
#ifndef VT_MODULES_H
#define VT_MODULES_H

#include <stdint.h>

#include "tap.h"

/* Modules past this many are not recorded (their frames show no module); counted. */
#define VT_MAX_MODULES 4096
#define VT_NO_MODULE UINT16_MAX

typedef struct {
    const char *path;     /* absolute path as mapped; lives until exit */
    const char *build_id; /* lowercase hex, or NULL */
    uintptr_t base;       /* load bias (link_map l_addr) */
} vt_module;

/* The module of each of `n` return addresses, into ids[]. Calls the loader (dl_iterate_phdr)
 * for addresses it has not seen: never with a vramtap lock held. */
VT_HIDDEN void vt_modules_resolve(const uint64_t *ips, int n, uint16_t *ids);
/* Modules recorded; *not_recorded (if given): those left out because VT_MAX_MODULES were. */
VT_HIDDEN int vt_module_count(uint64_t *not_recorded);
/* Module `id` (0 <= id < vt_module_count(NULL)); the strings live until exit. */
VT_HIDDEN vt_module vt_module_get(int id);

#endif
