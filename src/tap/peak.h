/* Each device's peak: the first moment its live bytes reached their maximum, and the records
 * of the allocations that were live then. O(1) amortised per event: a device remembers the
 * event number of its peak and keeps the records of peak allocations that die afterwards,
 * dropping them when a new peak is set (vt_device.dead); the peak set is then every live record
 * born at or before the peak plus those. Called with the state lock held. */
#ifndef VT_PEAK_H
#define VT_PEAK_H

#include "table.h"

/* d's live bytes rose above its peak at `birth`: the peak moves there. */
VT_HIDDEN void vt_peak_rise(vt_device *d, const vt_mark *birth);
/* An allocation born at `birth` joined d's live set (d->live already counts it): 1 when it set a
 * new peak. Inline, as the test is all most allocations pay for. */
static inline int vt_peak_note_alloc(vt_device *d, const vt_mark *birth)
{
    if (d->live <= d->peak)
        return 0;
    vt_peak_rise(d, birth);
    return 1;
}
/* How many times any device's peak rose: written with the state lock held, read without it
 * (by the look before a step boundary that may write an interim file). */
extern VT_HIDDEN _Atomic uint64_t vt_peak_rises;
/* `r`, live at d's peak, left d's live set at `death`: 1 when the peak kept a copy of it
 * (vt_dead; `copied` as there), 0 when memory ran out (counted as dropped). */
VT_HIDDEN int vt_peak_keep_dead(vt_device *d, const vt_rec *r, const vt_mark *death,
                                uint32_t copied);
/* `r` left d's live set at `death`: 1 when the peak keeps a copy of it, so that its labels must
 * stay. Inline: a record born after the peak, most of them, costs the test alone. */
static inline int vt_peak_note_free(vt_device *d, const vt_rec *r, const vt_mark *death,
                                    uint32_t copied)
{
    return vt_rec_seq(r) <= d->peak_seq && vt_peak_keep_dead(d, r, death, copied);
}
/* Whether `r`, on the books now or kept by the peak, was live at its device's peak. */
VT_HIDDEN int vt_peak_holds(const vt_rec *r);

#endif
