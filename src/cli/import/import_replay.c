/* From a neutral trace to what a vramtap snapshot says: phase instances, steps, and per device
 * the allocations live at the first moment live bytes peaked.
 *
 * Phases: every event has a label from its evidence (optimizer > zero_grad > backward >
 * forward). Consecutive labelled events with one label, in one profiler step, form a phase
 * instance; events without evidence do not break an instance but take the phase of the one
 * whose time span holds them, and are outside phases otherwise. Optimizer and zero_grad spans
 * known from annotations enter as marker events, so an optimizer step that allocates nothing
 * still counts a step.
 *
 * Liveness: the window may begin after allocations were made. Frees with no allocation in the
 * window, blocks the source lists as live at the start or at the end, and the difference
 * between the allocator's running total and the replay are all allocations from before the
 * window, live from its start. Their birth phase is inferred where the source gives grounds:
 * a block's own allocation stack, else what freed it (see before_window_phase). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "grow.h"
#include "import.h"

enum { LABEL_NONE, LABEL_FORWARD, LABEL_BACKWARD, LABEL_OPTIMIZER, LABEL_ZERO_GRAD };

static const uint8_t label_phase[] = {VT_OTHER, VT_FORWARD, VT_BACKWARD, VT_OPTIMIZER, VT_OTHER};

static int cmp_ev(const void *pa, const void *pb)
{
    const vt_mev *a = pa, *b = pb;
    if (a->t != b->t)
        return a->t < b->t ? -1 : 1;
    /* a span's start marker before what happens at that instant, its end marker after */
    int ra = a->bytes ? 1 : a->category, rb = b->bytes ? 1 : b->category;
    if (ra != rb)
        return ra - rb;
    return (a->order > b->order) - (a->order < b->order);
}

static int cmp_span(const void *pa, const void *pb)
{
    const vt_span *a = pa, *b = pb;
    return (a->start > b->start) - (a->start < b->start);
}

/* Refuses what no snapshot can hold, so that every file the importer writes loads: devices,
 * sizes, step numbers and times inside the bounds of snapshot.h. Runs after the reader has
 * rebased its times. */
static int plausible(const vt_trace *tr, vt_err *err)
{
    const char *what = NULL;
    double bad = 0;
#define CHECK(cond, name, value)                                                                   \
    if (!what && !(cond)) {                                                                        \
        what = name;                                                                               \
        bad = (double)(value);                                                                     \
    }
#define DEVICE_OK(d) ((d) >= 0 && (d) <= VT_MAX_DEVICE)
#define TIME_OK(t) ((t) >= 0 && (t) <= VT_MAX_TIME_S)
    for (size_t i = 0; i < tr->nev; i++) {
        const vt_mev *e = &tr->ev[i];
        CHECK(DEVICE_OK(e->device), "a memory event's device", e->device);
        CHECK(e->bytes >= -VT_MAX_BYTES && e->bytes <= VT_MAX_BYTES, "a memory event's size",
              e->bytes);
        CHECK(e->total == VT_NO_TOTAL || (e->total >= -VT_MAX_BYTES && e->total <= VT_MAX_BYTES),
              "a running total", e->total);
        CHECK(TIME_OK(e->t), "a memory event's time (s after the first)", e->t);
    }
    for (size_t i = 0; i < tr->nspans; i++) {
        const vt_span *sp = &tr->spans[i];
        CHECK(sp->n >= 0 && sp->n <= VT_MAX_COUNT, "a profiler step number", sp->n);
        CHECK(TIME_OK(sp->start) && TIME_OK(sp->end), "an annotation's time (s after the first)",
              TIME_OK(sp->start) ? sp->end : sp->start);
    }
    for (size_t i = 0; i < tr->nstart + tr->nend; i++) {
        const vt_block *b = i < tr->nstart ? &tr->start_blocks[i] : &tr->end_blocks[i - tr->nstart];
        CHECK(DEVICE_OK(b->device), "a live block's device", b->device);
        CHECK(b->size >= 0 && b->size <= VT_MAX_BYTES, "a live block's size", b->size);
    }
    for (size_t i = 0; i < tr->nooms; i++) {
        CHECK(DEVICE_OK(tr->ooms[i].device), "an out-of-memory event's device", tr->ooms[i].device);
        CHECK(tr->ooms[i].size >= 0, "an out-of-memory event's size", tr->ooms[i].size);
        CHECK(TIME_OK(tr->ooms[i].t), "an out-of-memory event's time (s after the first)",
              tr->ooms[i].t);
    }
    for (size_t i = 0; i < tr->ndevs; i++) {
        const vt_devinfo *d = &tr->devs[i];
        CHECK(DEVICE_OK(d->device), "a device", d->device);
        CHECK(d->total_bytes >= -1 && d->total_bytes <= VT_MAX_BYTES, "a device's memory",
              d->total_bytes);
        CHECK(d->reserved_peak >= -1 && d->reserved_peak <= VT_MAX_BYTES,
              "a device's reserved memory", d->reserved_peak);
        CHECK(d->reserved_end >= -1 && d->reserved_end <= VT_MAX_BYTES,
              "a device's reserved memory", d->reserved_end);
    }
#undef CHECK
#undef DEVICE_OK
#undef TIME_OK
    if (!what)
        return 0;
    vt_err_set(err, "%s: %s, %.17g, is not plausible", tr->source, what, bad);
    return -1;
}

