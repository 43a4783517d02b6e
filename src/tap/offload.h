/* Offloaded state: memory the framework labels as parameters, gradients or optimizer state that
 * lives in pinned host memory (ZeRO-Offload, FSDP's CPU offload with pinned buffers), billed on
 * the host side by category. Labelled memory vramtap never saw allocated (plain malloc, a NumPy
 * array) is not billed: nothing tells whether it is still alive. */
#ifndef VT_OFFLOAD_H
#define VT_OFFLOAD_H

#include <stdio.h>

#include "identity.h"
#include "pinned.h"

/* The top-level "host_offloaded" member and ",\n": the labelled bytes inside the pinned ranges
 * by category (null without a copy of the labels). A range counts when it starts inside pinned
 * memory that was pinned when it was last labelled; bytes labelled twice count once. */
VT_HIDDEN void vt_offload_write(FILE *f, const vt_pinned_range *pinned, size_t npinned,
                                const vt_identity_frozen *z);

#endif
