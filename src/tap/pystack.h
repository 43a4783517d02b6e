/* Python frames without the GIL: read from the allocating thread's own interpreter frames
 * (pyframes.c), or, where that layout is not known to be right, from a per-thread shadow stack
 * kept current by the interpreter's own callbacks. */
#ifndef VT_PYSTACK_H
#define VT_PYSTACK_H

#include <stdint.h>

#include "tap.h"

/* Python frames of the calling thread, innermost first, each (code id << 32 | line), at most
 * `max`. 0 when Python is absent, off, or this thread never ran Python. */
VT_HIDDEN int vt_pystack_capture(uint64_t *out, int max);
/* The code id of a (file, function) pair; UINT32_MAX when there is no room. */
VT_HIDDEN uint32_t vt_pystack_intern(const char *file, const char *function);
/* File and function of an interned code id (valid until exit). */
VT_HIDDEN const char *vt_pystack_file(uint32_t code_id);
VT_HIDDEN const char *vt_pystack_function(uint32_t code_id);
/* Code locations past VT_PYSTACK_MAX_LOCS (or out of memory): their frames have no name. */
#define VT_PYSTACK_MAX_LOCS (1u << 24)
VT_HIDDEN uint64_t vt_pystack_dropped(void);

/* What vramtap_python_install answers. */
enum {
    VT_PY_FAILED = -1,    /* not installed; the reason was said once on stderr */
    VT_PY_OFF = 0,        /* VRAMTAP_PYTHON_STACKS=0, VRAMTAP_STACKS=0 or VRAMTAP_DISABLE */
    VT_PY_MONITORING = 1, /* sys.monitoring (3.12+), a tool id of its own */
    VT_PY_PROFILE = 2,    /* a C profile function */
    VT_PY_FRAMES = 3,     /* the thread's own frames, read at allocation time (pyframes.c) */
};

/* Starts keeping Python frames. The Python bootstrap calls it through ctypes.PyDLL, so the GIL
 * is held; calling it again is harmless and re-arms the calling thread if another profiler took
 * its profile function and has since let go. */
VT_EXPORT int vramtap_python_install(void);

#endif
