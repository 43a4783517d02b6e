#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "freeze.h"
#include "locks.h"
#include "peak.h"

/* A live record (of the arena, dead NULL) or a dead one the peak keeps, as the file shows it:
 * with its death when `died`. */
static int freeze_rec(frozen *fz, const vt_rec *r, const vt_dead *dead, int died)
{
    return vt_copied_add_locked(&fz->out, r, dead ? dead->address : vt_rec_address(r),
                                dead && died ? &dead->death : NULL);
}

/* A record of the arena that is a device or VMM allocation (not a free slot, not pinned host
 * memory). */
static const vt_rec *device_rec(uint32_t i)
{
    const vt_rec *r = vt_arena_at(i);
    return r->key && vt_rec_kind(r) != VT_KIND_HOST ? r : NULL;
}

static const vt_dead *dead_at(int device, uint32_t i)
{
    return vt_chunk_at(&vt_state.dev[device].dead.c, sizeof(vt_dead), i);
}

/* Whether a file lists the live allocation of record r: for an exit or interim file (oom NULL),
 * when it was live at its device's peak; for a post-mortem, when it is on the failing device. */
static int lists(const vt_rec *r, const void *oom)
{
    return oom ? vt_rec_device(r) == ((const vt_oom *)oom)->device : vt_peak_holds(r);
}

/* Exit: the live set at each device's peak. Post-mortem: what is live on the failing device.
 * Called with the state lock held; returns 0 when the records did not fit in fz->out.cap. */
static int freeze_records(frozen *fz, const vt_oom *oom)
{
    fz->out.n = fz->out.ndeaths = 0;
    for (uint32_t i = 0, end = vt_arena_end(); i < end; i++) {
        const vt_rec *r = device_rec(i);
        if (r && lists(r, oom) && !freeze_rec(fz, r, NULL, 0))
            return 0;
    }
    for (int d = 0; !oom && d < VT_MAX_DEVICES; d++) {
        for (uint32_t i = 0; i < vt_state.dev[d].dead.n; i++) {
            const vt_dead *e = dead_at(d, i);
            if (!freeze_rec(fz, &e->r, e, 1))
                return 0;
        }
    }
    return 1;
}

/* At most the number of records a file can list (every record on the books), and of those it
 * shows dead (every one the peak keeps) in *dead. */
static size_t records_bound(size_t *dead)
{
    *dead = 0;
    for (int d = 0; d < VT_MAX_DEVICES; d++)
        *dead += vt_state.dev[d].dead.n;
    return vt_books_records() + *dead;
}

/* Room for n, and for those that come meanwhile, while a copy in steps runs. */
static size_t with_slack(size_t n)
{
    return n + n / 8 + 64;
}

/* Allocated and touched before the lock is taken, so that the copy under it is a copy and
 * not a page fault per record. */
static int reserve(frozen *fz, size_t nrecs, size_t ndead, size_t nspans, size_t nhistory,
                   size_t nstubs)
{
    free(fz->out.recs);
    free(fz->out.deaths);
    free(fz->spans);
    vt_history_copy_free(fz->history);
    fz->history = vt_history_copy_new(nhistory, nstubs);
    fz->out.cap = with_slack(nrecs);
    fz->out.recs = malloc(fz->out.cap * sizeof *fz->out.recs);
    fz->out.capdeaths = with_slack(ndead);
    fz->out.deaths = malloc(fz->out.capdeaths * sizeof *fz->out.deaths);
    fz->spans = malloc((nspans + 8) * sizeof *fz->spans);
    fz->dev = fz->dev ? fz->dev : malloc(VT_MAX_DEVICES * sizeof *fz->dev);
    fz->ordinal = fz->ordinal ? fz->ordinal : malloc(VT_MAX_DEVICES * sizeof *fz->ordinal);
    if (!fz->out.recs || !fz->out.deaths || !fz->spans || !fz->dev || !fz->ordinal)
        return -1;
    memset(fz->out.recs, 0, fz->out.cap * sizeof *fz->out.recs);
    memset(fz->out.deaths, 0, fz->out.capdeaths * sizeof *fz->out.deaths);
    return 0;
}

