/* Copies between host and device: bytes by direction and by what the host side is (pinned:
 * inside a pinned allocation or a registered range; pageable: anything else), per phase and per
 * step, and the device-to-host copies the calling thread waited for. A copy takes no lock (see
 * copies.c); a stack only with VRAMTAP_COPY_STACKS=1. Pinned ranges are pinned.h's. */
#ifndef VT_COPIES_H
#define VT_COPIES_H

#include <stdint.h>
#include <stdio.h>

#include "tap.h"

/* What the API says one end of a copy is; VT_END_UNIFIED: a unified-addressing pointer
 * (cudaMemcpyDefault, cuMemcpy), decided from the books and then the driver. */
typedef enum { VT_END_HOST, VT_END_DEVICE, VT_END_UNIFIED } vt_copy_end;

typedef struct {
    vt_copy_end end;
    uintptr_t addr;
} vt_copy_side;

/* How the caller waits for a copy: VT_COPY_SYNC for the forms that return once it is done, else
 * the stream an asynchronous copy was queued on, as vt_copy_stream names it (never 0). */
#define VT_COPY_SYNC ((uintptr_t)0)

/* A stream as the waits compare it: the handle, and for a null one the stream it means in that
 * form of call: the legacy default stream, or (in a _ptsz or _ptds form) the thread's per-thread
 * default stream, named as anywhere else (VT_STREAM_LEGACY, VT_STREAM_PER_THREAD). */
static inline uintptr_t vt_copy_stream(const void *stream, int per_thread)
{
    return stream ? (uintptr_t)stream : per_thread ? VT_STREAM_PER_THREAD : VT_STREAM_LEGACY;
}

/* A copy of `bytes` the program asked for and the driver accepted, made as `how` says. A
 * device-to-host copy is waited for when its form is synchronous or its host side pageable (the
 * driver finishes those before returning, whatever the form); asynchronous ones into pinned
 * memory, by the wait of the thread that queued them for their stream (vt_copy_waited).
 * Outermost calls only (the hooks' recursion guard). */
VT_HIDDEN void vt_copy_note(vt_copy_side dst, vt_copy_side src, uint64_t bytes, uintptr_t how);

/* The calling thread waited for `stream` (vt_copy_stream's name), or with VT_COPY_EVERY_STREAM
 * for its context or an event: when that ends downloads into pinned memory it queued there and
 * had not waited for yet, it counts as one download waited for, now. */
#define VT_COPY_EVERY_STREAM ((uintptr_t)0)
VT_HIDDEN void vt_copy_waited(uintptr_t stream);

/* A copy wrapper (hooks_copy_*.c): the real function (`lookup`, `unavailable` returned without
 * one) called under the recursion guard, then `note` when it was the outermost call and the
 * result is `ok`. */
#define VT_COPY_HOOK(type, ok, unavailable, lookup, name, params, args, note)                      \
    VT_EXPORT type name params                                                                     \
    {                                                                                              \
        __typeof__(&name) real = lookup;                                                           \
        if (!real)                                                                                 \
            return unavailable;                                                                    \
        int outer = vt_guard_enter();                                                              \
        type rc = real args;                                                                       \
        vt_guard_leave();                                                                          \
        if (outer && rc == ok)                                                                     \
            note;                                                                                  \
        return rc;                                                                                 \
    }

/* The books' phase or step changed (state lock held): copies count at the new moment. */
VT_HIDDEN void vt_copies_moment_locked(void);

/* VRAMTAP_COPY_STACKS, read by the constructor. */
VT_HIDDEN void vt_copies_init(void);

/* For the writer: a copy taken under the state lock (NULL when out of memory), and the
 * top-level "copies" member written from it (sorting its sites; null from
 * NULL) followed by ",\n". `site` writes a stack reference
 * the way the rest of the file does. */
typedef struct vt_copies_frozen vt_copies_frozen;
VT_HIDDEN vt_copies_frozen *vt_copies_freeze_locked(void);
VT_HIDDEN void vt_copies_write(FILE *f, vt_copies_frozen *z,
                               void (*site)(FILE *f, void *ctx, uint32_t site), void *ctx);

/* The child of a fork counts its own copies from zero. */
VT_HIDDEN void vt_copies_reset_after_fork(void);

#endif
