#include <stdlib.h>
#include <string.h>

#include "freeze.h"
#include "locks.h"
#include "peak.h"

frozen_rec vt_frozen_rec(const vt_rec *r)
{
    return (frozen_rec){.id = r->id,
                        .size = r->size,
                        .address = r->address,
                        .birth = r->birth,
                        .death = r->death,
                        .site = r->site,
                        .mpath = r->mpath,
                        .device = r->device,
                        .api = r->api,
                        .kind = r->kind,
                        .dead = r->dead};
}

static int freeze_rec(frozen *fz, const vt_rec *r)
{
    if (fz->nrecs == fz->caprecs)
        return 0;
    if (!vt_identity_freeze_rec_locked(fz->identity, r)) {
        vt_identity_thaw(fz->identity); /* out of memory: a file without labels */
        fz->identity = NULL;
    }
    fz->recs[fz->nrecs++] = vt_frozen_rec(r);
    return 1;
}

/* Exit: the live set at each device's peak. Post-mortem: what is live on the failing device.
 * Called with the state lock held; returns 0 when the records did not fit in fz->caprecs. */
static int freeze_records(frozen *fz, const vt_oom *oom)
{
    fz->nrecs = 0;
    vt_rec *tables[] = {vt_state.live, vt_state.vmm};
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++) {
        for (vt_rec *r = tables[t]; r; r = r->hh.next) {
            if (vt_table_anchor(r) || !(oom ? r->device == oom->device : vt_peak_holds(r)))
                continue;
            if (!freeze_rec(fz, r))
                return 0;
        }
    }
    for (int d = 0; !oom && d < VT_MAX_DEVICES; d++) {
        for (vt_rec *r = vt_state.dev[d].dead_head; r; r = r->next) {
            if (!freeze_rec(fz, r))
                return 0;
        }
    }
    return 1;
}

/* At most the number of records a file can list: every record on the books. */
static size_t records_bound(void)
{
    size_t n = HASH_COUNT(vt_state.live) + HASH_COUNT(vt_state.vmm);
    for (int d = 0; d < VT_MAX_DEVICES; d++)
        n += vt_state.dev[d].ndead;
    return n;
}

/* Allocated and touched before the lock is taken, so that the copy under it is a copy and
 * not a page fault per record. */
static int reserve(frozen *fz, size_t nrecs, size_t nspans, size_t nhistory)
{
    free(fz->recs);
    free(fz->spans);
    vt_history_copy_free(fz->history);
    fz->history = vt_history_copy_new(nhistory);
    fz->caprecs = nrecs + nrecs / 8 + 64;
    fz->recs = malloc(fz->caprecs * sizeof *fz->recs);
    fz->spans = malloc((nspans + 8) * sizeof *fz->spans);
    fz->dev = fz->dev ? fz->dev : malloc(VT_MAX_DEVICES * sizeof *fz->dev);
    fz->ordinal = fz->ordinal ? fz->ordinal : malloc(VT_MAX_DEVICES * sizeof *fz->ordinal);
    if (!fz->recs || !fz->spans || !fz->dev || !fz->ordinal)
        return -1;
    memset(fz->recs, 0, fz->caprecs * sizeof *fz->recs);
    return 0;
}

void vt_thaw(frozen *fz)
{
    vt_history_copy_free(fz->history);
    vt_identity_thaw(fz->identity);
    free(fz->record);
    free(fz->copies);
    free(fz->recs);
    free(fz->spans);
    free(fz->dev);
    free(fz->ordinal);
}

/* The copy itself, with the state lock held; 0 when something outgrew what reserve() made
 * room for (the caller makes more and tries again). */
/* Everything but the records, with the state lock held; 0 when the timeline outgrew the room
 * reserve() made. */