void vt_thaw(frozen *fz)
{
    vt_history_copy_free(fz->history);
    vt_identity_thaw(fz->out.labels);
    free(fz->record);
    free(fz->copies);
    free(fz->pinned);
    free(fz->out.recs);
    free(fz->out.deaths);
    free(fz->spans);
    free(fz->dev);
    free(fz->ordinal);
}

/* Everything but the records and the history's events, with the state lock held (the history's
 * copy begun: vt_history_freeze_end_locked follows); 0 when the timeline or the history outgrew
 * the room reserve() made (the caller makes more and tries again). */
static int freeze_books_locked(frozen *fz, const vt_oom *oom, size_t capspans)
{
    if (vt_state.nspans > capspans ||
        (fz->history && !vt_history_freeze_begin_locked(fz->history, lists, oom)))
        return 0;
    /* labels of the records copied from here on, and the loose ranges as of now */
    vt_identity_thaw(fz->out.labels);
    fz->out.labels = vt_identity_freeze_locked();
    free(fz->record);
    fz->record = vt_record_freeze_locked();
    free(fz->copies);
    fz->copies = vt_copies_freeze_locked();
    free(fz->pinned);
    fz->pinned = vt_pinned_freeze_locked(&fz->npinned);
    fz->end_time = vt_now_locked();
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

/* The history's events, STEP_UNITS of them at a time: 1 more to do, 0 done, -1 start again. */
#define STEP_UNITS 8192
static int history_step_locked(frozen *fz, size_t units)
{
    return fz->history ? vt_history_freeze_step_locked(fz->history, units) : 0;
}

static void history_end_locked(frozen *fz)
{
    if (fz->history)
        vt_history_freeze_end_locked(fz->history);
}

/* In one hold of the lock: simple, and what a post-mortem needs (the records of those freed
 * meanwhile are recycled), but a million allocations hold it for a good fraction of a second. */
static int freeze_at_once(frozen *fz, const vt_oom *oom, size_t capspans)
{
    vt_lock();
    int done = freeze_books_locked(fz, oom, capspans) && history_step_locked(fz, SIZE_MAX) == 0 &&
               freeze_records(fz, oom);
    history_end_locked(fz);
    vt_unlock();
    return done;
}

/* The peak set copied a few thousand records per hold of the lock, as it was at one moment
 * (the first hold): allocations born later are skipped, those that died later are shown
 * alive. While the peak does not move, the records of the peak set stay where they are: live
 * ones in the arena (visited by index), dead ones on their device's list, which only grows at
 * its tail. A record that dies once the copy has passed it is kept marked as copied
 * (vt_state.freeze_below), so that finding it again on a dead list does not copy it twice. */
#define STEP_RECORDS 4096

typedef struct {
    uint64_t seq;
    uint64_t peak_seq[VT_MAX_DEVICES];
    uint32_t gen;
    uint32_t next; /* the next record of the arena to visit */
    int device;    /* then the dead lists: the device, and the next record of its list */
    uint32_t next_dead;
} moment;

/* With the lock held: 1 while the copy still shows one moment. */
static int still_valid(const moment *m)
{
    for (int d = 0; d < VT_MAX_DEVICES; d++)
        if (vt_state.dev[d].peak_seq != m->peak_seq[d])
            return 0;
    return 1;
}

/* As of the moment m: an allocation that died since is shown alive. */
static int copy_as_of(frozen *fz, const moment *m, const vt_rec *r, const vt_dead *dead)
{
    return freeze_rec(fz, r, dead, dead && dead->death.seq <= m->seq);
}

/* One step, lock held: 1 more to do, 0 done, -1 start again, -2 out of room. A post-mortem's
 * (oom) takes the records live on its device; those that die before it reaches them are added
 * as they die (vt_copy_sink), and a peak that moves meanwhile does not matter to it. */
static int step_locked(frozen *fz, moment *m, const vt_oom *oom)
{
    if (!oom && !still_valid(m))
        return -1;
    int budget = STEP_RECORDS;
    for (uint32_t end = vt_arena_end(); m->next < end; m->next++) {
        if (budget-- <= 0) {
            vt_state.freeze_below = m->next;
            return 1;
        }
        const vt_rec *r = device_rec(m->next);
        /* the peak is where it was at the first hold (still_valid): lists() reads it there */
        if (!r || vt_rec_seq(r) > m->seq || !lists(r, oom))
            continue;
        if (!copy_as_of(fz, m, r, NULL))
            return -2;
    }
    vt_state.freeze_below = UINT32_MAX;
    if (oom)
        return fz->out.full ? -2 : 0;
    for (; m->device < VT_MAX_DEVICES; m->device++, m->next_dead = 0) {
        for (; m->next_dead < vt_state.dev[m->device].dead.n; m->next_dead++) {
            if (budget-- <= 0)
                return 1;
            const vt_dead *e = dead_at(m->device, m->next_dead);
            if (e->copied != m->gen && vt_rec_seq(&e->r) <= m->seq && !copy_as_of(fz, m, &e->r, e))
                return -2;
        }
    }
    return 0;
}

/* This thread's CPU time in ns: how long a hold kept others waiting, less any time the holder
 * was not running (which no step of the copy can shorten). */
static uint64_t thread_cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The holds of the lock a copy in steps takes: how many, the longest, and when this one began. */
typedef struct {
    int n;
    uint64_t longest, from;
} holds;

static void hold_ends(holds *h)
{
    uint64_t d = thread_cpu_ns() - h->from;
    h->longest = d > h->longest ? d : h->longest;
    h->n++;
}

static void pass_counted(holds *h)
{
    hold_ends(h);
    vt_lock_pass(VT_LOCK_STATE);
    h->from = thread_cpu_ns();
}

/* 1 done; 0 not done this way (another copy in steps is under way, or the peak kept moving);
 * -1 out of room. With VRAMTAP_DEBUG, says how long it held the lock at most. */
static int freeze_in_steps(frozen *fz, const vt_oom *oom, size_t capspans)
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
        fz->out.n = fz->out.ndeaths = 0;
        fz->out.full = 0;
        vt_lock();
        holds h = {.from = thread_cpu_ns()};
        if (!freeze_books_locked(fz, oom, capspans)) {
            history_end_locked(fz);
            vt_unlock();
            rc = -1;
            break;
        }
        m.seq = vt_state.seq;
        m.gen = ++vt_state.freeze_gen;
        vt_state.freeze_below = 0;
        for (int d = 0; d < VT_MAX_DEVICES; d++)
            m.peak_seq[d] = vt_state.dev[d].peak_seq;
        vt_copy_sink sink = {&fz->out, m.seq, oom ? oom->device : -1, 0};
        vt_state.sink = oom ? &sink : NULL;
        int more;
        while ((more = history_step_locked(fz, STEP_UNITS)) == 1)
            pass_counted(&h);
        if (more == 0)
            while ((more = step_locked(fz, &m, oom)) == 1)
                pass_counted(&h);
        vt_state.sink = NULL;
        history_end_locked(fz);
        hold_ends(&h);
        vt_unlock();
        rc = more == 0 ? 1 : more == -2 ? -1 : 0;
        char what[96] = "";
        if (oom)
            snprintf(what, sizeof what, " (a post-mortem: %llu allocations added as they died)",
                     (unsigned long long)sink.added);
        vt_debug("a copy of the books in %d holds of the lock, the longest %.3f ms of CPU time%s%s",
                 h.n, (double)h.longest / 1e6, what,
                 rc == 1 ? "" : ": not done (begun again or put off)");
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
        size_t ndead, nrecs = records_bound(&ndead), nspans = vt_state.nspans;
        size_t nstubs, nhistory = vt_history_bound_locked(&nstubs);
        vt_unlock();
        if (reserve(fz, nrecs, ndead, nspans, nhistory, nstubs))
            return -1;
        int steps = freeze_in_steps(fz, oom, nspans + 8);
        if (steps == 0 && may_skip)
            return 1;
        if (steps == 0)
            vt_debug("copying the books at once%s", oom ? " (a post-mortem)" : "");
        if (steps == 1 || (steps == 0 && freeze_at_once(fz, oom, nspans + 8))) {
            vt_identity_frozen_ready(fz->out.labels);
            return 0;
        }
    }
    return -1;
}
