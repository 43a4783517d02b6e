/* Python frames read at allocation time from the allocating thread's own interpreter frames,
 * as out-of-process samplers read them, with no callback per Python call (pystack.c's shadow
 * stack is the fallback). */
#ifndef VT_PYFRAMES_H
#define VT_PYFRAMES_H

#include <stdint.h>

#include "pyapi.h"
#include "tap.h"

/* With the GIL held: finds the layout of CPython `version` (0x030b for 3.11) and checks it
 * against sys._getframe(). NULL when frames can be read from now on, else why not. */
VT_HIDDEN const char *vt_pyframes_start(const py_api *api, int version);
/* The calling thread's Python frames, innermost first, each (code id << 32 | line); when there
 * are more than `max`, the outermost `max`. Needs no GIL. */
VT_HIDDEN int vt_pyframes_capture(uint64_t *out, int max);

/* With the GIL held: the code objects of the PyTorch hooks' module-call wrapper (its first local
 * is the module called) and of their backward wrapper. 1 when frames are read, else 0 (the
 * hooks then keep the current module themselves). */
VT_HIDDEN int vt_pyframes_watch(const void *module_call, const void *backward_call);
/* The first local of each frame of the calling thread running the module-call wrapper: its
 * module, innermost first, at most `max`, up to the first frame running the backward wrapper
 * (a backward called inside a module's forward is no part of that forward). Needs no GIL. */
VT_HIDDEN int vt_pyframes_modules(const void **selves, int max);

#endif