static int freeze_books_locked(frozen *fz, size_t capspans)
{
    if (vt_state.nspans > capspans || (fz->history && !vt_history_freeze_locked(fz->history)))
        return 0;
    /* labels of the records copied from here on, and the loose ranges as of now */
    vt_identity_thaw(fz->identity);
    fz->identity = vt_identity_freeze_locked();
    free(fz->record);
    fz->record = vt_record_freeze_locked();
    free(fz->copies);
    fz->copies = vt_copies_freeze_locked();
    fz->end_time = vt_clock();
    fz->markers = vt_state.markers;
    fz->step = vt_state.step;
    fz->c = vt_state.c;
    fz->left_out = vt_state.left_out;
    fz->host_peak = vt_state.hostmem.peak;
    fz->host_peak_time = vt_state.hostmem.peak_time;
    fz->host_live = vt_state.hostmem.live;
    fz->host_allocs = vt_state.hostmem.allocs;
    fz->ram = vt_state.ram;
    fz->workers = vt_state.workers;
    fz->ndev = 0;
    for (int d = 0; d < VT_MAX_DEVICES; d++) {
        if (!vt_state.dev[d].used)
            continue;
        fz->ordinal[fz->ndev] = d;
        fz->dev[fz->ndev++] = vt_state.dev[d];
    }
    fz->nspans = vt_state.nspans;
    if (fz->nspans)
        memcpy(fz->spans, vt_state.spans, fz->nspans * sizeof *fz->spans);
    fz->folded_instances = vt_state.folded.instances;
    fz->folded_first_step = vt_state.folded.first_step;
    fz->folded_last_step = vt_state.folded.last_step;
    memcpy(fz->folded_live_max, vt_state.folded.live_max, sizeof fz->folded_live_max);
    fz->nooms = vt_state.nooms;
    memcpy(fz->ooms, vt_state.ooms, (size_t)fz->nooms * sizeof *fz->ooms);
    return 1;
}

/* In one hold of the lock: simple, and what a post-mortem needs (the records of those freed
 * meanwhile are recycled), but a million allocations hold it for a good fraction of a second. */
static int freeze_at_once(frozen *fz, const vt_oom *oom, size_t capspans)
{
    vt_lock();
    int done = freeze_books_locked(fz, capspans) && freeze_records(fz, oom);
    vt_unlock();
    return done;
}

/* The peak set copied a few thousand records per hold of the lock, as it was at one moment
 * (the first hold): allocations born later are skipped, those that died later are shown
 * alive. While the peak does not move, the records of the peak set stay where they are: live
 * ones in their table's buckets (visited in order; a table that grows meanwhile starts the copy
 * again), dead ones on their device's list, which only grows at its tail. A record copied from
 * a bucket is marked, so that finding it again on a dead list does not copy it twice. */
#define STEP_RECORDS 4096

typedef struct {
    uint64_t seq;
    uint64_t peak_seq[VT_MAX_DEVICES];
    uint32_t gen;
    int table; /* 0 live, 1 vmm, 2 the dead lists */
    unsigned bucket, nbuckets;
    const void *buckets; /* the table's bucket array: another one means it grew */
    int device;
    vt_rec *next_dead; /* the next record of device's dead list to visit */
    int started_dead;
} moment;

static vt_rec **step_table(int t)
{
    return t == 0 ? &vt_state.live : &vt_state.vmm;
}

/* With the lock held: 1 while the copy still shows one moment. */
static int still_valid(const moment *m)
{
    for (int d = 0; d < VT_MAX_DEVICES; d++)
        if (vt_state.dev[d].peak_seq != m->peak_seq[d])
            return 0;
    if (m->table < 2) {
        vt_rec *t = *step_table(m->table);
        if (!t || (const void *)t->hh.tbl->buckets != m->buckets ||
            t->hh.tbl->num_buckets != m->nbuckets)
            return 0;
    }
    return 1;
}

static void enter_table(moment *m)
{
    m->bucket = 0;
    if (m->table < 2) {
        vt_rec *t = *step_table(m->table);
        m->buckets = t ? (const void *)t->hh.tbl->buckets : NULL;
        m->nbuckets = t ? t->hh.tbl->num_buckets : 0;
    }
}

