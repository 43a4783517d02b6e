/* Per-thread buffers of device allocations and frees (VRAMTAP_THREAD_BUFFERS, docs/api.md).
 *
 * Threads that allocate at the same time on different processors pass the books' cache lines
 * between them at every allocation and free, some ten lines each time: on two processors that
 * made vramtap's added cost three times one thread's in wall time, six in CPU time. With buffers,
 * each thread writes the facts of its allocations and frees (address, size, clock reading, site,
 * module path) to a buffer of its own, and whoever takes the books' lock applies every buffer to
 * the books first, merged by clock reading: the books' lines stay with one processor for a whole
 * batch. The books end where they would without the buffers; what changes is when they learn of
 * an event: a new peak is found, and the driver's figures sampled for it, when its batch is
 * applied (at most VT_BATCH_EVENTS events of its thread later).
 *
 * Order: the applier reads the clock (fenced) and applies, merged by reading, every buffered
 * event read before it. An event's causes on other threads (the allocation a free names) were
 * buffered before the program could pass the address on, so before the event's own reading,
 * and are applied first. An event whose clock was read but which was not buffered yet is applied
 * with the next batch: it can only be concurrent with those applied before it (as it is now
 * between a clock reading and the lock), and its time is raised to theirs (vt_time_locked).
 * This needs one clock for every processor: the TSC where the kernel uses it (x86-64). */
#ifndef VT_BATCH_H
#define VT_BATCH_H

#include <stdatomic.h>
#include <stdint.h>

#include "tap.h"

/* Events a thread's buffer holds: a full buffer is applied by its thread. */
#define VT_BATCH_EVENTS 256

/* An allocation or free, as the books need it applied. */
typedef struct {
    uintptr_t addr;
    uint64_t size;
    uint64_t now;         /* clock reading */
    uint32_t hash;        /* of addr (the books' index) */
    uint32_t site, mpath; /* an allocation's stack and module path */
    uint32_t nested;      /* the thread's nested CUDA calls before it (vt_nested_pending) */
    int16_t device;
    uint8_t api, kind;
    uint8_t free; /* a free: addr only; an allocation is on a device the books record */
} vt_event;

/* VRAMTAP_THREAD_BUFFERS: 0 never, 1 always, 2 (the default) while threads pass the books' lock
 * between them all the time (vt_lock_passed, locks.h). */
enum { VT_BUFFERS_OFF, VT_BUFFERS_ALWAYS, VT_BUFFERS_AUTO };

/* Buffers handed out so far (0: none, and the books' lock has nothing to apply), on a line of
 * its own: read at every take of the lock. */
typedef struct {
    _Alignas(64) atomic_int n;
} vt_batch_count;
extern VT_HIDDEN vt_batch_count vt_batch_rings;

/* Outside every lock: reads the clock into e->now and buffers e for the calling thread.
 * 0: buffered; 1: buffered, and the buffer is full (the caller applies it: vt_lock, vt_unlock);
 * -1: the thread has no buffer (memory, or more threads than buffers), e->now is not read: the
 * caller records the event at once. */
VT_HIDDEN int vt_batch_add(vt_event *e);
/* With the books' lock held: applies every buffered event read from the clock before now, in
 * order (vt_event_apply_locked). */
VT_HIDDEN void vt_batch_apply_locked(void);
/* At exit, with VRAMTAP_DEBUG and VRAMTAP_THREAD_BUFFERS: how many events were buffered,
 * applied in how many batches, from how many buffers. */
VT_HIDDEN void vt_batch_debug(void);
/* The child of a fork: its buffers start empty; the calling thread keeps its own. */
VT_HIDDEN void vt_batch_reset_after_fork(void);

/* table.c: which flag says to buffer (after the configuration is read); applies one event
 * (lock held). */
VT_HIDDEN void vt_buffers_init(void);
VT_HIDDEN void vt_event_apply_locked(const vt_event *e);

#endif
