/* The allocation history book (history.h). Events sit in one mapped array of 32-byte units,
 * windows in order: the first window from unit 0, then the kept peak steps, then the step in
 * progress. Keeping or dropping the step in progress, and releasing a peak step a newer one
 * replaced, move events only at step boundaries.
 *
 * Recording writes memory no cache holds yet, so an event is as short as what it must say. An
 * allocation takes one unit (STUB): its id, size and time; the rest of its birth (address,
 * marks, site, module path) is in its record while it lives, and is written when it dies: by
 * its free, two units, when the allocation's event is in the same window (which windows keep
 * or let go as a whole); else by a free of three units that says everything about its
 * allocation, and in the late deaths, which outlast the free's window. A copy for a file takes
 * the rest of the birth of the allocations still alive from their records. A pair of the common
 * kind writes 96 bytes, and an allocation that stays 32 (it wrote 64). */
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "history.h"
#include "grow.h"
#include "json_out.h"
#include "mpath.h"
#include "snapshot_keys.h"

enum {
    PHASE_BITS = 3,
    FREED = 1 << 6,
    /* in a copy, an allocation's event whose allocation the file lists: the rest of its birth
     * is not copied (the file takes it from the allocation's record) */
    LISTED = 1 << PHASE_BITS,
    MARKED = 1 << 7, /* a free: its allocation's event was in an earlier window then */
    GONE = 1 << 7    /* an allocation: freed since (its record may be another's now) */
};

/* An event's length in units, in its head, says its kind. */
enum { STUB = 1, SAME_FREE = 2, WHOLE_FREE = 3 };

/* The first 8 bytes of every event. */
typedef struct {
    uint32_t ref;  /* an allocation: its record's arena index + 1, to unmark the record when the
                      event is let go (compared by id); a free of two units: how many units
                      back its allocation's event is */
    uint8_t flags; /* the birth's phase, the death's phase, FREED, MARKED or GONE */
    uint8_t units;
    int8_t device;
    uint8_t api;
} head;

/* A mark without its phase, which the flags keep: 24 bytes, not 32. */
typedef struct {
    uint64_t seq, time;
    uint32_t step, instance;
} vt_when;

/* An allocation's event. */
typedef struct {
    head h;
    uint64_t id, size, time;
} hstub;

/* The rest of a birth: what a stub leaves to its record. */
typedef struct {
    uintptr_t address;
    uint64_t seq;
    uint32_t step, instance, site;
    uint8_t kind;
    uint8_t mpath[3]; /* the module path at birth, as its record keeps it (vt_rec_mpath_pack) */
} details;

/* A free whose allocation's event is not in its window. */
typedef struct {
    head h;
    uint64_t id, size;
    uintptr_t address;
    vt_when birth;
    uint32_t site;
    uint8_t kind;
    uint8_t mpath[3]; /* the module path at birth, as its record keeps it (vt_rec_mpath_pack) */
    vt_when death;
} hev;

/* The rest of a birth as its record packs it (table.h): copied as it stands under the lock,
 * decoded by the writer (unpacked), since the eras it names never change. */
typedef struct {
    uintptr_t address;
    uint64_t when, what; /* the record's packed words */
    uint32_t seq_low, era;
} packed_birth;

/* A free whose allocation's event is in the same window. */
typedef struct {
    head h;
    vt_when death;
    packed_birth birth;
} hsame;

typedef struct {
    uint64_t w[4];
} unit;

_Static_assert(sizeof(hstub) == sizeof(unit) && sizeof(details) == sizeof(unit) &&
                   sizeof(packed_birth) == sizeof(unit) && sizeof(hsame) == 2 * sizeof(unit) &&
                   offsetof(hev, birth) == sizeof(unit) &&
                   offsetof(hev, death) == 2 * sizeof(unit) && sizeof(hev) <= 3 * sizeof(unit),
               "events are whole units");
_Static_assert(VT_MAX_DEVICES <= INT8_MAX && VT_PHASE_OTHER < (1 << PHASE_BITS),
               "devices and phases fit an event");

_Static_assert(VT_REC_MPATH_BITS <= 24, "a record's module path fits three bytes");

static void pack_mpath(uint8_t out[3], uint32_t v)
{
    out[0] = (uint8_t)v, out[1] = (uint8_t)(v >> 8), out[2] = (uint8_t)(v >> 16);
}

static uint32_t unpack_mpath(const uint8_t in[3])
{
    return vt_rec_mpath_unpack(in[0] | (uint32_t)in[1] << 8 | (uint32_t)in[2] << 16);
}

static vt_when pack(const vt_mark *m)
{
    return (vt_when){.time = m->time, .seq = m->seq, .step = m->step, .instance = m->instance};
}

static vt_mark unpack(const vt_when *m, unsigned phase)
{
    return (vt_mark){.seq = m->seq,
                     .time = m->time,
                     .step = m->step,
                     .instance = m->instance,
                     .phase = (uint8_t)(phase & ((1u << PHASE_BITS) - 1))};
}

/* A free of an allocation whose event is kept, where the free itself is not, with the rest of
 * the allocation's birth (its event is a stub). */
typedef struct {
    uint64_t id;
    vt_mark death;
    details birth;
} late_death;

static details details_of_whole(const hev *e)
{
    details d = {.address = e->address,
                 .seq = e->birth.seq,
                 .step = e->birth.step,
                 .instance = e->birth.instance,
                 .site = e->site,
                 .kind = e->kind};
    memcpy(d.mpath, e->mpath, sizeof d.mpath);
    return d;
}

