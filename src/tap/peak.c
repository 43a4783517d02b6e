#include "peak.h"

/* The records kept for the old peak are not part of the new one. */
static void release_dead(vt_device *d)
{
    while (d->dead_head) {
        vt_rec *r = d->dead_head;
        d->dead_head = r->next;
        vt_rec_free(r);
    }
    d->dead_tail = NULL;
    d->ndead = 0;
}

int vt_peak_note_alloc(vt_device *d, vt_rec *r)
{
    if (d->live <= d->peak)
        return 0;
    d->peak = d->live;
    d->peak_seq = r->birth.seq;
    d->peak_time = r->birth.time;
    d->peak_phase = r->birth.phase;
    d->peak_step = r->birth.step;
    d->used_at_peak = d->last_used;
    d->rss_at_peak = d->last_rss;
    d->workers_at_peak = d->last_workers;
    release_dead(d);
    return 1;
}

int vt_peak_note_free(vt_device *d, vt_rec *r)
{
    if (r->birth.seq > d->peak_seq)
        return 0;
    r->next = NULL;
    if (d->dead_tail)
        d->dead_tail->next = r;
    else
        d->dead_head = r;
    d->dead_tail = r;
    d->ndead++;
    return 1;
}

int vt_peak_holds(const vt_rec *r)
{
    return r->birth.seq <= vt_state.dev[r->device].peak_seq;
}