/* Optimizer and zero_grad spans become marker events: bytes 0, category 0 at the start and 2
 * at the end (the order within an instant, see cmp_ev). */
static int add_markers(vt_trace *tr, vt_err *err)
{
    size_t n = tr->nspans;
    for (size_t i = 0; i < n; i++) {
        const vt_span *sp = &tr->spans[i];
        if (sp->kind == VT_SPAN_STEP)
            continue;
        uint8_t ev = sp->kind == VT_SPAN_OPTIMIZER ? VT_EV_OPTIMIZER : VT_EV_ZERO_GRAD;
        vt_mev m = {.t = sp->start, .site = -1, .device = -1, .evidence = ev, .category = 0};
        if (vt_trace_add_ev(tr, &m, err))
            return -1;
        m.t = sp->end;
        m.category = 2;
        if (vt_trace_add_ev(tr, &m, err))
            return -1;
    }
    return 0;
}

/* The profiler step around or before each moment, walked forward in time. */
typedef struct {
    const vt_span *steps;
    size_t n, next;
    const vt_span *cur;
} step_cursor;

static void step_at(step_cursor *c, double t, int64_t *base, bool *inside)
{
    while (c->next < c->n && c->steps[c->next].start <= t)
        c->cur = &c->steps[c->next++];
    if (!c->n) {
        *base = 0;
        *inside = true; /* no steps recorded: the whole trace is one */
    } else if (!c->cur) {
        *base = c->steps[0].n > 0 ? c->steps[0].n - 1 : 0;
        *inside = false;
    } else {
        *base = c->cur->n;
        *inside = t <= c->cur->end;
    }
}

