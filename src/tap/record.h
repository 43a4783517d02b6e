/* The run record: what ran (framework, model, optimizer, batch, precision...), as the program
 * or its framework hooks say through vramtap_record_text / vramtap_record_int. The device
 * name, capacity and peaks are in the snapshot already; the reporter joins them. */
#ifndef VT_RECORD_H
#define VT_RECORD_H

#include <stdio.h>

#include "tap.h"

/* A copy for the writer (state lock held; NULL when out of memory), the top-level
 * `"run_record"` member written from it followed by ",\n" (an empty object from NULL). */
typedef struct vt_record_frozen vt_record_frozen;
VT_HIDDEN vt_record_frozen *vt_record_freeze_locked(void);
VT_HIDDEN void vt_record_write(FILE *f, const vt_record_frozen *z);

#endif