static int copy_as_of(frozen *fz, const moment *m, vt_rec *r)
{
    if (!freeze_rec(fz, r))
        return 0;
    if (r->dead && r->death.seq > m->seq) {
        frozen_rec *f = &fz->recs[fz->nrecs - 1];
        f->dead = 0;
        memset(&f->death, 0, sizeof f->death);
    }
    return 1;
}

/* One step, lock held: 1 more to do, 0 done, -1 start again, -2 out of room. */
static int step_locked(frozen *fz, moment *m)
{
    if (!still_valid(m))
        return -1;
    int budget = STEP_RECORDS;
    while (m->table < 2) {
        vt_rec *t = *step_table(m->table);
        UT_hash_table *tbl = t ? t->hh.tbl : NULL;
        for (; tbl && m->bucket < m->nbuckets && budget > 0; m->bucket++) {
            for (UT_hash_handle *h = tbl->buckets[m->bucket].hh_head; h; h = h->hh_next) {
                vt_rec *r = (vt_rec *)((char *)h - tbl->hho);
                budget--;
                if (vt_table_anchor(r) || r->birth.seq > m->seq ||
                    r->birth.seq > m->peak_seq[r->device])
                    continue;
                if (!copy_as_of(fz, m, r))
                    return -2;
                r->copied = m->gen;
            }
        }
        if (budget <= 0)
            return 1;
        m->table++;
        enter_table(m);
    }
    for (; m->device < VT_MAX_DEVICES; m->device++, m->started_dead = 0) {
        if (!m->started_dead) {
            m->next_dead = vt_state.dev[m->device].dead_head;
            m->started_dead = 1;
        }
        for (; m->next_dead; m->next_dead = m->next_dead->next) {
            if (budget-- <= 0)
                return 1;
            vt_rec *r = m->next_dead;
            if (r->copied != m->gen && r->birth.seq <= m->seq && !copy_as_of(fz, m, r))
                return -2;
        }
    }
    return 0;
}

/* 1 done; 0 not done this way (another copy in steps is under way, or the peak kept moving);
 * -1 out of room. */
static int freeze_in_steps(frozen *fz, size_t capspans)
{
    vt_lock();
    int busy = vt_state.freezing;
    vt_state.freezing = 1;
    vt_unlock();
    if (busy)
        return 0;
    int rc = 0;
    for (int attempt = 0; attempt < 3 && rc == 0; attempt++) {
        moment m = {0};
        fz->nrecs = 0;
        vt_lock();
        if (!freeze_books_locked(fz, capspans)) {
            vt_unlock();
            rc = -1;
            break;
        }
        m.seq = vt_state.seq;
        m.gen = ++vt_state.freeze_gen;
        for (int d = 0; d < VT_MAX_DEVICES; d++)
            m.peak_seq[d] = vt_state.dev[d].peak_seq;
        enter_table(&m);
        int more;
        while ((more = step_locked(fz, &m)) == 1)
            vt_lock_pass(VT_LOCK_STATE);
        vt_unlock();
        rc = more == 0 ? 1 : more == -2 ? -1 : 0;
    }
    vt_lock();
    vt_state.freezing = 0;
    vt_unlock();
    return rc;
}

int vt_freeze(frozen *fz, const vt_oom *oom, int may_skip)
{
    for (int attempt = 0; attempt < 8; attempt++) {
        vt_lock();
        size_t nrecs = records_bound(), nspans = vt_state.nspans;
        size_t nhistory = vt_history_bound_locked();
        vt_unlock();
        if (reserve(fz, nrecs, nspans, nhistory))
            return -1;
        int steps = oom ? 0 : freeze_in_steps(fz, nspans + 8);
        if (steps == 0 && may_skip)
            return 1;
        if (steps == 0)
            vt_debug("copying the books at once%s", oom ? " (a post-mortem)" : "");
        if (steps == 1 || (steps == 0 && freeze_at_once(fz, oom, nspans + 8))) {
            vt_identity_frozen_ready(fz->identity);
            return 0;
        }
    }
    return -1;
}