static int phases(vt_replay *rp, uint8_t *label, int64_t *base, vt_err *err)
{
    vt_trace *tr = rp->tr;
    vt_span *steps = malloc((tr->nspans + 1) * sizeof *steps);
    size_t nsteps = 0, inst_cap = 0;
    if (!steps)
        return vt_imp_nomem(err);
    for (size_t i = 0; i < tr->nspans; i++)
        if (tr->spans[i].kind == VT_SPAN_STEP)
            steps[nsteps++] = tr->spans[i];
    qsort(steps, nsteps, sizeof *steps, cmp_span);
    step_cursor sc = {.steps = steps, .n = nsteps};
    int64_t bwd_base = INT64_MIN; /* the step in which backward last ran */
    int open_span = 0;            /* optimizer markers open minus closed */
    size_t cur = VT_NONE;
    for (size_t i = 0; i < tr->nev; i++) {
        const vt_mev *e = &tr->ev[i];
        bool inside;
        step_at(&sc, e->t, &base[i], &inside);
        uint8_t ev = e->evidence;
        if (!e->bytes && ev == VT_EV_OPTIMIZER)
            open_span += e->category == 0 ? 1 : -1;
        if (open_span > 0)
            ev |= VT_EV_OPTIMIZER;
        uint8_t l = ev & VT_EV_OPTIMIZER   ? LABEL_OPTIMIZER
                    : ev & VT_EV_ZERO_GRAD ? LABEL_ZERO_GRAD
                    : ev & VT_EV_BACKWARD  ? LABEL_BACKWARD
                    : ev & VT_EV_FORWARD   ? LABEL_FORWARD
                    /* model work before backward within a step is forward */
                    : ev & VT_EV_OP && inside && bwd_base != base[i] ? LABEL_FORWARD
                                                                     : LABEL_NONE;
        if (l == LABEL_BACKWARD)
            bwd_base = base[i];
        label[i] = l;
        if (l == LABEL_ZERO_GRAD) {
            cur = VT_NONE;
            continue;
        }
        if (l == LABEL_NONE)
            continue;
        if (cur == VT_NONE || rp->inst[cur].phase != label_phase[l] ||
            base[rp->inst[cur].first] != base[i]) {
            if (vt_grow(&rp->inst, &inst_cap, rp->ninst + 1, sizeof *rp->inst, 16)) {
                free(steps);
                return vt_imp_nomem(err);
            }
            cur = rp->ninst++;
            rp->inst[cur] = (vt_inst){.phase = label_phase[l], .start = e->t, .first = i};
        }
        rp->inst[cur].last = i;
        rp->inst[cur].end = e->t;
    }
    free(steps);
    return 0;
}

/* Every event's phase, step and instance, now that the instances are known. */
static void moments(vt_replay *rp, const int64_t *base)
{
    vt_trace *tr = rp->tr;
    size_t k = 0; /* the next instance to begin */
    int64_t opt_done = 0, cur_base = tr->nev ? base[0] : 0;
    for (size_t i = 0; i < tr->nev; i++) {
        if (base[i] != cur_base) {
            cur_base = base[i];
            opt_done = 0;
        }
        vt_when *w = &rp->when[i];
        w->step = base[i] + opt_done;
        /* Steps never go back, even where the profiler's numbering does (two optimizer steps
         * inside one profiler step, a trace whose step numbers restart). */
        if (i && w->step < rp->when[i - 1].step)
            w->step = rp->when[i - 1].step;
        while (k < rp->ninst && rp->inst[k].first <= i)
            k++;
        /* instance k-1 is the last begun; i is in it when within its range */
        if (k && i <= rp->inst[k - 1].last) {
            vt_inst *in = &rp->inst[k - 1];
            w->phase = in->phase;
            w->instance = (int64_t)k;
            if (i == in->first)
                in->step = w->step;
            if (i == in->last && in->phase == VT_OPTIMIZER)
                opt_done++;
        } else {
            w->phase = k ? VT_OTHER : VT_SETUP;
            w->instance = (int64_t)k;
        }
    }
    rp->steps = tr->nev ? base[tr->nev - 1] + opt_done : 0;
    if (tr->nev && rp->steps < rp->when[tr->nev - 1].step)
        rp->steps = rp->when[tr->nev - 1].step;
}

/* --- pairing frees with allocations ----------------------------------------------------- */

typedef struct {
    uint64_t value; /* address, or size when the source has no addresses */
    int32_t device;
    uint8_t by_size, category;
    uint8_t pad[2];
} pkey;