/* A late death from a free of three units that its allocation's event is kept apart from. */
static late_death late_of(const hev *e)
{
    return (late_death){e->id, unpack(&e->death, (unsigned)e->h.flags >> PHASE_BITS),
                        details_of_whole(e)};
}

/* The rest of r's birth. Lock held. Inline: a free's event is then filled in place, not from a
 * 32-byte value returned and copied; decoding it was some 20 instructions more a free. */
static inline __attribute__((always_inline)) packed_birth packed_of(const vt_rec *r)
{
    return (packed_birth){.address = vt_rec_address(r),
                          .when = r->when,
                          .what = r->what,
                          .seq_low = r->seq_low,
                          .era = (uint32_t)(r->size_era >> VT_REC_AT_ERA)};
}

static details unpacked(const packed_birth *p)
{
    vt_rec r = {.seq_low = p->seq_low,
                .size_era = (uint64_t)p->era << VT_REC_AT_ERA,
                .when = p->when,
                .what = p->what};
    vt_mark b = vt_rec_birth(&r);
    details d = {.address = p->address,
                 .seq = b.seq,
                 .step = b.step,
                 .instance = b.instance,
                 .site = vt_rec_site(&r),
                 .kind = (uint8_t)vt_rec_kind(&r)};
    pack_mpath(d.mpath, vt_rec_mpath_packed(&r));
    return d;
}

enum { WIN_FIRST, WIN_PEAK };

typedef struct {
    uint8_t reason;
    uint32_t devices;    /* WIN_PEAK: the devices that reached their peak in it */
    size_t first, units; /* where its events are, in units */
    size_t n;            /* how many */
    uint64_t start_seq, start_time, end_time;
    int truncated;
} hwin;

#define MAX_WINDOWS (VT_MAX_DEVICES + 2)

/* What every event reads or writes is on the first cache line, and the window it goes to on
 * the second or third: threads that take turns on the books pass these lines between
 * processors. */
static struct {
    _Alignas(64) unit *u;
    size_t used;     /* units */
    size_t n;        /* events */
    size_t cap;      /* in events */
    size_t stubs;    /* of allocations alive, whose records a copy reads */
    size_t ask_past; /* units: past these, ask for more pages (SIZE_MAX: all are asked for) */
    hwin *open;      /* the window events go to, NULL while they are refused (open_window) */
    int on;
    int first_open;
    hwin cur; /* the step in progress: units [cur.first, used) */
    hwin first;
    size_t ucap; /* in units: room for cap events of the longest kind */
    uint32_t cur_peaks;
    uint32_t steps;
    size_t late_cap; /* in events */
    late_death *late;
    size_t nlate;
    uint64_t dropped;
    hwin kept[VT_MAX_DEVICES + 1]; /* one more while a step joins them */
    int nkept;
    uint64_t moves;          /* times events were moved or let go (at step marks) */
    vt_history_copy *freeze; /* a copy in steps under way (vt_history_freeze_begin_locked) */
} H;
_Static_assert(offsetof(__typeof__(H), cur) == 64 && sizeof(hwin) == 64,
               "H's hot fields fill its first line, its current window the second");

/* The first write to a page of the events is a page fault, and under the lock every thread
 * that allocates waits for it. vt_history_prepare populates the pages ahead of the recording
 * outside the lock, a chunk at a time (one system call instead of a fault per page, and huge
 * pages where the system has them); recording itself never waits for it. */
#define CHUNK ((size_t)2 << 20)
VT_HIDDEN vt_history_pages vt_history_populated; /* want: a chunk past the most used */
static atomic_flag populating = ATOMIC_FLAG_INIT;

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels refuse it and the pages fault */
#endif

/* Whether the events' pages not yet populated are asked for in huge pages. Populating 2 MiB of
 * huge pages takes 0.1 to 0.3 ms of CPU where the system has them at hand; on a virtual machine
 * whose host takes the guest's free memory back, 4.3 to 6.2 ms a huge page once it runs short,
 * where 2 MiB of small pages take 0.6 to 1 ms. A chunk in huge pages that took longer than
 * VRAMTAP_HUGE_SLOW_US of the thread's CPU time turns the rest to small pages. Read and written
 * by the thread that populates (`populating` held), and at start. */
static int huge_pages;
VT_HIDDEN atomic_int vt_huge_pages_slow;
#define HUGE_PAGE ((uintptr_t)2 << 20)

/* 0 where the clock cannot be read (a sandbox that refuses the call): nothing is then too slow. */
static uint64_t thread_cpu_us(void)
{
    struct timespec t;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t))
        return 0;
    return (uint64_t)t.tv_sec * 1000000 + (uint64_t)t.tv_nsec / 1000;
}

/* The events' pages from byte `from` on are small pages: all of them from 0, else from the next
 * huge page's boundary (the huge page `from` is in may be populated already). */
static void small_pages_from(size_t from)
{
    uintptr_t start = (uintptr_t)H.u, end = start + H.ucap * sizeof *H.u;
    uintptr_t at = from ? (start + from + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1) : start;
    huge_pages = 0;
    atomic_store_explicit(&vt_huge_pages_slow, 1, memory_order_relaxed);
    if (at < end)
        madvise((void *)at, end - at, MADV_NOHUGEPAGE);
}

