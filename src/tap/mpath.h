/* nn.Module paths (docs/modules.md): the framework hooks intern each module's path once and
 * keep the current one in a process-wide cell, as the phase is process-wide; each allocation
 * records the id current at its birth. No string per record. */
#ifndef VT_MPATH_H
#define VT_MPATH_H

#include <stdint.h>

#include "tap.h"

/* The cell the hooks write (vramtap.h): 0 outside every module, else an id from
 * vramtap_module_path(), with VRAMTAP_MODULE_RECOMPUTED set for a forward run again inside
 * backward (activation checkpointing). */
extern VT_EXPORT _Atomic uint32_t vramtap_module_current;

static inline uint32_t vt_mpath_now(void)
{
    return atomic_load_explicit(&vramtap_module_current, memory_order_relaxed);
}

#endif
