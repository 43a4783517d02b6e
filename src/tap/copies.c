/* Copies between host and device (copies.h).
 *
 * A copy takes no lock: each thread counts into a block of its own, which holds the counts of
 * one moment (the phase and step the books were in). When the books move on (phase.c publishes
 * the new moment), the thread folds its block into the books under the state lock before
 * counting again, and a thread that ends folds its block on the way out; the writer adds the
 * blocks of the threads still running to its copy. A copy between unified addresses the books
 * cannot tell apart, or one whose stack is wanted, is counted under the lock.
 *
 * A download into pinned memory queued on a stream is waited for when its thread later waits for
 * that stream, its context or an event (PyTorch's .item() since 2.x: cudaMemcpyAsync into a
 * pinned buffer, then cudaStreamSynchronize): the thread keeps such downloads pending, by stream,
 * until then. Which stream an event was recorded on is not followed: waiting for any event
 * ends them all. A wait that ends any counts as one download waited for. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "copies.h"
#include "json_out.h"
#include "pinned.h"
#include "resolve.h"
#include "snapshot_keys.h"
#include "stacks.h"
#include "table.h"

/* What a copy was, by direction and, for host to device and back, the host side. */
enum { H2D_PAGEABLE, H2D_PINNED, D2H_PAGEABLE, D2H_PINNED, D2D, H2H, NKINDS };

typedef struct {
    uint64_t bytes[NKINDS], calls[NKINDS];
    uint64_t sync_d2h; /* device-to-host copies the calling thread waited for */
} counts;

/* Steps counted one by one; later steps are folded together. */
#define STEPS 256
/* Distinct copy sites kept with VRAMTAP_COPY_STACKS=1, and how many of the largest are written. */
#define SITES 64
#define SITES_WRITTEN 8
#define NPHASES (VT_PHASE_OTHER + 1)

typedef struct {
    uint32_t site;
    uint64_t bytes, calls;
    uint64_t by_kind[NKINDS];
} site_counts;

struct vt_copies_frozen {
    counts total, phase[NPHASES], step[STEPS], later;
    uint32_t nsteps; /* steps that had copies, up to the last of them, at most STEPS */
    uint32_t later_first, later_last; /* the steps folded into `later` */
    site_counts sites[SITES];
    int nsites;
    uint64_t sites_left_out; /* bytes copied from sites past SITES */
};

static struct vt_copies_frozen books;
static int stacks_on;

void vt_copies_init(void)
{
    const char *s = getenv("VRAMTAP_COPY_STACKS");
    stacks_on = s && !strcmp(s, "1") && vt_cfg.stacks;
}

enum { SIDE_DEVICE, SIDE_PINNED, SIDE_PAGEABLE, SIDE_UNKNOWN };

/* What the books say of one end: a unified pointer is device memory when a live device
 * allocation starts there (`locked`: the state lock is held, else that question is not asked);
 * anything else the books cannot tell is left to the driver. */
static int side_from_books(vt_copy_side s, int locked)
{
    if (s.end == VT_END_DEVICE)
        return SIDE_DEVICE;
    if (vt_pinned_has(s.addr))
        return SIDE_PINNED;
    if (s.end == VT_END_HOST)
        return SIDE_PAGEABLE;
    return locked && vt_live_find_locked(s.addr) ? SIDE_DEVICE : SIDE_UNKNOWN;
}

/* What the driver says of a unified pointer the books do not know (an interior device address,
 * memory registered by a route vramtap did not see): memory it does not know is pageable host
 * memory, as it treats it. */
static int side_from_driver(uintptr_t p)
{
    CUresult (*attr)(void *, CUpointer_attribute, CUdeviceptr) = (CUresult(*)(
        void *, CUpointer_attribute, CUdeviceptr))vt_real_driver(VT_DRV_cuPointerGetAttribute);
    unsigned int type = 0;
    if (!attr || attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)p) != CUDA_SUCCESS)
        return SIDE_PAGEABLE;
    return type == CU_MEMORYTYPE_HOST ? SIDE_PINNED : SIDE_DEVICE;
}

