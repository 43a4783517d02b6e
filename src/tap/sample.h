/* Device facts and device-wide memory, read from the driver at safe moments. */
#ifndef VT_SAMPLE_H
#define VT_SAMPLE_H

#include "tap.h"

enum { VT_SAMPLE_PHASE, VT_SAMPLE_PEAK, VT_SAMPLE_OOM };

/* After a recorded allocation: the device's facts on its first use, a sample on a new peak. */
VT_HIDDEN void vt_sample_after_alloc(int device, int first_use, int new_peak);
/* At a phase boundary, for the calling thread's device. */
VT_HIDDEN void vt_sample_phase(void);
/* When an allocation on `device` failed for lack of memory. */
VT_HIDDEN void vt_sample_oom(int device);

#endif
