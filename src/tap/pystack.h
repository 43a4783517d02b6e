/* Python frames without the GIL: a per-thread shadow stack kept current by the interpreter's
 * own callbacks, read by the allocation hook from thread-local memory. */
#ifndef VT_PYSTACK_H
#define VT_PYSTACK_H

#include <stdint.h>

#include "tap.h"

/* Python frames of the calling thread, innermost first, each (code id << 32 | line), at most
 * `max`. 0 when Python is absent, off, or this thread never ran Python. */
VT_HIDDEN int vt_pystack_capture(uint64_t *out, int max);
/* File and function of an interned code id (valid until exit). */
VT_HIDDEN const char *vt_pystack_file(uint32_t code_id);
VT_HIDDEN const char *vt_pystack_function(uint32_t code_id);

#endif
