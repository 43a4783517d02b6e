/* Pinned host ranges: pinned allocations and registered memory, which copies are looked up in.
 * Changes are rare (a pinned allocator caches its blocks) and take the state lock; a lookup
 * takes no lock (a sequence count tells it to look again when a change raced with it). */
#ifndef VT_PINNED_H
#define VT_PINNED_H

#include <stdint.h>

#include "tap.h"

/* Removal before the real free or unregister, so that an address handed out again is not taken
 * for pinned. */
VT_HIDDEN void vt_pinned_add(uintptr_t addr, uint64_t size);
VT_HIDDEN void vt_pinned_remove(uintptr_t addr);
/* 1 when addr lies inside a pinned range. */
VT_HIDDEN int vt_pinned_has(uintptr_t addr);

/* The ranges as they are, sorted, each with the event sequence number of the books when it was
 * pinned, for the writer (state lock held; NULL with n 0 when there are none or no memory). */
typedef struct {
    uintptr_t start, end;
    uint64_t seq;
} vt_pinned_range;
VT_HIDDEN vt_pinned_range *vt_pinned_freeze_locked(size_t *n);

#endif