static int kind_of(int dst, int src)
{
    if (dst == SIDE_DEVICE)
        return src == SIDE_DEVICE ? D2D : src == SIDE_PINNED ? H2D_PINNED : H2D_PAGEABLE;
    if (src == SIDE_DEVICE)
        return dst == SIDE_PINNED ? D2H_PINNED : D2H_PAGEABLE;
    return H2H;
}

static int any(const counts *c)
{
    for (int k = 0; k < NKINDS; k++)
        if (c->calls[k])
            return 1;
    return c->sync_d2h != 0; /* a wait may come in a later moment than its download */
}

static void add(counts *to, const counts *c)
{
    for (int k = 0; k < NKINDS; k++) {
        to->bytes[k] += c->bytes[k];
        to->calls[k] += c->calls[k];
    }
    to->sync_d2h += c->sync_d2h;
}

/* Adds c to z at a phase and step. The total is the phases' sum, made when a file is written. */
static void add_at(vt_copies_frozen *z, unsigned phase, uint32_t step, const counts *c)
{
    add(&z->phase[phase < NPHASES ? phase : VT_PHASE_OTHER], c);
    if (step < STEPS) {
        add(&z->step[step], c);
        if (step >= z->nsteps)
            z->nsteps = step + 1;
        return;
    }
    if (!any(&z->later))
        z->later_first = step;
    add(&z->later, c);
    z->later_last = step > z->later_last ? step : z->later_last;
}

static counts one(int kind, uint64_t bytes, int waited)
{
    counts c = {0};
    c.bytes[kind] = bytes;
    c.calls[kind] = 1;
    c.sync_d2h = (uint64_t)waited;
    return c;
}

static void add_site_locked(uint32_t site, int kind, uint64_t bytes)
{
    int i = 0;
    while (i < books.nsites && books.sites[i].site != site)
        i++;
    if (i == books.nsites) {
        if (i == SITES) {
            books.sites_left_out += bytes;
            return;
        }
        books.sites[books.nsites++] = (site_counts){.site = site};
    }
    books.sites[i].bytes += bytes;
    books.sites[i].calls++;
    books.sites[i].by_kind[kind] += bytes;
}

/* ---- the threads' blocks ---- */

/* The books' moment: phase | step << 8. */
static _Atomic uint64_t now_moment;

void vt_copies_moment_locked(void)
{
    atomic_store_explicit(&now_moment, (uint64_t)vt_state.step << 8 | vt_state.phase,
                          memory_order_relaxed);
}

/* Written by its thread only (plain loads and stores, atomic so that the writer may read them
 * meanwhile); the links are the state lock's. */
typedef struct block {
    _Atomic uint64_t moment;
    _Atomic uint64_t bytes[NKINDS], calls[NKINDS], sync_d2h;
    struct block *next, **prevp;
} block;

static VT_TLS block *mine;
static block *blocks;
static pthread_key_t exit_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static int key_made;

static counts read_block(const block *b)
{
    counts c;
    for (int k = 0; k < NKINDS; k++) {
        c.bytes[k] = atomic_load_explicit(&b->bytes[k], memory_order_relaxed);
        c.calls[k] = atomic_load_explicit(&b->calls[k], memory_order_relaxed);
    }
    c.sync_d2h = atomic_load_explicit(&b->sync_d2h, memory_order_relaxed);
    return c;
}

static void bump(_Atomic uint64_t *v, uint64_t by)
{
    atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + by,
                          memory_order_relaxed);
}

static void clear(block *b, uint64_t moment)
{
    for (int k = 0; k < NKINDS; k++) {
        atomic_store_explicit(&b->bytes[k], 0, memory_order_relaxed);
        atomic_store_explicit(&b->calls[k], 0, memory_order_relaxed);
    }
    atomic_store_explicit(&b->sync_d2h, 0, memory_order_relaxed);
    atomic_store_explicit(&b->moment, moment, memory_order_relaxed);
}

