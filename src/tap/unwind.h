/* The calling thread's native frames (libunwind's fast trace), from the program's call down:
 * this library's own frames, and attached through CUPTI the CUDA libraries', are dropped. */
#ifndef VT_UNWIND_H
#define VT_UNWIND_H

#include <stdint.h>

#include "tap.h"

VT_HIDDEN void vt_unwind_init(void);
/* Attached through CUPTI: stacks start below the driver's, CUPTI's and the runtime's frames, at
 * the program's call, as they do under interposition. Asks the loader: call it with no lock. */
VT_HIDDEN void vt_unwind_skip_cuda(void);
/* At most `depth` return addresses of the calling thread, innermost first, into `frames`; how
 * many. `sp` is the caller's frame address (__builtin_frame_address(0)): the same caller at
 * the same place in the stack with the same callers passes the same. *memo: when the frames
 * are those of a call chain this thread's cache holds, a word kept with it for the caller
 * (what it made of these frames before; 0 when the chain is new to the cache), else NULL. */
VT_HIDDEN int vt_unwind_here(uintptr_t sp, uint64_t *frames, int depth, uint32_t **memo);

#endif