static void *map(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Asks for the events' pages to be populated up to `bytes`, no further than they go: a want
 * past them would never be met, and every vt_history_prepare would try again (an atomic
 * exchange and some 40 instructions each time, before). */
static void ask_ready(size_t bytes)
{
    size_t all = H.ucap * sizeof *H.u;
    size_t asked = bytes < all ? bytes : all;
    H.ask_past = asked < all ? (asked - CHUNK / 2) / sizeof *H.u : SIZE_MAX;
    atomic_store_explicit(&vt_history_populated.want, asked, memory_order_relaxed);
}

/* With the state lock held, after an event was added: half a chunk before the pages asked for
 * run out, asks for a chunk more. */
static void ready_ahead(void)
{
    if (H.used > H.ask_past)
        ask_ready(H.used * sizeof *H.u + CHUNK);
}

void vt_history_populate(void)
{
    if (atomic_flag_test_and_set(&populating))
        return;
    size_t bytes = H.ucap * sizeof *H.u, ready = atomic_load(&vt_history_populated.ready);
    int saved = errno; /* the program's, whatever this call does */
    size_t want = atomic_load(&vt_history_populated.want);
    uint64_t slow_us = 0;
    while (ready < want && ready < bytes) {
        size_t n = bytes - ready < CHUNK ? bytes - ready : CHUNK;
        uint64_t t0 = huge_pages ? thread_cpu_us() : 0;
        if (madvise((char *)H.u + ready, n, MADV_POPULATE_WRITE)) {
            /* refused (an older kernel, no memory): recording faults its pages in, as it
             * would without this; interrupted: the next call goes on */
            if (errno != EINTR)
                ready = SIZE_MAX;
            break;
        }
        uint64_t t1 = huge_pages ? thread_cpu_us() : 0, took = t0 && t1 > t0 ? t1 - t0 : 0;
        if (took > (uint64_t)vt_cfg.huge_slow_us) {
            slow_us = took;
            small_pages_from(ready + n);
        }
        ready += n;
    }
    errno = saved;
    if (slow_us)
        vt_debug("populating 2 MiB of the allocation history's huge pages took %llu us of CPU "
                 "(VRAMTAP_HUGE_SLOW_US=%d): small pages from here on",
                 (unsigned long long)slow_us, vt_cfg.huge_slow_us);
    atomic_store(&vt_history_populated.ready, ready);
    atomic_flag_clear(&populating);
}

/* A step starts (and the first window may have closed): events go to the window that is open
 * now, unless it was cut short or the book is full. */
static void start_step(uint64_t now)
{
    H.cur = (hwin){.reason = WIN_PEAK,
                   .first = H.used,
                   .start_seq = vt_state.seq + 1,
                   .start_time = now,
                   .end_time = now};
    H.cur_peaks = 0;
    hwin *w = H.first_open ? &H.first : &H.cur;
    H.open = H.n == H.cap || w->truncated ? NULL : w;
}

void vt_history_init(void)
{
    if (!vt_cfg.huge_slow_us) /* the books' tables too, history or not */
        atomic_store_explicit(&vt_huge_pages_slow, 1, memory_order_relaxed);
    if (!vt_cfg.history_events)
        return;
    H.cap = (size_t)vt_cfg.history_events;
    H.ucap = H.cap * WHOLE_FREE;
    /* a record keeps the index of its allocation's event in VT_REC_HIST_BITS */
    if (H.ucap >= (size_t)1 << VT_REC_HIST_BITS) {
        H.cap = (((size_t)1 << VT_REC_HIST_BITS) - 1) / WHOLE_FREE;
        H.ucap = H.cap * WHOLE_FREE;
    }
    H.late_cap = H.cap / 8 + 64;
    H.u = map(H.ucap * sizeof *H.u);
    H.late = map(H.late_cap * sizeof *H.late);
    if (H.u && vt_cfg.huge_slow_us) /* a hint: fewer, larger faults */
        huge_pages = !madvise(H.u, H.ucap * sizeof *H.u, MADV_HUGEPAGE);
    else if (H.u)
        small_pages_from(0);
    if (!H.u || !H.late) {
        vt_log("no room for the allocation history (VRAMTAP_HISTORY_EVENTS=%d): kept none",
               vt_cfg.history_events);
        if (H.u)
            munmap(H.u, H.ucap * sizeof *H.u);
        if (H.late)
            munmap(H.late, H.late_cap * sizeof *H.late);
        H.u = NULL;
        H.late = NULL;
        return;
    }
    H.steps = (uint32_t)vt_cfg.history_steps;
    uint64_t now = vt_clock();
    H.first = (hwin){.reason = WIN_FIRST, .start_seq = 1, .start_time = now, .end_time = now};
    H.first_open = H.steps > 0;
    start_step(now);
    ask_ready(CHUNK);
    H.on = 1;
}

static void add_late(late_death d)
{
    if (H.nlate < H.late_cap)
        H.late[H.nlate++] = d;
    else
        H.dropped++;
}

static head *head_at(size_t i)
{
    return (head *)&H.u[i];
}

/* The window events go to now, or NULL when it is cut short: a window cut short stays a prefix
 * of what happened. */
static hwin *open_window(void)
{
    hwin *w = H.open;
    if (!w) {
        H.dropped++;
        (H.first_open ? &H.first : &H.cur)->truncated = 1;
    }
    return w;
}

/* Writes a free of three units for allocation a at unit `at`: all but its death (the phase in
 * its flags, and the mark). */
static hev *put_whole(size_t at, const frozen_rec *a)
{
    hev *e = (hev *)&H.u[at];
    e->h = (head){
        .flags = a->birth.phase, .units = WHOLE_FREE, .device = (int8_t)a->device, .api = a->api};
    e->id = a->id;
    e->size = a->size;
    e->address = a->address;
    e->birth = pack(&a->birth);
    e->site = a->site;
    e->kind = a->kind;
    pack_mpath(e->mpath, vt_rec_mpath_pack(a->mpath));
    return e;
}

/* The event of `units` units at the end of w, which happened at `time`. */
static void added(hwin *w, uint8_t units, uint64_t time)
{
    w->end_time = time;
    H.used += units;
    if (++H.n == H.cap)
        H.open = NULL;
    w->n++;
    w->units += units;
    ready_ahead();
}

void vt_history_alloc_locked(vt_rec *r, uint32_t rec, const vt_birth *birth, int new_peak)
{
    if (!H.on)
        return;
    if (new_peak && !H.first_open)
        H.cur_peaks |= 1u << birth->device;
    hwin *w = open_window();
    if (!w)
        return;
    size_t at = H.used;
    hstub *e = (hstub *)&H.u[at];
    e->h = (head){.ref = rec,
                  .flags = birth->birth.phase,
                  .units = STUB,
                  .device = (int8_t)birth->device,
                  .api = birth->api};
    e->id = birth->id;
    e->size = birth->size;
    e->time = birth->birth.time;
    H.stubs++;
    vt_rec_set_hist(r, (uint32_t)at + 1);
    added(w, STUB, birth->birth.time);
}

static void save_for_copy(vt_history_copy *c, size_t at, const vt_rec *r);

/* Writes at unit `at` the free of r, whose event is at unit hist - 1 of the same window. Inline:
 * the common free fills it in place. */
static inline __attribute__((always_inline)) void put_same(size_t at, size_t hist, uint8_t flags,
                                                           const vt_rec *r, const vt_mark *death)
{
    hsame *e = (hsame *)&H.u[at];
    e->h = (head){.ref = (uint32_t)(at - (hist - 1)), .flags = flags, .units = SAME_FREE};
    e->death = pack(death);
    e->birth = packed_of(r);
}

/* vt_history_free_locked's other cases, apart so that the common one runs in a small frame: a copy
 * being made, an allocation without a kept event or with one in an earlier window, a window cut
 * short. `hist`: vt_rec_hist(r). */
static __attribute__((noinline)) void free_rare(vt_rec *r, const vt_mark *death, size_t hist)
{
    if (hist) {
        /* freezing first: the free has read its line already, H.freeze's line it has not */
        if (vt_state.freezing && H.freeze)
            save_for_copy(H.freeze, hist - 1, r);
        head_at(hist - 1)->flags |= GONE;
        H.stubs--;
    }
    hwin *w = open_window();
    if (!w) {
        if (hist) {
            packed_birth b = packed_of(r);
            add_late((late_death){vt_rec_id(r), *death, unpacked(&b)});
        }
        return;
    }
    size_t at = H.used;
    uint8_t flags = (uint8_t)(death->phase << PHASE_BITS | FREED | (hist ? MARKED : 0));
    if (hist > w->first) {
        put_same(at, hist, flags, r, death);
        added(w, SAME_FREE, death->time);
    } else {
        frozen_rec a;
        vt_rec_freeze(&a, r, vt_rec_address(r));
        hev *e = put_whole(at, &a);
        e->h.flags |= flags;
        e->death = pack(death);
        added(w, WHOLE_FREE, death->time);
    }
}

void vt_history_free_locked(vt_rec *r, const vt_mark *death)
{
    if (!H.on)
        return;
    size_t hist = vt_rec_hist(r);
    hwin *w = H.open;
    if (!hist || vt_state.freezing || !w || hist <= w->first) {
        free_rare(r, death, hist);
        return;
    }
    head_at(hist - 1)->flags |= GONE;
    H.stubs--;
    size_t at = H.used;
    put_same(at, hist, (uint8_t)(death->phase << PHASE_BITS | FREED | MARKED), r, death);
    added(w, SAME_FREE, death->time);
}

/* Whether h is the event of an allocation still alive, whose record has the rest of its birth. */
static int live_stub(const head *h)
{
    return h->units == STUB && !(h->flags & GONE);
}

/* In a copy: whether the details hold the rest of the birth of event h. */
static int has_details(const head *h)
{
    return live_stub(h) && !(h->flags & LISTED);
}

/* The record of the allocation whose event is at unit i, while it is that allocation's. */
static vt_rec *owner(size_t i)
{
    const hstub *e = (const hstub *)&H.u[i];
    if (!live_stub(&e->h))
        return NULL;
    vt_rec *r = vt_arena_at(e->h.ref - 1);
    return vt_rec_id(r) == e->id ? r : NULL;
}

/* The allocations of events let go are no longer in the history. */
static void unmark(const hwin *w)
{
    for (size_t i = w->first; i < w->first + w->units; i += head_at(i)->units) {
        vt_rec *r = owner(i);
        if (r) {
            vt_rec_set_hist(r, 0);
            H.stubs--;
        }
    }
}

/* Whether unit i holds the free of an allocation whose event is in an earlier window. */
static int marked_whole(const unit *u, size_t i)
{
    const head *h = (const head *)&u[i];
    return h->units == WHOLE_FREE && (h->flags & MARKED);
}

static void drop_step(void)
{
    unmark(&H.cur);
    /* the free of an allocation kept in an earlier window must not be lost with the step */
    for (size_t i = H.cur.first; i < H.used; i += head_at(i)->units)
        if (marked_whole(H.u, i))
            add_late(late_of((const hev *)&H.u[i]));
    H.used = H.cur.first;
    H.n -= H.cur.n;
}

/* The step becomes the peak step of the devices that peaked in it; windows that no device
 * needs any more are released and the events after them moved down. */
static void keep_step(void)
{
    for (int i = 0; i < H.nkept; i++)
        H.kept[i].devices &= ~H.cur_peaks;
    H.cur.devices = H.cur_peaks;
    H.kept[H.nkept++] = H.cur;
    size_t to = H.first.units, n = H.first.n;
    int out = 0;
    for (int i = 0; i < H.nkept; i++) {
        hwin w = H.kept[i];
        if (!w.devices) {
            unmark(&w);
            continue;
        }
        if (w.first != to) {
            memmove(&H.u[to], &H.u[w.first], w.units * sizeof *H.u);
            for (size_t k = to; k < to + w.units; k += head_at(k)->units) {
                vt_rec *r = owner(k);
                if (r)
                    vt_rec_set_hist(r, (uint32_t)k + 1);
            }
        }
        w.first = to;
        to += w.units;
        n += w.n;
        H.kept[out++] = w;
    }
    H.nkept = out;
    H.used = to;
    H.n = n;
}

void vt_history_step_locked(void)
{
    if (!H.on)
        return;
    H.moves++;
    uint64_t now = vt_now_locked();
    if (H.first_open) {
        if (vt_state.step < H.steps)
            return;
        H.first_open = 0;
        if (!H.first.truncated)
            H.first.end_time = now;
    } else {
        if (!H.cur.truncated)
            H.cur.end_time = now;
        /* a peak step the cap left empty tells nothing: the older peak steps stay */
        if (H.cur_peaks && !(H.cur.truncated && !H.cur.n))
            keep_step();
        else
            drop_step();
    }
    start_step(now);
}

void vt_history_reset_after_fork(void)
{
    if (!H.on)
        return;
    H.freeze = NULL; /* the parent's writer is not in the child */
    H.moves++;
    H.used = H.n = H.nlate = H.stubs = 0;
    H.dropped = 0;
    H.nkept = 0;
    uint64_t now = vt_clock();
    H.first = (hwin){
        .reason = WIN_FIRST, .start_seq = vt_state.seq + 1, .start_time = now, .end_time = now};
    H.first_open = vt_state.step < H.steps;
    start_step(now);
    /* the pages are the parent's until written: populated again, and by no thread of the
     * parent's that held the flag */
    ask_ready(CHUNK);
    atomic_store(&vt_history_populated.ready, 0);
    atomic_flag_clear(&populating);
}

/* --- the copy and the file ------------------------------------------------------------ */

/* An event as the writer reads it: units widened, a short free given its allocation's. */
typedef struct {
    uint64_t id, size;
    uintptr_t address;
    vt_when birth, death;
    uint32_t site, mpath;
    int8_t device;
    uint8_t api, kind;
    uint8_t flags;
    uint8_t whole; /* the birth's details are known */
} wide;

static void give_details(wide *w, const details *d)
{
    w->address = d->address;
    w->birth.seq = d->seq;
    w->birth.step = d->step;
    w->birth.instance = d->instance;
    w->site = d->site;
    w->kind = d->kind;
    w->mpath = unpack_mpath(d->mpath);
    w->whole = 1;
}

static int freed(const wide *e)
{
    return (e->flags & FREED) != 0;
}

/* When the event happened: its allocation's birth or death. */
static vt_mark at(const wide *e)
{
    return freed(e) ? unpack(&e->death, (unsigned)e->flags >> PHASE_BITS)
                    : unpack(&e->birth, e->flags);
}

/* A stub as it was at the copy's first hold, with the rest of its birth, saved when its
 * allocation died before the copy reached it. */
typedef struct {
    size_t at;
    unit stub;
    packed_birth birth;
} saved_stub;

/* An event of a copy: the unit it starts at, and for a stub still alive where the rest of its
 * birth lies in the copy's details (NO_DETAILS otherwise). The writer widens events from these
 * one at a time: a million widened at once took 96 bytes each for the time of the write. */
typedef struct {
    size_t at, det;
} event_ref;
#define NO_DETAILS SIZE_MAX

struct vt_history_copy {
    int on;
    uint32_t steps;
    size_t max_events;
    uint64_t dropped;
    unit *u;
    size_t used, cap;  /* units */
    packed_birth *det; /* the rest of the births of the stubs still alive and not LISTED, in the
                          windows' order */
    size_t ndet, det_cap;
    vt_history_lists listed;
    const void *listed_ctx;
    event_ref *ev; /* the events, window after window (vt_history_write) */
    size_t n;
    late_death *late;
    size_t nlate, late_cap;
    hwin win[MAX_WINDOWS];
    int nwin;
    /* While it is made in steps: the book's moves at the first hold; the units copied so far,
     * whose stubs' details are taken; the next event whose details to take (window, event,
     * unit); the stubs saved meanwhile (save_for_copy). */
    uint64_t moves;
    vt_history_copy *outer; /* a copy in steps this one, made at once, came in the middle of */
    size_t front;
    int dw;
    size_t dk, di;
    saved_stub *saved;
    size_t nsaved, saved_cap;
    int saved_lost;
    /* The step in progress at the first hold is left out of the file: its frees of allocations
     * of earlier windows go to the late deaths (units [drop_from, used)). */
    int drop_cur;
    size_t drop_from;
    int finished; /* finish() ran */
};

size_t vt_history_bound_locked(size_t *stubs)
{
    *stubs = H.stubs;
    return H.used + H.nlate;
}

vt_history_copy *vt_history_copy_new(size_t bound, size_t stubs)
{
    vt_history_copy *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->cap = bound + bound / 8 + 64;
    c->late_cap = c->cap < H.late_cap ? c->cap : H.late_cap;
    c->det_cap = stubs + stubs / 8 + 64;
    c->u = malloc(c->cap * sizeof *c->u);
    c->det = malloc(c->det_cap * sizeof *c->det);
    c->late = malloc(c->late_cap * sizeof *c->late);
    if (!c->u || !c->det || !c->late) {
        vt_history_copy_free(c);
        return NULL;
    }
    /* touched here, so that the copy under the lock is a copy and not a page fault per page; not
     * the details, which only the events of allocations the file does not list take (at exit, often
     * few of them: the room for all of them touched took 32 bytes an event) */
    memset(c->u, 0, c->cap * sizeof *c->u);
    memset(c->late, 0, c->late_cap * sizeof *c->late);
    return c;
}

void vt_history_copy_free(vt_history_copy *c)
{
    if (!c)
        return;
    free(c->u);
    free(c->det);
    free(c->ev);
    free(c->late);
    free(c->saved);
    free(c);
}

/* The first hold of a copy: all but the events and their stubs' details, which the steps copy
 * (vt_history_freeze_step_locked) as they were now. 0 when the book outgrew the copy. */
int vt_history_freeze_begin_locked(vt_history_copy *c, vt_history_lists listed, const void *ctx)
{
    c->on = H.on;
    if (!H.on)
        return 1;
    if (H.used > c->cap || H.nlate > c->late_cap || H.stubs > c->det_cap)
        return 0;
    c->steps = H.steps;
    c->max_events = H.cap;
    c->dropped = H.dropped;
    c->used = H.used;
    c->nlate = H.nlate;
    memcpy(c->late, H.late, H.nlate * sizeof *H.late);
    uint64_t now = vt_now_locked();
    c->nwin = 0;
    if (H.steps) {
        c->win[c->nwin] = H.first;
        if (H.first_open && !H.first.truncated)
            c->win[c->nwin].end_time = now;
        c->nwin++;
    }
    for (int i = 0; i < H.nkept; i++)
        c->win[c->nwin++] = H.kept[i];
    /* a peak in the step in progress: that step so far */
    if (!H.first_open && H.cur_peaks) {
        c->win[c->nwin] = H.cur;
        c->win[c->nwin].devices = H.cur_peaks;
        if (!H.cur.truncated)
            c->win[c->nwin].end_time = now;
        c->nwin++;
    }
    c->drop_cur = !H.first_open && !H.cur_peaks;
    c->drop_from = H.cur.first;
    c->moves = H.moves;
    c->front = 0;
    c->dw = 0;
    c->dk = 0;
    c->di = c->nwin ? c->win[0].first : 0;
    c->ndet = 0;
    c->nsaved = 0;
    c->saved_lost = 0;
    c->finished = 0;
    c->listed = listed;
    c->listed_ctx = ctx;
    c->outer = H.freeze;
    H.freeze = c;
    return 1;
}

/* Takes the details of the stubs alive in the copy below its front, from their records, in the
 * order list_events reads them in; marks LISTED those of allocations the file lists instead. */
static void take_details(vt_history_copy *c)
{
    while (c->dw < c->nwin) {
        const hwin *w = &c->win[c->dw];
        if (c->dk == w->n) {
            if (++c->dw < c->nwin)
                c->di = c->win[c->dw].first, c->dk = 0;
            continue;
        }
        if (c->di >= c->front)
            return;
        head *h = (head *)&c->u[c->di];
        if (live_stub(h)) {
            const vt_rec *r = owner(c->di);
            if (r && c->listed(r, c->listed_ctx))
                h->flags |= LISTED;
            else if (c->ndet < c->det_cap)
                c->det[c->ndet++] = r ? packed_of(r) : (packed_birth){0};
        }
        c->di += ((const head *)&c->u[c->di])->units;
        c->dk++;
    }
}

int vt_history_freeze_step_locked(vt_history_copy *c, size_t units)
{
    if (!c->on)
        return 0;
    if (H.moves != c->moves || c->saved_lost)
        return -1;
    size_t n = c->used - c->front < units ? c->used - c->front : units;
    memcpy(c->u + c->front, H.u + c->front, n * sizeof *H.u);
    c->front += n;
    take_details(c);
    return c->front < c->used;
}

void vt_history_freeze_end_locked(vt_history_copy *c)
{
    if (H.freeze == c)
        H.freeze = c->outer;
}

/* An allocation whose event is at unit `at` dies (lock held, r its record): where a copy in
 * steps has not reached that unit yet, the stub as it was and the rest of the birth are saved
 * for it. Out of memory, the copy cannot show its first hold's moment, and is made again. */
static void save_for_copy(vt_history_copy *c, size_t at, const vt_rec *r)
{
    if (at < c->front || at >= c->used || c->saved_lost)
        return;
    if (vt_grow(&c->saved, &c->saved_cap, c->nsaved + 1, sizeof *c->saved, 256)) {
        c->saved_lost = 1;
        return;
    }
    c->saved[c->nsaved++] = (saved_stub){at, H.u[at], packed_of(r)};
}

static int saved_by_unit(const void *pa, const void *pb)
{
    const saved_stub *a = pa, *b = pb;
    return (a->at > b->at) - (a->at < b->at);
}

/* Outside the lock, once: the saved stubs back in the copy, each with its details among those
 * the steps took, in the windows' order; the late deaths of a step in progress left out. 0 when
 * memory ran out. */
static int finish(vt_history_copy *c)
{
    if (c->finished)
        return 1;
    if (c->nsaved) {
        packed_birth *det = malloc((c->ndet + c->nsaved) * sizeof *det);
        if (!det)
            return 0;
        qsort(c->saved, c->nsaved, sizeof *c->saved, saved_by_unit);
        for (size_t k = 0; k < c->nsaved; k++)
            c->u[c->saved[k].at] = c->saved[k].stub;
        size_t d = 0, nd = 0, k = 0;
        for (int w = 0; w < c->nwin; w++) {
            size_t i = c->win[w].first;
            for (size_t e = 0; e < c->win[w].n; e++, i += ((const head *)&c->u[i])->units) {
                if (!has_details((const head *)&c->u[i]))
                    continue;
                while (k < c->nsaved && c->saved[k].at < i)
                    k++;
                if (k < c->nsaved && c->saved[k].at == i)
                    det[nd++] = c->saved[k].birth;
                else if (d < c->ndet)
                    det[nd++] = c->det[d++];
            }
        }
        free(c->det);
        c->det = det;
        c->ndet = nd;
    }
    /* a step in progress the file leaves out: its frees of allocations of earlier windows, as
     * if it were dropped at the first hold */
    if (c->drop_cur)
        for (size_t i = c->drop_from; i < c->used; i += ((const head *)&c->u[i])->units)
            if (marked_whole(c->u, i) && c->nlate < c->late_cap)
                c->late[c->nlate++] = late_of((const hev *)&c->u[i]);
    c->finished = 1;
    return 1;
}

/* An event to sort by its allocation's id, its allocation before its free: `k`, the event's index
 * in the copy's events, shifted left once, with 1 in the low bit for a free. Sorted through
 * pointers: qsort moves 8 bytes where it would move 16 (the write of `bench/alloc_pair 1 0
 * 200000 1000`'s history: 959 million instructions, against 1,093 million sorting the keys). */
typedef struct {
    uint64_t id;
    size_t k;
} by_id_key;

static int by_id(const void *pa, const void *pb)
{
    const by_id_key *a = *(const by_id_key *const *)pa, *b = *(const by_id_key *const *)pb;
    if (a->id != b->id)
        return a->id < b->id ? -1 : 1;
    return (int)(a->k & 1) - (int)(b->k & 1);
}

static int late_by_id(const void *pa, const void *pb)
{
    const late_death *a = pa, *b = pb;
    return (a->id > b->id) - (a->id < b->id);
}

static int id_order(const void *pa, const void *pb)
{
    uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
    return (a > b) - (a < b);
}

static int listed(uint64_t id, const vt_history_listed *l)
{
    if (!l->nids || id < l->lo || id > l->hi)
        return 0;
    if (l->bits)
        return l->bits[(id - l->lo) >> 6] >> ((id - l->lo) & 63) & 1;
    return bsearch(&id, l->ids, l->nids, sizeof *l->ids, id_order) != NULL;
}

/* The event at unit i of the copy, without the rest of its allocation's birth where the event
 * does not hold it (event_of gives it): what a file's list of events needs. */
static wide widen(const vt_history_copy *c, size_t i)
{
    const head *h = (const head *)&c->u[i];
    if (h->units == STUB) {
        const hstub *e = (const hstub *)h;
        return (wide){.id = e->id,
                      .size = e->size,
                      .birth = {.time = e->time},
                      .device = h->device,
                      .api = h->api,
                      .flags = h->flags};
    }
    if (h->units == SAME_FREE) {
        const hsame *e = (const hsame *)h;
        wide w = widen(c, i - h->ref);
        w.death = e->death;
        w.flags = (uint8_t)((w.flags & ((1u << PHASE_BITS) - 1)) | h->flags);
        return w;
    }
    const hev *e = (const hev *)h;
    wide w = {.id = e->id,
              .size = e->size,
              .address = e->address,
              .birth = e->birth,
              .site = e->site,
              .mpath = unpack_mpath(e->mpath),
              .device = h->device,
              .api = h->api,
              .kind = e->kind,
              .flags = h->flags,
              .whole = 1,
              .death = e->death};
    return w;
}

/* Event k of the copy widened, with the rest of its birth where the copy has it. */
static wide event_of(const vt_history_copy *c, size_t k)
{
    const event_ref *e = &c->ev[k];
    const head *h = (const head *)&c->u[e->at];
    wide w = widen(c, e->at);
    details b;
    if (h->units == SAME_FREE)
        b = unpacked(&((const hsame *)h)->birth);
    else if (e->det != NO_DETAILS)
        b = unpacked(&c->det[e->det]);
    else
        return w;
    give_details(&w, &b);
    return w;
}

/* One allocation from its events (sorted: its allocation first, then its free) and the late
 * deaths; returns the number of events used. */
static size_t gather(vt_history_copy *c, const by_id_key *const *keys, size_t n, frozen_rec *r)
{
    wide first = event_of(c, keys[0]->k >> 1), second = {0};
    const wide *a = &first, *f = NULL;
    size_t used = 1;
    if (freed(a)) {
        f = a;
    } else if (n > 1 && keys[1]->id == a->id) {
        second = event_of(c, keys[1]->k >> 1);
        f = &second;
        used++;
    }
    late_death key = {.id = a->id};
    const late_death *late =
        f ? NULL : bsearch(&key, c->late, c->nlate, sizeof *c->late, late_by_id);
    wide b = *a;
    if (!b.whole && f && f->whole)
        b = *f;
    else if (!b.whole && late)
        give_details(&b, &late->birth);
    *r = (frozen_rec){.id = a->id,
                      .size = a->size,
                      .address = b.address,
                      .birth = unpack(&b.birth, a->flags),
                      .site = b.site,
                      .mpath = b.mpath,
                      .device = a->device,
                      .api = a->api,
                      .kind = b.kind};
    if (f || late || (a->flags & GONE)) {
        r->dead = 1;
        r->death = f ? at(f) : late ? late->death : at(a);
        /* neither freed in a window, nor late, nor alive: its free was not kept */
        if (!f && !late)
            c->dropped++;
    }
    return used;
}

static void write_allocations(vt_history_copy *c, const vt_history_listed *l,
                              const vt_history_out *out)
{
    by_id_key *keys = malloc((c->n + 1) * sizeof *keys);
    const by_id_key **order = keys ? malloc((c->n + 1) * sizeof *order) : NULL;
    size_t n = 0;
    /* Sorting is the writer's largest cost: only the events of allocations the file does not
     * list, and of those it lists, the ones freed since (whose lost frees `dropped` counts).
     * With a large live set, that is few of them. */
    for (int w = 0; order && w < c->nwin; w++)
        for (size_t i = c->win[w].first; i < c->win[w].first + c->win[w].n; i++) {
            wide e = widen(c, c->ev[i].at);
            if (freed(&e) || (e.flags & GONE) || !listed(e.id, l)) {
                keys[n] = (by_id_key){e.id, i << 1 | (size_t)freed(&e)};
                order[n] = &keys[n];
                n++;
            }
        }
    if (order) {
        qsort(order, n, sizeof *order, by_id);
        qsort(c->late, c->nlate, sizeof *c->late, late_by_id);
    }
    for (size_t i = 0; order && i < n;) {
        frozen_rec r;
        i += gather(c, order + i, n - i, &r);
        if (!listed(r.id, l))
            out->alloc(out->ctx, &r);
    }
    free(order);
    free(keys);
}

/* Lists every window's events, which then start at their index in c->ev: 0 when memory ran out. */
static int list_events(vt_history_copy *c)
{
    if (!finish(c))
        return 0;
    size_t n = 0;
    for (int w = 0; w < c->nwin; w++)
        n += c->win[w].n;
    c->ev = malloc((n + 1) * sizeof *c->ev);
    if (!c->ev)
        return 0;
    c->n = 0;
    size_t d = 0;
    for (int w = 0; w < c->nwin; w++) {
        size_t i = c->win[w].first;
        c->win[w].first = c->n;
        for (size_t k = 0; k < c->win[w].n; k++, i += ((const head *)&c->u[i])->units) {
            int has = has_details((const head *)&c->u[i]) && d < c->ndet;
            c->ev[c->n++] = (event_ref){i, has ? d++ : NO_DETAILS};
        }
    }
    return 1;
}

int vt_history_write(FILE *f, const vt_history_copy *cc, const vt_history_listed *l,
                     const vt_history_out *out)
{
    if (!cc || !cc->on)
        return 0;
    vt_history_copy *c = (vt_history_copy *)cc;
    if (!c->ev && !list_events(c)) {
        vt_log("no memory to write the allocation history: the file has none");
        return 0;
    }
    write_allocations(c, l, out);
    for (int w = 0; w < c->nwin; w++)
        for (size_t i = c->win[w].first; i < c->win[w].first + c->win[w].n; i++) {
            wide e = widen(c, c->ev[i].at);
            out->event(out->ctx, at(&e).time, e.id, freed(&e) ? -(int64_t)e.size : (int64_t)e.size);
        }
    fprintf(f,
            VT_JSON_KEY(VT_K_HISTORY) "{\"steps\": %u, \"max_events\": %zu, \"dropped\": %llu, "
                                      "\"module_paths\": true, \"windows\": [",
            c->steps, c->max_events, (unsigned long long)c->dropped);
    size_t k = 0;
    for (int w = 0; w < c->nwin; w++) {
        const hwin *h = &c->win[w];
        uint32_t devices = h->reason == WIN_FIRST ? l->used_devices : h->devices;
        fprintf(f, "%s\n  {\"reason\": \"%s\", \"devices\": [", w ? "," : "",
                h->reason == WIN_FIRST ? "first_steps" : "peak_step");
        for (int d = 0, sep = 0; d < VT_MAX_DEVICES; d++)
            if (devices & (1u << d))
                fprintf(f, "%s%d", sep++ ? ", " : "", d);
        fputs("], \"start_s\": ", f);
        vt_json_time(f, out->seconds(out->ctx, h->start_time));
        fputs(", \"end_s\": ", f);
        vt_json_time(f, out->seconds(out->ctx, h->end_time));
        fprintf(f,
                ", \"start_seq\": %llu, \"first_event\": %zu, \"events\": %zu, \"truncated\": "
                "%s}",
                (unsigned long long)h->start_seq, k, h->n, h->truncated ? "true" : "false");
        k += h->n;
    }
    fputs("]},\n", f);
    return 1;
}
