/* Identity evidence: address ranges the program says hold parameters, gradients, optimizer
 * state, activations or temporaries (the PyTorch hooks, or anyone through include/vramtap.h).
 *
 * A range that starts at an allocation vramtap saw is attached to that allocation's record and
 * lives exactly as long as the record (vt_identity_forget_locked from vt_rec_free). Any other
 * range (inside a flat buffer, a native-mode segment, a VMM mapping, or memory vramtap never
 * saw) is kept by its start address, last label wins, and matched when a file is written
 * against the allocations live at the time it was labelled. Memory is bounded: labels per
 * allocation and loose ranges have caps, and what does not fit is counted. The writer works
 * on a copy made under the state lock (vt_identity_freeze_locked). */
#ifndef VT_IDENTITY_H
#define VT_IDENTITY_H

#include <stdint.h>
#include <stdio.h>

#include "table.h"

/* The categories a label can give, in snapshot spelling. */
typedef enum {
    VT_ID_PARAMETERS,
    VT_ID_GRADIENTS,
    VT_ID_OPTIMIZER_STATE,
    VT_ID_ACTIVATIONS,
    VT_ID_TEMPORARY,
    VT_ID_COUNT
} vt_id_category;

/* The record of `r` is being recycled: its labels go with it. Lock held. */
VT_HIDDEN void vt_identity_forget_locked(const vt_rec *r);
/* The child of a fork starts without labels (lock held; leaks). */
VT_HIDDEN void vt_identity_reset_after_fork(void);

/* For the writer, which copies under the state lock and writes unlocked. */
typedef struct vt_identity_frozen vt_identity_frozen;

/* A copy of the loose ranges and the counters; NULL when out of memory (the file then has no
 * labels). State lock held. */
VT_HIDDEN vt_identity_frozen *vt_identity_freeze_locked(void);
/* Adds the labels attached to `r`, a record the file lists (state lock held); 0 when out of
 * memory. */
VT_HIDDEN int vt_identity_freeze_rec_locked(vt_identity_frozen *z, const vt_rec *r);
/* Unlocked, once the copy is complete: sorts it for the look-ups below. */
VT_HIDDEN void vt_identity_frozen_ready(vt_identity_frozen *z);
/* Hands each label of an allocation to fn: attached ones by the allocation id, loose ones that
 * start inside [address, address + size) and were labelled while it lived (birth_seq, and
 * death_seq when dead). cat is a vt_id_category. */
typedef void (*vt_label_fn)(void *ctx, uint64_t off, uint64_t len, int cat);
VT_HIDDEN void vt_identity_labels(vt_identity_frozen *z, uint64_t id, uintptr_t address,
                                  uint64_t size, uint64_t birth_seq, int dead, uint64_t death_seq,
                                  vt_label_fn fn, void *ctx);
/* The i-th loose range of the copy (after vt_identity_frozen_ready: by start address), 0 past
 * the last: where it starts, its length and category, and when it was last labelled. */
VT_HIDDEN int vt_identity_loose_at(const vt_identity_frozen *z, size_t i, uintptr_t *addr,
                                   uint64_t *len, uint8_t *cat, uint64_t *seq_last);
/* The snapshot's name of a category ("optimizer_state"). */
VT_HIDDEN const char *vt_identity_category_name(int cat);
/* The top-level `"identity"` member and ",\n", after the allocations. */
VT_HIDDEN void vt_identity_write_summary(FILE *f, const vt_identity_frozen *z);
VT_HIDDEN void vt_identity_thaw(vt_identity_frozen *z);

#endif
