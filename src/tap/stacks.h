/* Stack signatures: native frames (libunwind) and Python frames (pystack.c), interned so that
 * each distinct stack is stored once and allocations refer to it by id. */
#ifndef VT_STACKS_H
#define VT_STACKS_H

#include <stdint.h>
#include <stdio.h>

#include "tap.h"

/* An allocation without a stack site: capture off, or the stack not interned. */
#define VT_NO_SITE UINT32_MAX

#define VT_MAX_DEPTH 256
#define VT_DEFAULT_DEPTH 32
/* Distinct stacks past this many are not interned: their allocations have no site. */
#define VT_MAX_STACKS (1u << 20)

/* The interned id of the calling thread's stack (vt_stack_capture), or VT_NO_SITE when capture
 * is off: that test inline, since every allocation asks. */
VT_HIDDEN uint32_t vt_stack_capture(void);
static inline uint32_t vt_stack_here(void)
{
    return vt_cfg.stacks ? vt_stack_capture() : VT_NO_SITE;
}
/* Stacks interned; *not_interned (if given): those left out (the bound, or out of memory). */
VT_HIDDEN uint32_t vt_stack_count(uint64_t *not_interned);
/* Write interned stack `id` as the snapshot's site number `index` (names resolved now). */
VT_HIDDEN void vt_stack_write_json(FILE *f, uint32_t id, uint32_t index);

#endif