/* Moves a block's counts into the books and starts it at `moment` (state lock held). */
static void fold_locked(block *b, uint64_t moment)
{
    counts c = read_block(b);
    uint64_t m = atomic_load_explicit(&b->moment, memory_order_relaxed);
    if (any(&c))
        add_at(&books, (unsigned)(m & 0xff), (uint32_t)(m >> 8), &c);
    clear(b, moment);
}

/* A thread that ends leaves its counts in the books. */
static void leave(void *arg)
{
    block *b = arg;
    vt_lock();
    fold_locked(b, 0);
    *b->prevp = b->next;
    if (b->next)
        b->next->prevp = b->prevp;
    vt_unlock();
    mine = NULL;
    free(b);
}

static void make_key(void)
{
    key_made = !pthread_key_create(&exit_key, leave);
}

/* The calling thread's block, made on its first copy; NULL when there is no memory for it. */
static block *enroll(void)
{
    pthread_once(&key_once, make_key);
    block *b = key_made ? calloc(1, sizeof *b) : NULL;
    if (!b)
        return NULL;
    if (pthread_setspecific(exit_key, b)) {
        free(b);
        return NULL;
    }
    vt_lock();
    atomic_store_explicit(&b->moment, atomic_load_explicit(&now_moment, memory_order_relaxed),
                          memory_order_relaxed);
    b->next = blocks;
    b->prevp = &blocks;
    if (blocks)
        blocks->prevp = &b->next;
    blocks = b;
    vt_unlock();
    return mine = b;
}

/* The block, at the books' moment: counts of an earlier one go to the books first. */
static void to_moment(block *b)
{
    uint64_t now = atomic_load_explicit(&now_moment, memory_order_relaxed);
    if (atomic_load_explicit(&b->moment, memory_order_relaxed) != now) {
        vt_lock();
        fold_locked(b, now);
        vt_unlock();
    }
}

static void count_mine(block *b, int kind, uint64_t bytes, int waited)
{
    to_moment(b);
    bump(&b->bytes[kind], bytes);
    bump(&b->calls[kind], 1);
    if (waited)
        bump(&b->sync_d2h, 1);
}

/* ---- downloads into pinned memory not waited for yet ---- */

/* This thread's, by the stream they were queued on: a few streams, then the rest together, which
 * only a wait for every stream ends. Private to the thread: no lock, no atomics. */
#define PENDING_STREAMS 4
static VT_TLS struct {
    uintptr_t stream;
    uint64_t n;
} pending[PENDING_STREAMS];
static VT_TLS uint64_t pending_elsewhere, pending_all;

static void pend(uintptr_t stream)
{
    int empty = -1;
    pending_all++;
    for (int i = 0; i < PENDING_STREAMS; i++) {
        if (pending[i].n && pending[i].stream == stream) {
            pending[i].n++;
            return;
        }
        if (!pending[i].n && empty < 0)
            empty = i;
    }
    if (empty < 0) {
        pending_elsewhere++;
        return;
    }
    pending[empty].stream = stream;
    pending[empty].n = 1;
}

/* How many of them a wait for `stream` (or every stream) ends, no longer pending. */
static uint64_t take_pending(uintptr_t stream)
{
    uint64_t n = 0;
    for (int i = 0; i < PENDING_STREAMS; i++)
        if (pending[i].n && (stream == VT_COPY_EVERY_STREAM || pending[i].stream == stream)) {
            n += pending[i].n;
            pending[i].n = 0;
        }
    if (stream == VT_COPY_EVERY_STREAM) {
        n += pending_elsewhere;
        pending_elsewhere = 0;
    }
    pending_all -= n;
    return n;
}

/* One wait, however many downloads it ends: what the count stands for is a stall of the thread
 * until the GPU has done all it was given before (ten tensors offloaded and then one
 * synchronisation stall it once). */
