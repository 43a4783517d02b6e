/* The allocation history book: every device allocation and free (time, device, bytes,
 * allocation id, with the birth and death marks the categories need) in a few windows: the run
 * from its start until the step counter reaches VRAMTAP_HISTORY_STEPS, and, per device, the
 * whole step in which it reached its peak. Steps after the first window go to a rolling buffer
 * that is kept as a device's peak step when a new peak happens in it and dropped otherwise.
 * VRAMTAP_HISTORY_EVENTS caps the events kept; those past it are counted, not kept.
 *
 * Pure data: updated under the state lock in O(1) per event (the events live in memory mapped
 * once at start-up, so nothing is allocated on the fast path, and its pages are populated
 * ahead of use outside the lock); at a step boundary the rolling
 * buffer is dropped or kept in time proportional to it. The writer freezes a copy under the
 * lock and writes it without. */
#ifndef VT_HISTORY_H
#define VT_HISTORY_H

#include <stdatomic.h>
#include <stdio.h>

#include "table.h"

/* Reads the environment and maps the buffer; history is off when it cannot be had. */
VT_HIDDEN void vt_history_init(void);
/* How far the events' pages are populated and how far they should be, in bytes (history.c).
 * Read outside the lock at every event by every allocating thread: on a cache line of its own,
 * not on one the holder of the lock writes at every event (the other threads' reads would take
 * it from the holder's core and make its next write wait for it). */
typedef struct {
    _Alignas(64) _Atomic size_t want;
    _Atomic size_t ready;
} vt_history_pages;
extern VT_HIDDEN vt_history_pages vt_history_populated;
VT_HIDDEN void vt_history_populate(void);
/* 1 once huge pages are known to be slow to get here (populating the events' pages found them
 * so, or VRAMTAP_HUGE_SLOW_US=0): the books' tables made after that are small pages too. */
extern VT_HIDDEN atomic_int vt_huge_pages_slow;

/* Outside the state lock, before an event may be recorded: populates the pages the next
 * events will use, so that recording them is not a page fault under the lock. Inline: all but
 * a few calls find nothing to do. */
static inline void vt_history_prepare(void)
{
    if (atomic_load_explicit(&vt_history_populated.want, memory_order_relaxed) >
        atomic_load_explicit(&vt_history_populated.ready, memory_order_relaxed))
        vt_history_populate();
}
/* With the state lock held: r, the record at arena index rec - 1, was allocated (new_peak: it
 * set its device's peak); r was freed at `death`. */
VT_HIDDEN void vt_history_alloc_locked(vt_rec *r, uint32_t rec, const vt_birth *birth,
                                       int new_peak);
VT_HIDDEN void vt_history_free_locked(vt_rec *r, const vt_mark *death);
/* With the state lock held, just after the step counter moved on. */
VT_HIDDEN void vt_history_step_locked(void);
VT_HIDDEN void vt_history_reset_after_fork(void);

typedef struct vt_history_copy vt_history_copy;

/* What the file lists in `allocations`, which the history does not repeat: the ids written
 * there, taken from the records themselves rather than re-derived from the history's events,
 * whose deaths past a kept window may be unknown. Ids from lo to hi, as a bit per id from lo
 * (bits) or else sorted (ids). */
typedef struct {
    uint64_t lo, hi;
    const uint64_t *bits;
    const uint64_t *ids;
    size_t nids;
    uint32_t used_devices; /* the devices the file lists, as bits */
} vt_history_listed;

/* Copies the book: vt_history_bound_locked says how big a copy is (under the lock: its units,
 * and in *stubs the allocations alive whose records it reads), vt_history_copy_new allocates it
 * (outside), and the copy is made in steps under the lock again, given up between them, still
 * showing the moment of its first hold: vt_history_freeze_begin_locked (0: the book outgrew the
 * copy), then vt_history_freeze_step_locked until it returns 0 (1: more to copy; -1: the events
 * moved, at a step mark, or memory ran out: begin again), and vt_history_freeze_end_locked, which
 * must follow every begin that returned 1 before the copy is begun again or freed. At once: begin,
 * one step of SIZE_MAX units and end in one hold. */
VT_HIDDEN size_t vt_history_bound_locked(size_t *stubs);
VT_HIDDEN vt_history_copy *vt_history_copy_new(size_t bound, size_t stubs);
/* listed(r, ctx): whether the file lists the allocation of record r, alive at the first hold (the
 * copy of the books will): the rest of its birth is then not copied for its event. */
typedef int (*vt_history_lists)(const vt_rec *r, const void *ctx);
VT_HIDDEN int vt_history_freeze_begin_locked(vt_history_copy *c, vt_history_lists listed,
                                             const void *ctx);
VT_HIDDEN int vt_history_freeze_step_locked(vt_history_copy *c, size_t units);
VT_HIDDEN void vt_history_freeze_end_locked(vt_history_copy *c);
VT_HIDDEN void vt_history_copy_free(vt_history_copy *c);

/* What the writer does with the history's allocations (those `allocations` does not list) and
 * its events (ticks, allocation id, bytes: negative for a free). */
typedef struct {
    void (*alloc)(void *ctx, const frozen_rec *r);
    void (*event)(void *ctx, uint64_t ticks, uint64_t id, int64_t bytes);
    double (*seconds)(void *ctx, uint64_t ticks);
    void *ctx;
} vt_history_out;

/* Hands the allocations, then the events in order, to out, and writes the `history` member
 * followed by ",\n"; nothing when history is off. Returns whether it wrote. */
VT_HIDDEN int vt_history_write(FILE *f, const vt_history_copy *c, const vt_history_listed *l,
                               const vt_history_out *out);

#endif