typedef struct {
    UT_hash_handle hh;
    pkey key;
    size_t *idx; /* live allocations with this key, the latest last */
    size_t n, cap;
} pent;

static pkey key_of(int32_t device, uint64_t addr, int64_t size, uint8_t category)
{
    pkey k;
    memset(&k, 0, sizeof k);
    k.device = device;
    k.by_size = addr == 0;
    k.value = addr ? addr : (uint64_t)size;
    k.category = addr ? 0 : category;
    return k;
}

static pent *find(pent **map, const pkey *k)
{
    pent *e;
    HASH_FIND(hh, *map, k, sizeof *k, e);
    return e;
}

static int push(pent **map, const pkey *k, size_t alloc)
{
    pent *e = find(map, k);
    if (!e) {
        if (!(e = calloc(1, sizeof *e)))
            return -1;
        e->key = *k;
        HASH_ADD(hh, *map, key, sizeof e->key, e);
    }
    if (vt_grow(&e->idx, &e->cap, e->n + 1, sizeof *e->idx, 16))
        return -1;
    e->idx[e->n++] = alloc;
    return 0;
}

static size_t pop(pent **map, const pkey *k)
{
    pent *e = find(map, k);
    return e && e->n ? e->idx[--e->n] : VT_NONE;
}

static void map_free(pent **map)
{
    pent *e, *tmp;
    HASH_ITER(hh, *map, e, tmp)
    {
        HASH_DEL(*map, e);
        free(e->idx);
        free(e);
    }
}

static size_t dev_index(const vt_replay *rp, int32_t device)
{
    for (size_t d = 0; d < rp->ndevs; d++)
        if (rp->devs[d].device == device)
            return d;
    return VT_NONE;
}

static int add_device(vt_replay *rp, size_t *cap, int32_t device, vt_err *err)
{
    if (device < 0 || dev_index(rp, device) != VT_NONE)
        return 0;
    if (vt_grow(&rp->devs, cap, rp->ndevs + 1, sizeof *rp->devs, 16))
        return vt_imp_nomem(err);
    size_t d = rp->ndevs++;
    while (d && rp->devs[d - 1].device > device) {
        rp->devs[d] = rp->devs[d - 1];
        d--;
    }
    rp->devs[d] = (vt_idev){.device = device, .peak_ev = VT_NONE, .total_peak = -1};
    return 0;
}

static int add_alloc(vt_replay *rp, size_t *cap, const vt_ialloc *a, vt_err *err)
{
    if (vt_grow(&rp->allocs, cap, rp->nallocs + 1, sizeof *rp->allocs, 16))
        return vt_imp_nomem(err);
    rp->allocs[rp->nallocs++] = *a;
    return 0;
}

/* The phase in which an allocation from before the window was most likely made. From its
 * allocation stack when the source kept one; otherwise from what freed it, as a training loop
 * does: the optimizer frees state it replaces (functional updates), zero_grad frees the
 * gradients backward made, backward frees what forward saved for it. */
static void before_window_phase(const vt_replay *rp, vt_ialloc *a, const uint8_t *label)
{
    static const uint8_t by_free[] = {[LABEL_NONE] = VT_SETUP,
                                      [LABEL_FORWARD] = VT_SETUP,
                                      [LABEL_BACKWARD] = VT_FORWARD,
                                      [LABEL_OPTIMIZER] = VT_OPTIMIZER,
                                      [LABEL_ZERO_GRAD] = VT_BACKWARD};
    a->birth_phase = VT_SETUP;
    a->birth_from = VT_BIRTH_UNKNOWN;
    if (a->site >= 0) {
        uint8_t ev = vt_isite_evidence(&rp->tr->sites, a->site);
        a->birth_phase = ev & VT_EV_OPTIMIZER              ? VT_OPTIMIZER
                         : ev & VT_EV_ZERO_GRAD            ? VT_OTHER
                         : ev & VT_EV_BACKWARD             ? VT_BACKWARD
                         : ev & (VT_EV_FORWARD | VT_EV_OP) ? VT_FORWARD
                                                           : VT_SETUP;
        a->birth_from = VT_BIRTH_FROM_STACK;
    } else if (a->death != VT_NONE && by_free[label[a->death]] != VT_SETUP) {
        a->birth_phase = by_free[label[a->death]];
        a->birth_from = VT_BIRTH_FROM_FREE;
    }
}