void vt_copy_waited(uintptr_t stream)
{
    if (!pending_all || vt_cfg.disabled || !take_pending(stream))
        return;
    block *b = mine ? mine : enroll();
    if (b) {
        to_moment(b);
        bump(&b->sync_d2h, 1);
        return;
    }
    counts c = {.sync_d2h = 1};
    vt_lock();
    add_at(&books, vt_state.phase, vt_state.step, &c);
    vt_unlock();
}

/* ---- a copy ---- */

/* Whether the calling thread waits for a copy of this kind now; a download it will wait for
 * later is left pending. */
static int waits_now(int kind, uintptr_t how)
{
    if (kind == D2H_PINNED && how != VT_COPY_SYNC) {
        pend(how);
        return 0;
    }
    return kind == D2H_PAGEABLE || kind == D2H_PINNED;
}

static void count_locked(int dst, int src, uint64_t bytes, uintptr_t how, uint32_t site)
{
    int kind = kind_of(dst, src);
    counts c = one(kind, bytes, waits_now(kind, how));
    add_at(&books, vt_state.phase, vt_state.step, &c);
    if (site != VT_NO_SITE)
        add_site_locked(site, kind, bytes);
}

void vt_copy_note(vt_copy_side dst, vt_copy_side src, uint64_t bytes, uintptr_t how)
{
    if (vt_cfg.disabled || !bytes)
        return;
    block *b = mine;
    if (!stacks_on && dst.end != VT_END_UNIFIED && src.end != VT_END_UNIFIED &&
        (b || (b = enroll()))) {
        int kind = kind_of(side_from_books(dst, 0), side_from_books(src, 0));
        count_mine(b, kind, bytes, waits_now(kind, how));
        return;
    }
    uint32_t site = stacks_on ? vt_stack_here() : VT_NO_SITE;
    vt_lock();
    int d = side_from_books(dst, 1), s = side_from_books(src, 1);
    if (d != SIDE_UNKNOWN && s != SIDE_UNKNOWN) {
        count_locked(d, s, bytes, how, site);
        vt_unlock();
        return;
    }
    vt_unlock();
    /* no CUDA call under a vramtap lock */
    if (d == SIDE_UNKNOWN)
        d = side_from_driver(dst.addr);
    if (s == SIDE_UNKNOWN)
        s = side_from_driver(src.addr);
    vt_lock();
    count_locked(d, s, bytes, how, site);
    vt_unlock();
}

vt_copies_frozen *vt_copies_freeze_locked(void)
{
    vt_copies_frozen *z = malloc(sizeof *z);
    if (!z)
        return NULL;
    *z = books;
    for (const block *b = blocks; b; b = b->next) {
        counts c = read_block(b);
        uint64_t m = atomic_load_explicit(&b->moment, memory_order_relaxed);
        if (any(&c))
            add_at(z, (unsigned)(m & 0xff), (uint32_t)(m >> 8), &c);
    }
    for (int p = 0; p < NPHASES; p++)
        add(&z->total, &z->phase[p]);
    return z;
}

/* With every lock held, in the child's only thread: the other threads' blocks are not in it. */
void vt_copies_reset_after_fork(void)
{
    memset(&books, 0, sizeof books);
    take_pending(VT_COPY_EVERY_STREAM); /* the parent's downloads: not the child's to wait for */
    blocks = NULL;
    if (mine) {
        clear(mine, atomic_load_explicit(&now_moment, memory_order_relaxed));
        mine->next = NULL;
        mine->prevp = &blocks;
        blocks = mine;
    }
}

static void write_pair(FILE *f, const char *name, const counts *c, int pageable, int pinned_kind)
{
    fprintf(f,
            "\"%s\": {\"pageable_bytes\": %llu, \"pinned_bytes\": %llu, \"pageable_calls\": %llu, "
            "\"pinned_calls\": %llu}",
            name, (unsigned long long)c->bytes[pageable], (unsigned long long)c->bytes[pinned_kind],
            (unsigned long long)c->calls[pageable], (unsigned long long)c->calls[pinned_kind]);
}

