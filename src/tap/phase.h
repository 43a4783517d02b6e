/* Training phases: a process-wide state that the C API, NVTX ranges and the PyTorch hooks all
 * drive. */
#ifndef VT_PHASE_H
#define VT_PHASE_H

#include "tap.h"

/* Read VRAMTAP_PHASES (aliases such as "fwd=forward,bwd=backward,step=optimizer"). */
VT_HIDDEN void vt_phase_init(void);
/* The phase a range or API name stands for (VT_PHASE_FORWARD...), or -1. */
VT_HIDDEN int vt_phase_lookup(const char *name);
VT_HIDDEN int vt_phase_begin(int phase);
VT_HIDDEN int vt_phase_end(int phase);

#endif