/* Pairs every free with its allocation; frees of blocks allocated before the window become
 * allocations from before it. */
/* A block alive before the recording began: no birth or death in the window. */
static vt_ialloc before_window(const vt_block *b)
{
    return (vt_ialloc){.size = b->size,
                       .addr = b->addr,
                       .device = b->device,
                       .site = b->site,
                       .category = b->category,
                       .before_window = true,
                       .birth = VT_NONE,
                       .death = VT_NONE};
}

static int pair(vt_replay *rp, size_t *cap, const uint8_t *label, vt_err *err)
{
    vt_trace *tr = rp->tr;
    pent *map = NULL;
    int rc = 0;
    for (size_t i = 0; !rc && i < tr->nstart; i++) {
        const vt_block *b = &tr->start_blocks[i];
        vt_ialloc a = before_window(b);
        pkey k = key_of(b->device, b->addr, b->size, b->category);
        rc = add_alloc(rp, cap, &a, err) ||
             (push(&map, &k, rp->nallocs - 1) ? vt_imp_nomem(err) : 0);
    }
    for (size_t i = 0; !rc && i < tr->nev; i++) {
        const vt_mev *e = &tr->ev[i];
        if (!e->bytes)
            continue;
        int64_t size = e->bytes > 0 ? e->bytes : -e->bytes;
        pkey k = key_of(e->device, e->addr, size, e->category);
        vt_idev *d = &rp->devs[dev_index(rp, e->device)];
        if (e->bytes > 0) {
            vt_ialloc a = {.size = size,
                           .addr = e->addr,
                           .device = e->device,
                           .site = e->site,
                           .mpath = e->mpath,
                           .category = e->category,
                           .birth = i,
                           .death = VT_NONE};
            d->allocs++;
            rc = add_alloc(rp, cap, &a, err) ||
                 (push(&map, &k, rp->nallocs - 1) ? vt_imp_nomem(err) : 0);
            continue;
        }
        size_t j = pop(&map, &k);
        if (j != VT_NONE) {
            rp->allocs[j].death = i;
            d->frees++;
            continue;
        }
        d->unknown_frees++;
        vt_ialloc a = {.size = size,
                       .addr = e->addr,
                       .device = e->device,
                       .site = -1,
                       .category = e->category,
                       .before_window = true,
                       .birth = VT_NONE,
                       .death = i};
        rc = add_alloc(rp, cap, &a, err);
    }
    /* blocks live at the end that no allocation in the window explains */
    int64_t missing = 0;
    for (size_t i = 0; !rc && i < tr->nend; i++) {
        const vt_block *b = &tr->end_blocks[i];
        pkey k = key_of(b->device, b->addr, b->size, b->category);
        if (pop(&map, &k) != VT_NONE)
            continue;
        vt_ialloc a = before_window(b);
        rc = add_alloc(rp, cap, &a, err);
    }
    if (!rc && tr->nend) {
        pent *e, *tmp;
        HASH_ITER(hh, map, e, tmp) missing += (int64_t)e->n;
        if (missing)
            rc = vt_trace_note(tr, err,
                               "%lld allocation(s) the replay keeps live are not in the dump's "
                               "segments (freed without a recorded free)",
                               (long long)missing);
    }
    map_free(&map);
    for (size_t j = 0; j < rp->nallocs; j++)
        if (rp->allocs[j].before_window)
            before_window_phase(rp, &rp->allocs[j], label);
    return rc;
}