static void write_counts(FILE *f, const counts *c)
{
    fputc('{', f);
    write_pair(f, "h2d", c, H2D_PAGEABLE, H2D_PINNED);
    fputs(", ", f);
    write_pair(f, "d2h", c, D2H_PAGEABLE, D2H_PINNED);
    fprintf(f,
            ", \"d2d\": {\"bytes\": %llu, \"calls\": %llu}, \"h2h\": {\"bytes\": %llu, "
            "\"calls\": %llu}, \"sync_d2h_calls\": %llu}",
            (unsigned long long)c->bytes[D2D], (unsigned long long)c->calls[D2D],
            (unsigned long long)c->bytes[H2H], (unsigned long long)c->calls[H2H],
            (unsigned long long)c->sync_d2h);
}

static int by_bytes_desc(const void *a, const void *b)
{
    const site_counts *x = a, *y = b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

static const char *const kind_names[NKINDS] = {"h2d_pageable", "h2d_pinned", "d2h_pageable",
                                               "d2h_pinned",   "d2d",        "h2h"};

static void write_sites(FILE *f, vt_copies_frozen *z,
                        void (*site)(FILE *f, void *ctx, uint32_t site), void *ctx)
{
    qsort(z->sites, (size_t)z->nsites, sizeof *z->sites, by_bytes_desc);
    fputs(", \"sites\": ", f);
    if (!stacks_on) {
        fputs("null", f);
        return;
    }
    fputc('[', f);
    for (int i = 0; i < z->nsites && i < SITES_WRITTEN; i++) {
        const site_counts *s = &z->sites[i];
        fprintf(f, "%s{\"site\": ", i ? ", " : "");
        site(f, ctx, s->site);
        fprintf(f, ", \"bytes\": %llu, \"calls\": %llu", (unsigned long long)s->bytes,
                (unsigned long long)s->calls);
        for (int k = 0; k < NKINDS; k++)
            if (s->by_kind[k])
                fprintf(f, ", \"%s_bytes\": %llu", kind_names[k],
                        (unsigned long long)s->by_kind[k]);
        fputc('}', f);
    }
    uint64_t rest = z->sites_left_out;
    for (int i = SITES_WRITTEN; i < z->nsites; i++)
        rest += z->sites[i].bytes;
    fprintf(f, "], \"sites_left_out_bytes\": %llu", (unsigned long long)rest);
}

void vt_copies_write(FILE *f, vt_copies_frozen *z, void (*site)(FILE *f, void *ctx, uint32_t site),
                     void *ctx)
{
    if (!z) { /* no memory for the copy: unknown, not zero */
        fputs(VT_JSON_KEY(VT_K_COPIES) "null,\n", f);
        return;
    }
    fputs(VT_JSON_KEY(VT_K_COPIES) "{\"total\": ", f);
    write_counts(f, &z->total);
    fputs(", \"phases\": {", f);
    for (int p = 0; p < NPHASES; p++) {
        fprintf(f, "%s\"%s\": ", p ? ", " : "", vt_phase_name((vt_phase)p));
        write_counts(f, &z->phase[p]);
    }
    fputs("}, \"steps\": [", f);
    int first = 1;
    for (uint32_t s = 0; s < z->nsteps; s++) {
        if (!any(&z->step[s]))
            continue;
        fprintf(f, "%s\n  {\"step\": %u, \"copies\": ", first ? "" : ",", s);
        write_counts(f, &z->step[s]);
        fputc('}', f);
        first = 0;
    }
    fputs("], \"later_steps\": ", f);
    if (any(&z->later)) {
        fprintf(f, "{\"first\": %u, \"last\": %u, \"copies\": ", z->later_first, z->later_last);
        write_counts(f, &z->later);
        fputc('}', f);
    } else {
        fputs("null", f);
    }
    write_sites(f, z, site, ctx);
    fputs("},\n", f);
}
