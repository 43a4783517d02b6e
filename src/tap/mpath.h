/* nn.Module paths (docs/modules.md): the framework hooks intern each module's path once and
 * keep the current one in a process-wide cell, as the phase is process-wide; each allocation
 * records the id current at its birth. No string per record. */
#ifndef VT_MPATH_H
#define VT_MPATH_H

#include <stdint.h>
#include <stdio.h>

#include "tap.h"

/* Paths interned beyond this are dropped (their allocations carry no path). */
#define VT_MPATH_MAX (1u << 20)
/* vramtap.h's VRAMTAP_MODULE_RECOMPUTED: the bit of an id that marks a recomputation. */
#define VT_MPATH_RECOMPUTED 0x80000000u

/* The cell the hooks write (vramtap.h): 0 outside every module, else an id from
 * vramtap_module_path(), with VT_MPATH_RECOMPUTED set for a forward run again inside backward
 * (activation checkpointing). */
extern VT_EXPORT _Atomic uint32_t vramtap_module_current;
/* Device allocations recorded so far (wrapping): the hooks read it to tell whether a module's
 * call made device memory, and give its outputs a backward hook only then. Written under the
 * state lock, read by any thread without it. */
extern VT_EXPORT _Atomic uint32_t vramtap_module_allocs;

/* Backward calls running (the hooks count them): a module call then is a recomputation. */
extern VT_EXPORT _Atomic uint32_t vramtap_module_backward;

/* Path id as a module call made now runs it: marked as a recomputation while a backward runs. */
static inline uint32_t vt_mpath_as_now(uint32_t id)
{
    return id && atomic_load_explicit(&vramtap_module_backward, memory_order_relaxed)
               ? id | VT_MPATH_RECOMPUTED
               : id;
}

/* Where the allocating thread's Python frames are read, the hooks name the module of every
 * module call once (vramtap_module_bind, by the module object's address), and the module of an
 * allocation is that of the innermost frame running their module-call wrapper, read before the
 * books' lock: 1 << 32 | its id, or 0 when no such frame runs (the cell holds the module then:
 * the backward's, or none). */
extern VT_HIDDEN VT_TLS uint64_t vt_mpath_looked;
/* Set once the hooks gave their wrapper's code (vramtap_module_watch): a program without them
 * (no Python, or frames followed) pays one load per allocation, not a call. */
typedef struct {
    /* a line of its own: read at every allocation by every thread, beside nothing that the
     * books' holder writes (as it writes vramtap_module_allocs at every allocation) */
    _Alignas(64) _Atomic int on;
} vt_mpath_flag;
extern VT_HIDDEN vt_mpath_flag vt_mpath_watching;
VT_HIDDEN void vt_mpath_look_frames(void);

static inline void vt_mpath_look(void)
{
    if (atomic_load_explicit(&vt_mpath_watching.on, memory_order_relaxed))
        vt_mpath_look_frames();
}

/* The path current for the calling thread's allocation. */
static inline uint32_t vt_mpath_taken(void)
{
    uint64_t looked = vt_mpath_looked;
    if (looked) {
        vt_mpath_looked = 0;
        return (uint32_t)looked;
    }
    return atomic_load_explicit(&vramtap_module_current, memory_order_relaxed);
}

/* The path of an allocation being recorded (state lock held), which it counts. */
static inline uint32_t vt_mpath_birth(void)
{
    atomic_store_explicit(&vramtap_module_allocs,
                          atomic_load_explicit(&vramtap_module_allocs, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    return vt_mpath_taken();
}

/* The same for an allocation buffered to be recorded later (batch.h), without the lock: counted
 * as it happens, since the hooks read the count as a module call returns; only in a Python
 * program, as nothing else reads it, and threads that allocate at once on different processors
 * would pass its line between them at every allocation. */
static inline uint32_t vt_mpath_birth_unlocked(void)
{
    if (vt_cfg.is_python)
        atomic_fetch_add_explicit(&vramtap_module_allocs, 1, memory_order_relaxed);
    return vt_mpath_taken();
}

/* Paths interned so far: a file lists these, and its records name no later one. */
VT_HIDDEN uint32_t vt_mpath_count(void);
/* The top-level `"module_paths"` member followed by ",\n": the first n paths, by index
 * (id - 1). */
VT_HIDDEN void vt_mpath_write_json(FILE *f, uint32_t n);

/* A record's path for a file listing n paths: its index + 1, 0 for none (an id the program
 * wrote into the cell that was never handed out names none either). */
static inline uint32_t vt_mpath_ref(uint32_t id, uint32_t n)
{
    uint32_t index = id & ~VT_MPATH_RECOMPUTED;
    return index <= n ? index : 0;
}

#endif
