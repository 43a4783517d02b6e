/* Device facts and device-wide memory, read from the driver at safe moments. */
#ifndef VT_SAMPLE_H
#define VT_SAMPLE_H

#include "tap.h"

enum { VT_SAMPLE_PHASE, VT_SAMPLE_PEAK, VT_SAMPLE_OOM };

/* Every new peak is sampled, so that "device used at the peak" is exact: in training, new peaks
 * come in the first iteration and then stop. A program whose memory only grows would pay a
 * driver query per allocation; past this many, new peaks are sampled once a millisecond. The
 * books decide (table.c), on the clock reading of the allocation's birth, so that a new peak
 * not sampled costs no more than another allocation. */
#define VT_PEAK_SAMPLES_FREE 10000
#define VT_PEAK_SAMPLE_GAP_S 0.001

/* After a recorded allocation, as the books decided: the device's facts (its first use, or
 * while they are unknown), a sample at a new peak. */
VT_HIDDEN void vt_sample_after_alloc(int device, int ask_info, int peak);
/* At a phase boundary, for the calling thread's device. */
VT_HIDDEN void vt_sample_phase(void);
/* When an allocation on `device` failed for lack of memory. */
VT_HIDDEN void vt_sample_oom(int device);

#endif
