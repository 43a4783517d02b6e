/* The frozen copy a snapshot file is written from: under the state lock, what the file needs
 * and nothing more; afterwards the writer formats it with no lock held (locks.h). */
#ifndef VT_FREEZE_H
#define VT_FREEZE_H

#include "copies.h"
#include "history.h"
#include "pinned.h"
#include "identity.h"
#include "record.h"
#include "table.h"

/* What a file needs, copied under the state lock. */
typedef struct {
    uint64_t end_time;
    int markers;
    uint32_t step;
    vt_counters c;
    vt_left_out left_out;
    uint64_t host_peak, host_peak_time, host_live, host_allocs;
    vt_ram ram;
    vt_workers workers;
    vt_device *dev; /* the devices used, in ordinal order */
    int *ordinal;
    int ndev;
    vt_span *spans;
    size_t nspans;
    uint64_t folded_instances, folded_live_max[VT_MAX_DEVICES];
    uint32_t folded_first_step, folded_last_step;
    vt_oom ooms[VT_MAX_OOMS];
    int nooms;
    vt_copied out;            /* the allocations listed, and their labels */
    vt_history_copy *history; /* NULL: no room for it, the file goes without */
    vt_record_frozen *record;
    vt_copies_frozen *copies; /* NULL: no room for it */
    vt_pinned_range *pinned;  /* the pinned ranges, sorted */
    size_t npinned;
} frozen;

/* Copies the books: for an exit or interim file (oom NULL) the allocations live at each
 * device's peak, for a post-mortem those live on the failing device. 0, -1 when memory ran out,
 * or 1 when may_skip is set and the peak kept moving while the peak set was copied in steps:
 * the copy would then take the lock for the whole peak set at once, and an interim file is not
 * worth stalling the job's other threads for (the next step mark tries again). */
VT_HIDDEN int vt_freeze(frozen *fz, const vt_oom *oom, int may_skip);
VT_HIDDEN void vt_thaw(frozen *fz);

#endif