/* Live bytes the running total knows about and the replay does not: allocations from before
 * the window that no free or block revealed, kept as one allocation per device. */
static int unseen(vt_replay *rp, size_t *cap, vt_err *err)
{
    vt_trace *tr = rp->tr;
    for (size_t d = 0; d < rp->ndevs; d++) {
        vt_idev *dev = &rp->devs[d];
        int64_t live = 0;
        for (size_t j = 0; j < rp->nallocs; j++)
            if (rp->allocs[j].device == dev->device && rp->allocs[j].before_window)
                live += rp->allocs[j].size;
        for (size_t i = 0; i < tr->nev; i++) {
            const vt_mev *e = &tr->ev[i];
            if (e->device != dev->device || !e->bytes)
                continue;
            live += e->bytes;
            if (e->total == VT_NO_TOTAL)
                continue;
            int64_t gap = e->total - live;
            if (gap > 0) {
                vt_ialloc a = {.size = gap,
                               .device = dev->device,
                               .site = -1,
                               .category = VT_NO_CATEGORY,
                               .before_window = true,
                               .birth = VT_NONE,
                               .death = VT_NONE};
                dev->unseen_bytes = gap;
                if (add_alloc(rp, cap, &a, err))
                    return -1;
            } else if (gap < 0 &&
                       vt_trace_note(tr, err,
                                     "device %d: the running total starts %lld bytes below "
                                     "what the frees in the window imply",
                                     (int)dev->device, (long long)-gap))
                return -1;
            break;
        }
    }
    return 0;
}

bool vt_ialloc_live_at(const vt_ialloc *a, size_t ev)
{
    bool born = a->birth == VT_NONE || (ev != VT_NONE && a->birth <= ev);
    bool dead = a->death != VT_NONE && ev != VT_NONE && a->death <= ev;
    return born && !dead;
}

/* Live bytes through the window: the peak, the running-total check, and each phase
 * instance's live bytes for the timeline. */
static int sweep(vt_replay *rp, int64_t *inst_live, const uint8_t *label, vt_err *err)
{
    vt_trace *tr = rp->tr;
    size_t nd = rp->ndevs;
    int64_t *live = calloc(nd + 1, sizeof *live);
    if (!live)
        return vt_imp_nomem(err);
    for (size_t j = 0; j < rp->nallocs; j++)
        if (rp->allocs[j].before_window)
            live[dev_index(rp, rp->allocs[j].device)] += rp->allocs[j].size;
    for (size_t d = 0; d < nd; d++) {
        rp->devs[d].before_window_bytes = live[d];
        rp->devs[d].peak = live[d];
    }
    size_t k = 0;
    for (size_t i = 0; i < tr->nev; i++) {
        const vt_mev *e = &tr->ev[i];
        while (k < rp->ninst && rp->inst[k].last < i)
            k++;
        bool in_inst = k < rp->ninst && rp->inst[k].first <= i;
        if (in_inst && i == rp->inst[k].first)
            for (size_t d = 0; d < nd; d++)
                inst_live[(k * nd + d) * 3] = inst_live[(k * nd + d) * 3 + 2] = live[d];
        if (e->bytes) {
            size_t d = dev_index(rp, e->device);
            vt_idev *dev = &rp->devs[d];
            live[d] += e->bytes;
            if (live[d] > dev->peak) {
                dev->peak = live[d];
                dev->peak_ev = i;
            }
            if (e->total != VT_NO_TOTAL) {
                dev->total_mismatches += e->total != live[d];
                if (e->total > dev->total_peak)
                    dev->total_peak = e->total;
            }
            if (e->bytes > 0 && label[i] == LABEL_NONE) {
                dev->unphased_allocs++;
                dev->unphased_outside +=
                    rp->when[i].phase == VT_SETUP || rp->when[i].phase == VT_OTHER;
            }
            if (in_inst) {
                int64_t *m = &inst_live[(k * nd + d) * 3 + 2];
                if (live[d] > *m)
                    *m = live[d];
            }
        }
        if (in_inst && i == rp->inst[k].last)
            for (size_t d = 0; d < nd; d++)
                inst_live[(k * nd + d) * 3 + 1] = live[d];
    }
    for (size_t d = 0; d < nd; d++)
        rp->devs[d].live_end = live[d];
    free(live);
    return 0;
}

