/* Each phase's peak on one device, from the per-phase timeline: the forward pass, backward and
 * the optimizer step answer different questions (does inference fit, does a step fit, does the
 * optimizer's extra fit), and `vramtap fit` models each. */
#include <stdlib.h>

#include "snapshot.h"

int vt_phase_peaks_load(const vt_snapshot *snap, const vt_device *dev, vt_phase_peaks *out,
                        vt_err *err)
{
    for (int p = 0; p <= VT_NPHASES; p++)
        out->bytes[p] = out->step[p] = -1;
    vt_tl_span *spans;
    size_t n;
    if (vt_timeline_load(snap, dev->device, &spans, &n, err))
        return -1;
    for (size_t i = 0; i < n; i++)
        if (spans[i].live_max > out->bytes[spans[i].phase]) {
            out->bytes[spans[i].phase] = spans[i].live_max;
            out->step[spans[i].phase] = spans[i].step;
        }
    free(spans);
    vt_phase p = snap->phase_markers ? dev->peak_phase : VT_NOPHASE;
    if (dev->peak_bytes > out->bytes[p]) {
        out->bytes[p] = dev->peak_bytes;
        out->step[p] = dev->peak_step;
    }
    return 0;
}
