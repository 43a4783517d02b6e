#include "identity.h"
#include "peak.h"

VT_HIDDEN _Atomic uint64_t vt_peak_rises;

/* The records kept for the old peak are not part of the new one. Their room stays, for the
 * next; only labelled ones are visited (each record enters the list once: O(1) amortised). */
static void release_dead(vt_device *d)
{
    for (uint32_t i = 0; d->dead.labelled && i < d->dead.n; i++) {
        vt_dead *e = vt_chunk_at(&d->dead.c, sizeof *e, i);
        if (vt_rec_labelled(&e->r)) {
            vt_identity_forget_locked(&e->r);
            d->dead.labelled--;
        }
    }
    d->dead.n = 0;
    d->dead.labelled = 0;
}

void vt_peak_rise(vt_device *d, const vt_mark *birth)
{
    d->peak = d->live;
    atomic_store_explicit(&vt_peak_rises,
                          atomic_load_explicit(&vt_peak_rises, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    d->peak_seq = birth->seq;
    d->peak_time = birth->time;
    d->peak_phase = birth->phase;
    d->peak_step = birth->step;
    d->used_at_peak = d->last_used;
    d->rss_at_peak = d->last_rss;
    d->workers_at_peak = d->last_workers;
    release_dead(d);
}

int vt_peak_keep_dead(vt_device *d, const vt_rec *r, const vt_mark *death, uint32_t copied)
{
    if (vt_chunks_reserve(&d->dead.c, sizeof(vt_dead), d->dead.n + 1)) {
        vt_state.c.dropped++;
        return 0;
    }
    vt_dead *e = vt_chunk_at(&d->dead.c, sizeof *e, d->dead.n++);
    *e = (vt_dead){.r = *r, .death = *death, .address = vt_rec_address(r), .copied = copied};
    d->dead.labelled += vt_rec_labelled(r);
    return 1;
}

int vt_peak_holds(const vt_rec *r)
{
    return vt_rec_seq(r) <= vt_state.dev[vt_rec_device(r)].peak_seq;
}