static int categories_at_peak(vt_replay *rp, vt_err *err)
{
    vt_trace *tr = rp->tr;
    int rc = 0;
    for (size_t d = 0; d < rp->ndevs; d++) {
        vt_idev *dev = &rp->devs[d];
        int64_t sum = 0;
        if (tr->ncategories && !(dev->cat_bytes_at_peak = calloc(tr->ncategories, sizeof(int64_t))))
            return vt_imp_nomem(err);
        for (size_t j = 0; j < rp->nallocs; j++) {
            const vt_ialloc *a = &rp->allocs[j];
            if (a->device != dev->device || !vt_ialloc_live_at(a, dev->peak_ev))
                continue;
            sum += a->size;
            if (tr->ncategories && a->category < tr->ncategories)
                dev->cat_bytes_at_peak[a->category] += a->size;
        }
        if (sum != dev->peak)
            rc = vt_trace_note(tr, err,
                               "device %d: allocations live at the peak add up to %lld, "
                               "not %lld (an importer bug)",
                               (int)dev->device, (long long)sum, (long long)dev->peak);
    }
    return rc;
}

int vt_replay_run(vt_trace *tr, vt_replay *rp, vt_err *err)
{
    memset(rp, 0, sizeof *rp);
    rp->tr = tr;
    if (plausible(tr, err) || add_markers(tr, err))
        return -1;
    if (tr->nev)
        qsort(tr->ev, tr->nev, sizeof *tr->ev, cmp_ev);
    size_t dev_cap = 0, alloc_cap = 0;
    for (size_t i = 0; i < tr->nev; i++)
        if (tr->ev[i].bytes && add_device(rp, &dev_cap, tr->ev[i].device, err))
            return -1;
    for (size_t i = 0; i < tr->nstart + tr->nend; i++) {
        const vt_block *b = i < tr->nstart ? &tr->start_blocks[i] : &tr->end_blocks[i - tr->nstart];
        if (add_device(rp, &dev_cap, b->device, err))
            return -1;
    }
    uint8_t *label = malloc(tr->nev + 1);
    int64_t *base = malloc((tr->nev + 1) * sizeof *base);
    rp->when = calloc(tr->nev + 1, sizeof *rp->when);
    int rc = label && base && rp->when ? 0 : vt_imp_nomem(err);
    if (!rc)
        rc = phases(rp, label, base, err);
    if (!rc) {
        moments(rp, base);
        rc = pair(rp, &alloc_cap, label, err);
    }
    if (!rc)
        rc = unseen(rp, &alloc_cap, err);
    int64_t *inst_live = NULL;
    if (!rc && !(inst_live = calloc(rp->ninst * rp->ndevs * 3 + 1, sizeof *inst_live)))
        rc = vt_imp_nomem(err);
    if (!rc)
        rc = sweep(rp, inst_live, label, err);
    if (!rc)
        rc = categories_at_peak(rp, err);
    rp->inst_live = inst_live;
    free(label);
    free(base);
    if (rc)
        vt_replay_free(rp);
    return rc;
}

void vt_replay_free(vt_replay *rp)
{
    free(rp->when);
    free(rp->inst);
    free(rp->allocs);
    for (size_t d = 0; d < rp->ndevs; d++)
        free(rp->devs[d].cat_bytes_at_peak);
    free(rp->devs);
    free(rp->inst_live);
    memset(rp, 0, sizeof *rp);
}
