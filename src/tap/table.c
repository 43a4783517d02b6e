/* The books' tables (table.h). Records live in an arena of fixed chunks and are found by
 * index; each table (device allocations, VMM handles, pinned host memory) is an index of
 * open addressing over them: 8-byte slots of (hash, record), linear probing, deletion by
 * backward shift (no tombstones). A table that fills past three quarters (half, while small)
 * grows by half without a pause: the new slots take every insertion, and each change moves a few of
 * the old ones over, a whole cluster at a time, until none is left. Nothing here allocates on the
 * way of an allocation or a free but a chunk of records (prepared outside the lock) or a table's
 * growth. */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "attach.h"
#include "batch.h"
#include "grow.h"
#include "identity.h"
#include "locks.h"
#include "mpath.h"
#include "resolve.h"
#include "sample.h"
#include "snapshot.h"
#include "stacks.h"
#include "history.h"
#include "peak.h"
#include "table.h"

static inline uint64_t addr_mix(uint64_t a)
{
    a ^= a >> 33;
    a *= 0xff51afd7ed558ccdULL;
    a ^= a >> 33;
    return a;
}

/* Every uthash key here is an address or a handle: a multiplicative mix is enough and much
 * cheaper than uthash's general-purpose default. */
#undef HASH_FUNCTION
#define HASH_FUNCTION(keyptr, keylen, hashv) ((hashv) = addr_hash(keyptr))

static inline unsigned addr_hash(const void *key)
{
    uint64_t a;
    memcpy(&a, key, sizeof a);
    return (unsigned)addr_mix(a);
}

VT_HIDDEN _Alignas(64) vt_state_t vt_state; /* its first line is the hot one (table.h) */
_Static_assert(offsetof(vt_state_t, c.nested_calls) + sizeof(uint64_t) <= 64,
               "what every allocation and free touches in vt_state is on its first line");
VT_HIDDEN VT_TLS int vt_hash_oom;

/* CUDA's code for out of memory, the same in the runtime and the driver. */
#define CUDA_OUT_OF_MEMORY 2

static int pending_ooms;

/* --- chunks and the arena -------------------------------------------------------------- */

/* One chunk made ahead, outside the lock. Read there at every event: a cache line of its own, as
 * vt_history_populated has (history.h). */
static struct {
    _Alignas(64) _Atomic(void *) chunk;
} spare;

/* A chunk: mapped, whole pages, where malloc would have added a page for its own header; its
 * pages are populated as it is mapped, one system call instead of a fault per page (the kernel
 * zeroes them: writing zeros over them again, as this did, cost 48 bytes of stores a record).
 * Never unmapped once in use (a fork's child leaks them too). */
static void *chunk_new(void)
{
    void *p = mmap(NULL, VT_CHUNK_BYTES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void vt_books_prepare(void)
{
    if (atomic_load_explicit(&spare.chunk, memory_order_relaxed))
        return;
    void *p = chunk_new(), *none = NULL;
    if (!p)
        return;
    if (!atomic_compare_exchange_strong(&spare.chunk, &none, p))
        munmap(p, VT_CHUNK_BYTES);
}

int vt_chunks_grow(vt_chunks *c, size_t size, uint32_t n)
{
    uint64_t per = VT_CHUNK_BYTES / size;
    while ((uint64_t)c->nchunks * per < n) {
        if (vt_grow(&c->chunk, &c->capchunks, (size_t)c->nchunks + 1, sizeof *c->chunk, 64))
            return -1;
        void *p = atomic_exchange(&spare.chunk, NULL);
        if (!p && !(p = chunk_new()))
            return -1;
        c->chunk[c->nchunks++] = p;
    }
    return 0;
}

/* Records [0, end) have been handed out; free ones are chained through their seq_low (their
 * id stays 0: no event of the history names them). */
static struct {
    vt_chunks c;
    uint32_t end;
    uint32_t free; /* the first free record's index + 1, 0 for none */
} A;

static inline vt_rec *rec_at(uint32_t i)
{
    return vt_chunk_at(&A.c, sizeof(vt_rec), i);
}

uint32_t vt_arena_end(void)
{
    return A.end;
}

vt_rec *vt_arena_at(uint32_t i)
{
    return rec_at(i);
}

/* A record past the last one made, its room reserved first: its index + 1, or 0 when memory
 * ran out. */
static __attribute__((noinline)) uint32_t rec_grow(void)
{
    if (A.end == UINT32_MAX - 1 || vt_chunks_reserve(&A.c, sizeof(vt_rec), A.end + 1))
        return 0;
    return ++A.end;
}

/* A free record's index + 1 (the last one freed first), or 0 when memory ran out: inline, as
 * the free list is what an allocation finds once the books are warm. */
static inline __attribute__((always_inline)) uint32_t rec_new(void)
{
    uint32_t i = A.free;
    if (__builtin_expect(i != 0, 1)) {
        A.free = rec_at(i - 1)->seq_low;
        return i;
    }
    return rec_grow();
}

/* Recycles record i, at r (rec_at(i): the caller has it). */
static void rec_free(vt_rec *r, uint32_t i, int keep_labels)
{
    if (vt_rec_labelled(r) && !keep_labels)
        vt_identity_forget_locked(r);
    *r = (vt_rec){.seq_low = A.free};
    A.free = i + 1;
}

/* --- eras ------------------------------------------------------------------------------ */

VT_HIDDEN vt_era vt_eras[VT_MAX_ERAS]; /* in untouched pages but for the few in use */
static uint32_t neras;

/* The latest era, and how far it reaches: the next birth is in it while the books' sequence
 * number and latest id stay below seq_last and id_last, the step and instance below step_end
 * and instance_end (none of them ever goes down) and its size below size_end (0 while there is
 * no era, or the latest is one of a larger size). */
static struct {
    int era;
    uint64_t size_end, seq_last, id_last, step_end, instance_end;
} reach;

_Static_assert(VT_MAX_STACKS < VT_REC_NO_SITE, "a site fits a record");
_Static_assert(VT_MPATH_MAX < VT_REC_MPATH_RECOMPUTED, "a module path id fits a record");

static inline uint64_t high(uint64_t v, int low_bits)
{
    return v & ~(((uint64_t)1 << low_bits) - 1);
}

static inline uint64_t low(uint64_t v, int low_bits)
{
    return v & (((uint64_t)1 << low_bits) - 1);
}

static uint64_t reach_end(uint64_t base, int low_bits)
{
    return base + ((uint64_t)1 << low_bits);
}

/* next_era's new era, or -1 when there is no room for another. */
static int new_era(uint64_t size)
{
    if (neras == VT_MAX_ERAS)
        return -1;
    vt_era *e = &vt_eras[neras];
    *e = (vt_era){.seq = high(vt_state.seq + 1, VT_REC_SEQ_BITS),
                  .id = high(vt_state.next_id + 1, VT_REC_ID_BITS),
                  .size = high(size, VT_REC_SIZE_BITS),
                  .step = (uint32_t)high(vt_state.step, VT_REC_STEP_BITS),
                  .instance = (uint32_t)high(vt_state.instance, VT_REC_INSTANCE_BITS)};
    reach.era = (int)neras;
    reach.size_end = e->size ? 0 : reach_end(0, VT_REC_SIZE_BITS);
    reach.seq_last = reach_end(e->seq, VT_REC_SEQ_BITS) - 1;
    reach.id_last = reach_end(e->id, VT_REC_ID_BITS) - 1;
    reach.step_end = reach_end(e->step, VT_REC_STEP_BITS);
    reach.instance_end = reach_end(e->instance, VT_REC_INSTANCE_BITS);
    return (int)neras++;
}

/* The era of the next birth, of `size` bytes: the latest when it holds its high bits, else a
 * new one; -1 when there is no room for another. */
static inline int next_era(uint64_t size)
{
    if (size < reach.size_end && vt_state.seq < reach.seq_last &&
        vt_state.next_id < reach.id_last && vt_state.step < reach.step_end &&
        vt_state.instance < reach.instance_end)
        return reach.era;
    return new_era(size);
}

/* --- the tables ------------------------------------------------------------------------ */

typedef struct {
    uint32_t hash, rec; /* rec: the record's index + 1; 0 for an empty slot */
} slot;

/* A key's first slot is its hash scaled to the capacity (a multiply and a shift), so that the
 * capacity need not be a power of two: growing by half, a million live allocations take 1.5M
 * slots (12 bytes each), where doubling past half full took 2M (16 bytes). */
typedef struct {
    slot *s;
    uint32_t cap, n;
    uint32_t most; /* the keys it takes before it grows (full_at) */
} tab;

typedef struct {
    tab cur, old; /* old: the slots being moved into cur (old.s NULL when none) */
    uint32_t at;  /* the next slot of old to move: empty or a cluster's first */
} books_index;

static books_index live_ix, vmm_ix, host_ix;

/* The device table's slots as of its latest growth, for a hint read without the lock: the
 * slot an address will use is fetched into the cache while the lock is being taken. A stale
 * pair of them only makes the hint useless: prefetching never faults. */
static _Atomic(slot *) hint_slots;
static _Atomic uint32_t hint_cap;

/* Slots moved per change of a growing table, at least: the old table (three quarters full at
 * most) is empty before the new one, half as big again, is three fifths full. */
#define MOVE_STEP 8
#define FIRST_SLOTS 1024

static inline uint32_t key_hash(uintptr_t key)
{
    return (uint32_t)(addr_mix(key) >> 32);
}

static inline uint32_t home(uint32_t hash, uint32_t cap)
{
    return (uint32_t)(((uint64_t)hash * cap) >> 32);
}

/* The slot after i in slots of a table of cap, around its end. */
static inline uint32_t next_of(uint32_t i, uint32_t cap)
{
    return i + 1 == cap ? 0 : i + 1;
}

static inline uint32_t next(const tab *t, uint32_t i)
{
    return next_of(i, t->cap);
}

/* The keys a table of cap slots takes before it grows: three quarters of its slots, or half
 * for a table under SMALL_SLOTS (512 KiB), whose memory matters less than the shorter clusters
 * a free shifts back. */
#define SMALL_SLOTS ((uint64_t)1 << 16)
static uint32_t full_at(uint64_t cap)
{
    return (uint32_t)(cap < SMALL_SLOTS ? cap / 2 : cap / 4 * 3);
}

/* Slots as memory maps past 2 MiB, in huge pages where the system allows: a lookup in a table
 * of a million allocations is then a cache miss, not a TLB miss too. Not where huge pages are
 * slow to get (vt_huge_pages_slow): their first touch is under the books' lock, and a new huge
 * page took 4.5 ms there. */
#define HUGE_SLOTS (((size_t)2 << 20) / sizeof(slot))

static slot *slots_new(uint64_t cap)
{
    if (cap < HUGE_SLOTS)
        return calloc(cap, sizeof(slot));
    void *p =
        mmap(NULL, cap * sizeof(slot), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    madvise(p, cap * sizeof(slot),
            atomic_load_explicit(&vt_huge_pages_slow, memory_order_relaxed) ? MADV_NOHUGEPAGE
                                                                            : MADV_HUGEPAGE);
    return p;
}

static void slots_free(tab *t)
{
    if (t->cap < HUGE_SLOTS)
        free(t->s);
    else
        munmap(t->s, (size_t)t->cap * sizeof(slot));
    *t = (tab){0};
}

/* h: the key's hash. */
static inline void prefetch_slot(uint32_t h)
{
    slot *s = atomic_load_explicit(&hint_slots, memory_order_relaxed);
    if (s)
        __builtin_prefetch(&s[home(h, atomic_load_explicit(&hint_cap, memory_order_relaxed))]);
}

/* The slot of t that holds key, or -1; its record in *at. */
static inline int64_t probe(const tab *t, uint32_t h, uintptr_t key, vt_rec **at)
{
    if (!t->n)
        return -1;
    for (uint32_t i = home(h, t->cap);; i = next(t, i)) {
        slot e = t->s[i];
        if (!e.rec)
            return -1;
        if (e.hash == h && (*at = rec_at(e.rec - 1))->key == key)
            return i;
    }
}

/* Puts e in the first empty slot from its home, in slots s of a table of cap. */
static inline void put_in(slot *s, uint32_t cap, slot e)
{
    uint32_t i = home(e.hash, cap);
    while (s[i].rec)
        i = next_of(i, cap);
    s[i] = e;
}

static inline void put(tab *t, slot e)
{
    put_in(t->s, t->cap, e);
    t->n++;
}

/* How far slot b is past slot a, going forward around the table. */
static inline uint32_t distance(const tab *t, uint32_t a, uint32_t b)
{
    return b >= a ? b - a : b + t->cap - a;
}

/* Empties slot i, moving back the entries after it that may fill it. Inline: every free does it. */
static inline __attribute__((always_inline)) void remove_at(tab *t, uint32_t i)
{
    for (uint32_t j = next(t, i); t->s[j].rec; j = next(t, j)) {
        if (distance(t, home(t->s[j].hash, t->cap), j) >= distance(t, i, j)) {
            t->s[i] = t->s[j];
            i = j;
        }
    }
    t->s[i] = (slot){0, 0};
    t->n--;
}

/* Moves MOVE_STEP slots of the old table or more, ending on an empty one: what is left of it is
 * then whole clusters, which lookups and backward shifts there need. */
static void move_some(books_index *ix)
{
    /* in locals: a slot written could be any of the tables' counts, as far as the compiler
     * knows, and each would be read again after every move */
    slot *from = ix->old.s, *to = ix->cur.s;
    uint32_t at = ix->at, left = ix->old.n, from_cap = ix->old.cap, to_cap = ix->cur.cap;
    uint32_t moved = 0;
    for (int k = 0; k < MOVE_STEP || from[at].rec; k++) {
        if (from[at].rec) {
            put_in(to, to_cap, from[at]);
            from[at] = (slot){0, 0};
            moved++;
            if (!--left)
                break;
        }
        at = next_of(at, from_cap);
    }
    ix->cur.n += moved;
    ix->old.n = left;
    ix->at = at;
    if (!left)
        slots_free(&ix->old);
}

/* A table half as big again takes the insertions; 0, or -1 when memory ran out. */
static int grow(books_index *ix)
{
    uint64_t cap = ix->cur.s ? (uint64_t)ix->cur.cap * 3 / 2 : FIRST_SLOTS;
    slot *s = cap <= (uint64_t)1 << 31 ? slots_new(cap) : NULL;
    if (!s)
        return -1;
    if (ix->cur.n) {
        ix->old = ix->cur;
        ix->at = 0;
        while (ix->old.s[ix->at].rec)
            ix->at++;
    } else if (ix->cur.s) {
        slots_free(&ix->cur);
    }
    ix->cur = (tab){.s = s, .cap = (uint32_t)cap, .most = full_at(cap)};
    if (ix == &live_ix) {
        atomic_store_explicit(&hint_slots, s, memory_order_relaxed);
        atomic_store_explicit(&hint_cap, ix->cur.cap, memory_order_relaxed);
    }
    return 0;
}

/* The record of key, or NULL. */
static vt_rec *index_find(const books_index *ix, uintptr_t key)
{
    uint32_t h = key_hash(key);
    vt_rec *r = NULL;
    if (probe(&ix->cur, h, key, &r) >= 0 || (ix->old.s && probe(&ix->old, h, key, &r) >= 0))
        return r;
    return NULL;
}

/* Adds record `rec` (index + 1) under a key not in the table: 0, or -1 when it is full and
 * cannot grow. */
static int index_put(books_index *ix, uintptr_t key, uint32_t rec)
{
    uint64_t cap = ix->cur.s ? ix->cur.cap : 0;
    if (ix->old.s)
        move_some(ix);
    else if (ix->cur.n >= ix->cur.most && grow(ix) && 16 * ((uint64_t)ix->cur.n + 1) > 15 * cap)
        return -1;
    put(&ix->cur, (slot){key_hash(key), rec});
    return 0;
}

/* For a key of hash h about to be added to ix: 0 when the key is in neither of its tables and
 * the new one has room for it without growing; then *gap is the empty slot put() would give it.
 * One probe of each table, where looking for a stale entry and then putting took three while a
 * table grows; that change's share of moving the old slots is done here, once (it was done
 * twice, for the look and for the put), and the old slot's cache miss overlaps it. */
static inline __attribute__((always_inline)) int index_gap(books_index *ix, uintptr_t key,
                                                           uint32_t h, uint32_t *gap)
{
    tab *t = &ix->cur;
    if (ix->old.s) {
        __builtin_prefetch(&ix->old.s[home(h, ix->old.cap)]);
        move_some(ix);
        vt_rec *r = NULL;
        if (ix->old.s && probe(&ix->old, h, key, &r) >= 0)
            return -1;
    } else if (t->n >= t->most) {
        return -1;
    }
    uint32_t i = home(h, t->cap);
    for (; t->s[i].rec; i = next(t, i))
        if (t->s[i].hash == h && rec_at(t->s[i].rec - 1)->key == key)
            return -1;
    *gap = i;
    return 0;
}

/* Takes key, of hash h, out of the table: its record's index + 1 (the record in *at), or 0 when
 * it was not there. */
static inline __attribute__((always_inline)) uint32_t
index_take_hashed(books_index *ix, uintptr_t key, uint32_t h, vt_rec **at)
{
    uint32_t rec = 0;
    int64_t i = probe(&ix->cur, h, key, at);
    if (i >= 0) {
        rec = ix->cur.s[i].rec;
        remove_at(&ix->cur, (uint32_t)i);
    } else if (ix->old.s && (i = probe(&ix->old, h, key, at)) >= 0) {
        rec = ix->old.s[i].rec;
        remove_at(&ix->old, (uint32_t)i);
        if (!ix->old.n)
            slots_free(&ix->old);
    }
    if (ix->old.s)
        move_some(ix);
    return rec;
}

static uint32_t index_take(books_index *ix, uintptr_t key, vt_rec **at)
{
    return index_take_hashed(ix, key, key_hash(key), at);
}

static uint64_t index_count(const books_index *ix)
{
    return (uint64_t)ix->cur.n + ix->old.n;
}

uint64_t vt_books_records(void)
{
    return index_count(&live_ix) + index_count(&vmm_ix);
}

/* --- VMM allocations' extras ------------------------------------------------------------ */

/* What a VMM allocation has and others do not, by handle. */
typedef struct {
    uintptr_t handle;
    uintptr_t address; /* the first mapped address, 0 until mapped */
    int32_t refs, maps;
    UT_hash_handle hh;
} vmm_extra;

static vmm_extra *extras;

static vmm_extra *extra_of(uintptr_t handle)
{
    vmm_extra *e = NULL;
    HASH_FIND(hh, extras, &handle, sizeof handle, e);
    return e;
}

uintptr_t vt_rec_vmm_address(const vt_rec *r)
{
    const vmm_extra *e = extra_of(r->key);
    return e ? e->address : 0;
}

/* A VMM mapping: the range [addr, addr+size) of a reserved address space is backed by the
 * physical allocation `handle`. */
struct vt_vmap {
    uintptr_t addr;
    uint64_t size;
    uintptr_t handle;
    UT_hash_handle hh;
};

/* vt_lock, inline where an allocation or a free is recorded at once. */
static inline __attribute__((always_inline)) void lock_books(void)
{
    vt_lock_take(VT_LOCK_STATE);
    vt_state.c.nested_calls += vt_nested_pending;
    vt_nested_pending = 0;
    if (atomic_load_explicit(&vt_batch_rings.n, memory_order_relaxed))
        vt_batch_apply_locked(); /* whoever reads or changes the books sees every event first */
}

void vt_lock(void)
{
    lock_books();
}

void vt_unlock(void)
{
    vt_lock_give(VT_LOCK_STATE);
}

static int in_phase(uint8_t phase)
{
    return phase == VT_PHASE_FORWARD || phase == VT_PHASE_BACKWARD || phase == VT_PHASE_OPTIMIZER;
}

vt_mark vt_mark_at_locked(uint64_t t)
{
    vt_mark m = {.seq = ++vt_state.seq,
                 .time = vt_time_locked(t),
                 .step = vt_state.step,
                 .instance = vt_state.instance,
                 .phase = vt_state.phase};
    return m;
}

vt_mark vt_mark_now_locked(void)
{
    return vt_mark_at_locked(vt_clock());
}

/* account_alloc's VT_FIRST_USE and VT_NEW_PEAK, then what the sampling that follows outside the
 * lock is to do (sampling_locked). */
enum { VT_FIRST_USE = 1, VT_NEW_PEAK = 2, VT_ASK_INFO = 4, VT_PEAK_SAMPLE = 8 };

static inline __attribute__((always_inline)) int account_alloc(uint32_t rec, const vt_birth *b)
{
    vt_device *d = &vt_state.dev[b->device];
    int flags = 0;
    if (!d->used) {
        d->used = 1;
        if (b->device >= vt_state.devices_used)
            vt_state.devices_used = b->device + 1;
        d->last_used = d->used_at_peak = -1;
        d->last_rss = d->rss_at_peak = -1;
        d->last_workers = d->workers_at_peak = -1;
        flags |= VT_FIRST_USE;
    }
    d->live += b->size;
    d->allocs++;
    d->pool_allocs += b->kind == VT_KIND_POOL;
    d->last_alloc_seq = b->birth.seq;
    vt_state.c.allocs++;
    vt_state.made_device_alloc = 1;
    if (vt_peak_note_alloc(d, &b->birth))
        flags |= VT_NEW_PEAK;
    vt_history_alloc_locked(rec_at(rec - 1), rec, b, flags & VT_NEW_PEAK);
    if (in_phase(vt_state.phase) && d->live > vt_state.open.live_max[b->device])
        vt_state.open.live_max[b->device] = d->live;
    if (pending_ooms) {
        for (int i = 0; i < vt_state.nooms; i++) {
            vt_oom *o = &vt_state.ooms[i];
            if (!o->retry_succeeded && o->device == b->device && b->size >= o->size) {
                o->retry_succeeded = 1;
                pending_ooms--;
            }
        }
    }
    return flags;
}

int vt_copied_add_locked(vt_copied *c, const vt_rec *r, uintptr_t address, const vt_mark *death)
{
    /* Deaths before a copy in steps began can outnumber those on the books when its room was
     * made: their room doubles when they fill it (rare). */
    if (c->n == c->cap ||
        (death && vt_grow(&c->deaths, &c->capdeaths, c->ndeaths + 1, sizeof *c->deaths, 64))) {
        c->full = 1;
        return 0;
    }
    if (!vt_identity_freeze_rec_locked(c->labels, r)) {
        vt_identity_thaw(c->labels); /* out of memory: a file without labels */
        c->labels = NULL;
    }
    if (death)
        c->deaths[c->ndeaths++] = (vt_copied_death){c->n, *death};
    c->recs[c->n] = *r;
    c->recs[c->n++].key = address;
    return 1;
}

/* Record `rec` (index + 1) dies while a copy in steps runs: one for a post-mortem that has not
 * reached it takes it now, as it was at the failure. */
static void freezing_free(uint32_t rec, const vt_rec *r)
{
    vt_copy_sink *s = vt_state.sink;
    if (s && rec - 1 >= vt_state.freeze_below && vt_rec_seq(r) <= s->seq &&
        vt_rec_device(r) == s->device)
        s->added += vt_copied_add_locked(s->to, r, vt_rec_address(r), NULL);
}

/* Record `rec` (index + 1), at r, out of its table, leaves the live set at clock reading `now`:
 * the peak keeps a copy if it was live then; the record is recycled. */
static inline __attribute__((always_inline)) void account_free(uint32_t rec, vt_rec *r,
                                                               uint64_t now)
{
    vt_device *d = &vt_state.dev[vt_rec_device(r)];
    d->live -= vt_rec_size(r);
    vt_state.c.frees++;
    vt_mark death = vt_mark_at_locked(now);
    vt_history_free_locked(r, &death);
    uint32_t copied = 0;
    if (vt_state.freezing) {
        copied = rec - 1 < vt_state.freeze_below ? vt_state.freeze_gen : 0;
        freezing_free(rec, r);
    }
    rec_free(r, rec - 1, vt_peak_note_free(d, r, &death, copied));
}

vt_rec *vt_live_find_locked(uintptr_t addr)
{
    return addr ? index_find(&live_ix, addr) : NULL;
}

/* Record `rec` (index + 1) is born at clock reading `now`, in `era` (next_era's, taken since
 * nothing else happened), in module path `module` (vt_mpath_birth's); *b is what the books and
 * the history read of it. */
static inline __attribute__((always_inline)) void born(uint32_t rec, int era, vt_birth *b,
                                                       uintptr_t key, vt_api api, vt_kind kind,
                                                       int device, uint64_t size, uint32_t site,
                                                       uint32_t module, uint64_t now)
{
    uint64_t id = ++vt_state.next_id;
    vt_mark m = vt_mark_at_locked(now);
    uint32_t mpath = vt_rec_mpath_pack(module);
    vt_rec *r = rec_at(rec - 1);
    *r = (vt_rec){.key = key,
                  .time = m.time,
                  .seq_low = (uint32_t)m.seq,
                  .id_low = (uint32_t)id,
                  .size_era = low(size, VT_REC_SIZE_BITS) | (uint64_t)era << VT_REC_AT_ERA,
                  .when = low(m.step, VT_REC_STEP_BITS) |
                          low(m.instance, VT_REC_INSTANCE_BITS) << VT_REC_AT_INSTANCE |
                          (uint64_t)(site == VT_NO_SITE ? VT_REC_NO_SITE : site) << VT_REC_AT_SITE |
                          (uint64_t)m.phase << VT_REC_AT_PHASE | (uint64_t)kind << VT_REC_AT_KIND,
                  .what = (uint64_t)mpath << VT_REC_AT_MPATH |
                          (uint64_t)device << VT_REC_AT_DEVICE | (uint64_t)api << VT_REC_AT_API};
    *b = (vt_birth){.id = id,
                    .size = size,
                    .birth = m,
                    .device = (int16_t)device,
                    .api = (uint8_t)api,
                    .kind = (uint8_t)kind};
}

/* Before the lock, for an allocation to be born: its stack, and its module (vt_mpath_birth reads
 * it under the lock). */
static inline uint32_t birth_site_here(void)
{
    vt_mpath_look();
    return vt_stack_here();
}

/* A new record in `ix` (its index + 1) born as *b at clock reading `now`, or 0 (counted as
 * dropped) when memory ran out. */
static uint32_t insert(books_index *ix, vt_birth *b, uintptr_t key, vt_api api, vt_kind kind,
                       int device, uint64_t size, uint32_t site, uint32_t module, uint64_t now)
{
    int era = next_era(size);
    uint32_t rec = key && era >= 0 ? rec_new() : 0;
    if (!rec || index_put(ix, key, rec)) {
        if (rec)
            rec_free(rec_at(rec - 1), rec - 1, 0);
        vt_state.c.dropped++;
        return 0;
    }
    born(rec, era, b, key, api, kind, device, size, site, module, now);
    return rec;
}

/* Before the lock (it says so on stderr): whether the device's ordinal is one recorded. */
static int device_in_range(int device)
{
    if (device >= 0 && device < VT_MAX_DEVICES)
        return 1;
    if (device < 0)
        vt_warn_once("the driver could not say which device an allocation is on; it is not "
                     "counted");
    else
        vt_warn_once("device ordinal %d is beyond what vramtap records (%d); its memory is not "
                     "counted",
                     device, VT_MAX_DEVICES);
    return 0;
}

/* With the lock: counts an allocation on a device beyond the bound. */
static int device_ok(int in_range)
{
    if (!in_range) {
        vt_state.c.dropped++;
        vt_state.left_out.devices++;
    }
    return in_range;
}

/* The key came back without a release vramtap saw (freed through a route it does not hook, or
 * a handle value the driver reused): the old allocation is gone by clock reading `now`. */
static void drop_stale(books_index *ix, uintptr_t key, uint64_t now)
{
    vt_rec *r = NULL;
    uint32_t rec = index_take(ix, key, &r);
    if (rec)
        account_free(rec, r, now);
}

/* What every allocating thread reads to know whether to buffer its event (batch.h): not on a
 * line the books' holder writes. */
static struct {
    /* the flag that says events are buffered now: vt_lock_passed's (VRAMTAP_THREAD_BUFFERS
     * unset), `always` (1), NULL (0) */
    _Alignas(64) atomic_int *now;
    atomic_int always;
    /* the devices whose facts the driver gave, or was asked for often enough: until then each
     * allocation on one is recorded at once, so that it asks for them at once */
    atomic_uchar settled[VT_MAX_DEVICES];
} buffers = {.always = 1};

void vt_buffers_init(void)
{
    buffers.now = vt_cfg.thread_buffers == VT_BUFFERS_AUTO     ? &vt_lock_passed.of[VT_LOCK_STATE]
                  : vt_cfg.thread_buffers == VT_BUFFERS_ALWAYS ? &buffers.always
                                                               : NULL;
}

/* VT_PEAK_SAMPLE_GAP_S in ticks; 0 until the clock's rate is known. */
static uint64_t peak_gap_ticks;

/* With the lock, after account_alloc's `flags` for an allocation born at `now`, on d:
 * the device's facts are asked for at its first use and, while the driver cannot give them
 * (not initialised yet for a driver-API program that allocates before cuInit's effects reach
 * this thread), at the next few; a new peak is sampled as sample.h says. */
static inline __attribute__((always_inline)) int sampling_locked(vt_device *d, int flags,
                                                                 uint64_t now)
{
    int out = 0;
    if (((flags & VT_FIRST_USE) || !d->name[0]) && d->info_attempts < 4) {
        d->info_attempts++;
        out |= VT_ASK_INFO;
    } else if (!d->info_settled) {
        d->info_settled = 1;
        atomic_store_explicit(&buffers.settled[d - vt_state.dev], 1, memory_order_relaxed);
    }
    if (!(flags & VT_NEW_PEAK))
        return out;
    if (d->peak_samples >= VT_PEAK_SAMPLES_FREE) {
        if (!peak_gap_ticks)
            peak_gap_ticks = (uint64_t)((double)vt_ticks_per_second() * VT_PEAK_SAMPLE_GAP_S);
        if (peak_gap_ticks && now - d->last_peak_sample < peak_gap_ticks)
            return out;
    }
    d->last_peak_sample = now;
    d->peak_samples++;
    return out | VT_PEAK_SAMPLE;
}

/* A device allocation at addr, of hash h, at clock reading `now`: drop_stale, then insert, in
 * one probe of the index where it has room (index_gap). */
static inline __attribute__((always_inline)) uint32_t
insert_live(vt_birth *b, uintptr_t addr, uint32_t h, vt_api api, vt_kind kind, int device,
            uint64_t size, uint32_t site, uint32_t module, uint64_t now)
{
    uint32_t gap, rec;
    if (!addr || index_gap(&live_ix, addr, h, &gap)) {
        drop_stale(&live_ix, addr, now);
        return insert(&live_ix, b, addr, api, kind, device, size, site, module, now);
    }
    int era = next_era(size);
    if (era < 0 || !(rec = rec_new())) {
        vt_state.c.dropped++;
        return 0;
    }
    live_ix.cur.s[gap] = (slot){h, rec};
    live_ix.cur.n++;
    born(rec, era, b, addr, api, kind, device, size, site, module, now);
    return rec;
}

void vt_live_prefetch(uintptr_t addr)
{
    prefetch_slot(key_hash(addr));
}

/* An allocation at addr (hash h) on a device the books record, recorded with the lock held, read
 * from the clock at `now`: the samples it asks for (sampling_locked's flags). */
static inline __attribute__((always_inline)) int alloc_locked(uintptr_t addr, uint32_t h,
                                                              vt_api api, vt_kind kind, int device,
                                                              uint64_t size, uint32_t site,
                                                              uint32_t module, uint64_t now)
{
    vt_birth b;
    uint32_t rec = insert_live(&b, addr, h, api, kind, device, size, site, module, now);
    return rec ? sampling_locked(&vt_state.dev[device], account_alloc(rec, &b), b.birth.time) : 0;
}

/* A free of addr (hash h) recorded with the lock held, read from the clock at `now`. */
static inline __attribute__((always_inline)) void free_locked(uintptr_t addr, uint32_t h,
                                                              uint64_t now)
{
    vt_rec *r = NULL;
    uint32_t rec = addr ? index_take_hashed(&live_ix, addr, h, &r) : 0;
    if (rec)
        account_free(rec, r, now);
    else
        vt_state.c.unknown_frees++;
}

/* The driver's figures a new peak or a device's first use asks for, found while buffered
 * events were applied (lock held): taken after the lock, by the next thread that buffers an
 * event. */
static uint8_t samples_due[VT_MAX_DEVICES];
static struct {
    _Alignas(64) atomic_int any; /* read at every buffered event: a line of its own */
} samples_waiting;

void vt_event_apply_locked(const vt_event *e)
{
    vt_state.c.nested_calls += e->nested;
    if (e->free) {
        free_locked(e->addr, e->hash, e->now);
        return;
    }
    int flags = alloc_locked(e->addr, e->hash, e->api, e->kind, e->device, e->size, e->site,
                             e->mpath, e->now);
    if (flags) {
        samples_due[e->device] |= (uint8_t)flags;
        atomic_store_explicit(&samples_waiting.any, 1, memory_order_relaxed);
    }
}

/* Whether an event goes to the thread's buffer (an allocation: on `device`, in range, -1 for a
 * free). */
static inline int buffering(int device)
{
    atomic_int *now = buffers.now;
    if (!now || !atomic_load_explicit(now, memory_order_relaxed))
        return 0;
    return device < 0 || atomic_load_explicit(&buffers.settled[device], memory_order_relaxed);
}

/* Takes the samples that applied events asked for (outside the lock). */
static __attribute__((noinline)) void take_due_samples(void)
{
    uint8_t due[VT_MAX_DEVICES];
    vt_lock();
    memcpy(due, samples_due, sizeof due);
    memset(samples_due, 0, sizeof samples_due);
    atomic_store_explicit(&samples_waiting.any, 0, memory_order_relaxed);
    vt_unlock();
    for (int d = 0; d < VT_MAX_DEVICES; d++)
        if (due[d])
            vt_sample_after_alloc(d, due[d] & VT_ASK_INFO, due[d] & VT_PEAK_SAMPLE);
}

/* After buffering an event (`full`: vt_batch_add's 1): applies a full buffer, and takes the
 * samples applied events asked for. */
static void after_buffering(int full)
{
    if (full) {
        vt_lock();
        vt_unlock();
    }
    if (atomic_load_explicit(&samples_waiting.any, memory_order_relaxed))
        take_due_samples();
}

/* Buffers event e for the calling thread (its clock reading and the thread's nested calls
 * taken here): 0, or -1 when the thread has no buffer. Kept out of the recording functions:
 * what they run when nothing is buffered stays as short as it was. */
static __attribute__((noinline)) int buffer(vt_event *e)
{
    e->nested = (uint32_t)vt_nested_pending;
    int buffered = vt_batch_add(e);
    if (buffered < 0)
        return -1;
    vt_nested_pending = 0;
    after_buffering(buffered);
    return 0;
}

/* An allocation on a device in range, buffered, or recorded at once with its module path as
 * buffering took it. */
static __attribute__((noinline)) void alloc_buffered(vt_event *e)
{
    e->mpath = vt_mpath_birth_unlocked();
    if (!buffer(e))
        return;
    e->nested = 0; /* vt_lock counts them */
    vt_lock();
    e->now = vt_clock();
    vt_event_apply_locked(e);
    vt_unlock();
    after_buffering(0);
}

void vt_note_alloc(vt_api api, vt_kind kind, int device, uintptr_t addr, uint64_t size)
{
    uint32_t h = key_hash(addr);
    vt_coverage_interposed(api, size);
    uint32_t site = birth_site_here();
    int in_range = device_in_range(device);
    vt_history_prepare();
    vt_books_prepare();
    if (in_range && buffering(device)) {
        alloc_buffered(&(vt_event){.addr = addr,
                                   .size = size,
                                   .hash = h,
                                   .site = site,
                                   .device = (int16_t)device,
                                   .api = (uint8_t)api,
                                   .kind = (uint8_t)kind});
        return;
    }
    uint64_t now = vt_clock();
    lock_books();
    int flags = device_ok(in_range)
                    ? alloc_locked(addr, h, api, kind, device, size, site, vt_mpath_birth(), now)
                    : 0;
    vt_unlock();
    if (flags)
        vt_sample_after_alloc(device, flags & VT_ASK_INFO, flags & VT_PEAK_SAMPLE);
    /* what buffered events asked for, when the buffering has stopped since */
    if (atomic_load_explicit(&samples_waiting.any, memory_order_relaxed))
        take_due_samples();
}

void vt_note_free(uintptr_t addr)
{
    uint32_t h = key_hash(addr);
    prefetch_slot(h);
    vt_history_prepare();
    vt_books_prepare(); /* the peak may keep the record */
    if (buffering(-1) && !buffer(&(vt_event){.addr = addr, .hash = h, .free = 1}))
        return;
    uint64_t now = vt_clock();
    lock_books();
    free_locked(addr, h, now);
    vt_unlock();
}

/* Takes addr's pinned host allocation off the books: 1 when there was one. */
static int host_drop(uintptr_t addr)
{
    vt_rec *r = NULL;
    uint32_t rec = addr ? index_take(&host_ix, addr, &r) : 0;
    if (rec) {
        vt_state.hostmem.live -= vt_rec_size(r);
        rec_free(r, rec - 1, 0);
    }
    return rec != 0;
}

void vt_note_host_alloc(vt_api api, uintptr_t addr, uint64_t size)
{
    vt_coverage_interposed(api, size);
    uint32_t site = birth_site_here();
    vt_books_prepare();
    uint64_t now = vt_clock();
    vt_lock();
    host_drop(addr);
    vt_birth b;
    uint32_t rec =
        insert(&host_ix, &b, addr, api, VT_KIND_HOST, 0, size, site, vt_mpath_birth(), now);
    if (rec) {
        vt_state.c.host_allocs++;
        vt_state.hostmem.allocs++;
        vt_state.hostmem.live += size;
        if (vt_state.hostmem.live > vt_state.hostmem.peak) {
            vt_state.hostmem.peak = vt_state.hostmem.live;
            vt_state.hostmem.peak_time = b.birth.time;
        }
    }
    vt_unlock();
}

void vt_note_host_free(uintptr_t addr)
{
    vt_lock();
    if (host_drop(addr))
        vt_state.c.host_frees++;
    else
        vt_state.c.unknown_frees++;
    vt_unlock();
}

void vt_note_fail(vt_api api, int device, uint64_t size, int error, int is_oom)
{
    uint32_t site = VT_NO_SITE;
    int64_t free_bytes = -1, total_bytes = -1;
    if (is_oom) {
        site = vt_stack_here();
        int capture = vt_capture_relax();
        vt_query_meminfo(&free_bytes, &total_bytes);
        vt_capture_restore(capture);
    }
    int post_mortem = 0;
    vt_lock();
    vt_state.c.failed_calls++;
    if (is_oom) {
        vt_state.c.oom_calls++;
        if (vt_state.nooms < VT_MAX_OOMS) {
            vt_mark m = vt_mark_now_locked();
            if (device >= 0 && device < VT_MAX_DEVICES)
                vt_state.dev[device].last_oom_seq = m.seq;
            vt_oom *o = &vt_state.ooms[vt_state.nooms];
            *o = (vt_oom){.n = vt_state.nooms + 1,
                          .time = m.time,
                          .device = device,
                          .size = size,
                          .api = (uint8_t)api,
                          .phase = m.phase,
                          .step = m.step,
                          .site = site,
                          .error = error,
                          .free_bytes = free_bytes,
                          .total_bytes = total_bytes};
            vt_state.nooms++;
            pending_ooms++;
            post_mortem = o->n <= vt_cfg.oom_max ? o->n : 0;
        } else {
            vt_state.left_out.oom_events++;
        }
    }
    vt_unlock();
    if (is_oom)
        vt_sample_oom(device);
    /* The process may never reach exit: the post-mortem goes to disk now. */
    if (post_mortem)
        vt_snapshot_write_oom(post_mortem);
}

int vt_note_framework_oom(int device, uint64_t size)
{
    if (device < 0 || device >= VT_MAX_DEVICES)
        return 0;
    vt_lock();
    const vt_device *d = &vt_state.dev[device];
    int seen = d->last_oom_seq && d->last_oom_seq > d->last_alloc_seq;
    vt_unlock();
    if (seen)
        return 0;
    vt_note_fail(VT_API_framework, device, size, CUDA_OUT_OF_MEMORY, 1);
    return 1;
}

VT_EXPORT int vramtap_note_oom(unsigned long long size, int device)
{
    return vt_cfg.disabled ? 0 : vt_note_framework_oom(device, size);
}

/* VMM: physical bytes count from cuMemCreate until every reference is released and every
 * mapping is gone, as the driver frees them. */
static void vmm_drop(vmm_extra *e)
{
    vt_rec *r = NULL;
    uint32_t rec = index_take(&vmm_ix, e->handle, &r);
    if (rec)
        account_free(rec, r, vt_clock());
    HASH_DEL(extras, e);
    free(e);
}

/* 1 when e is in the table now (a failed expansion of uthash's buckets still adds it). */
static int extra_add(vmm_extra *e, uintptr_t handle)
{
    *e = (vmm_extra){.handle = handle, .refs = 1};
    vt_hash_oom = 0;
    HASH_ADD(hh, extras, handle, sizeof e->handle, e);
    return extra_of(handle) == e;
}

static void vmm_maybe_free(vmm_extra *e)
{
    if (e->refs <= 0 && e->maps <= 0)
        vmm_drop(e);
}

void vt_note_vmm_create(uintptr_t handle, int device, uint64_t size)
{
    vt_coverage_interposed(VT_API_cuMemCreate, size);
    uint32_t site = birth_site_here();
    int in_range = device_in_range(device);
    vmm_extra *e = malloc(sizeof *e);
    vt_history_prepare();
    vt_books_prepare();
    vt_lock();
    vt_state.c.vmm_creates++;
    if (device_ok(in_range) && handle) {
        vmm_extra *stale = extra_of(handle);
        if (stale)
            vmm_drop(stale);
        uint32_t rec = 0;
        vt_birth b;
        if (e && extra_add(e, handle)) {
            if (!(rec = insert(&vmm_ix, &b, handle, VT_API_cuMemCreate, VT_KIND_VMM, device, size,
                               site, vt_mpath_birth(), vt_clock())))
                HASH_DEL(extras, e);
        } else {
            vt_state.c.dropped++;
        }
        if (rec)
            account_alloc(rec, &b);
        else
            free(e);
    } else {
        free(e);
    }
    vt_unlock();
}

void vt_note_vmm_retain(uintptr_t handle)
{
    vt_lock();
    vmm_extra *e = extra_of(handle);
    if (e)
        e->refs++;
    vt_unlock();
}

void vt_note_vmm_release(uintptr_t handle)
{
    vt_lock();
    vt_state.c.vmm_releases++;
    vmm_extra *e = extra_of(handle);
    if (e) {
        e->refs--;
        vmm_maybe_free(e);
    } else {
        vt_state.c.unknown_frees++;
    }
    vt_unlock();
}

static struct vt_vmap vmap_anchor;

void vt_note_vmm_map(uintptr_t addr, uint64_t size, uintptr_t handle)
{
    vt_lock();
    vt_state.c.vmm_maps++;
    vmm_extra *e = extra_of(handle);
    /* A handle vramtap did not create (imported from another process) maps memory that is
     * not this process's: nothing to count. */
    if (e) {
        struct vt_vmap *m = malloc(sizeof *m);
        if (m) {
            *m = (struct vt_vmap){.addr = addr, .size = size, .handle = handle};
            /* an anchor, key 0, keeps uthash from freeing the table whenever it empties */
            if (!vt_state.vmaps) {
                memset(&vmap_anchor, 0, sizeof vmap_anchor);
                HASH_ADD(hh, vt_state.vmaps, addr, sizeof vmap_anchor.addr, &vmap_anchor);
            }
            vt_hash_oom = 0;
            HASH_ADD(hh, vt_state.vmaps, addr, sizeof m->addr, m);
            if (vt_hash_oom) {
                free(m);
                m = NULL;
            }
        }
        if (m) {
            e->maps++;
            if (!e->address)
                e->address = addr;
        } else {
            vt_state.c.dropped++;
        }
    }
    vt_unlock();
}

/* One cuMemUnmap may cover several adjacent mappings. */
void vt_note_vmm_unmap(uintptr_t addr, uint64_t size)
{
    vt_lock();
    vt_state.c.vmm_unmaps++;
    uintptr_t cur = addr;
    int found = 0;
    while (cur && cur < addr + size) {
        struct vt_vmap *m;
        HASH_FIND(hh, vt_state.vmaps, &cur, sizeof cur, m);
        if (!m)
            break;
        found = 1;
        HASH_DEL(vt_state.vmaps, m);
        cur += m->size ? m->size : 1;
        vmm_extra *e = extra_of(m->handle);
        free(m);
        if (e) {
            e->maps--;
            vmm_maybe_free(e);
        }
    }
    if (!found)
        vt_state.c.unknown_frees++;
    vt_unlock();
}

void vt_note_pool(int device, uintptr_t pool)
{
    if (device < 0 || device >= VT_MAX_DEVICES || !pool)
        return;
    vt_lock();
    vt_device *d = &vt_state.dev[device];
    int known = 0;
    for (int i = 0; i < d->npools; i++)
        known |= d->pools[i] == pool;
    if (!known && d->npools < VT_MAX_POOLS)
        d->pools[d->npools++] = pool;
    else if (!known)
        vt_state.left_out.pools++;
    vt_unlock();
}

/* Samplers reading pools they listed: a destroyed pool waits for them before it goes. */
static atomic_int pool_readers;

int vt_pools_listed(int device, uintptr_t *out, int max)
{
    vt_lock();
    const vt_device *d = &vt_state.dev[device];
    int n = d->npools < max ? d->npools : max;
    memcpy(out, d->pools, (size_t)n * sizeof *out);
    atomic_fetch_add(&pool_readers, 1);
    vt_unlock();
    return n;
}

void vt_pools_read(void)
{
    atomic_fetch_sub(&pool_readers, 1);
}

void vt_note_pool_destroy(uintptr_t pool)
{
    vt_lock();
    for (int dev = 0; dev < VT_MAX_DEVICES; dev++) {
        vt_device *d = &vt_state.dev[dev];
        for (int i = 0; i < d->npools; i++)
            if (d->pools[i] == pool)
                d->pools[i--] = d->pools[--d->npools];
    }
    vt_unlock();
    while (atomic_load(&pool_readers))
        sched_yield();
}

void vt_span_open_locked(uint8_t phase, uint64_t now)
{
    vt_span *s = &vt_state.open;
    memset(s, 0, sizeof *s);
    s->instance = vt_state.instance;
    s->phase = phase;
    s->step = vt_state.step;
    s->start = vt_time_locked(now);
    s->end = 0;
    for (int d = 0; d < vt_state.devices_used; d++)
        s->live_start[d] = s->live_max[d] = vt_state.dev[d].live;
}

void vt_span_close_locked(uint64_t now)
{
    vt_span *s = &vt_state.open;
    s->end = vt_time_locked(now);
    for (int d = 0; d < vt_state.devices_used; d++)
        s->live_end[d] = vt_state.dev[d].live;
    if (s->step < VT_TIMELINE_STEPS && vt_state.nspans < VT_TIMELINE_MAX) {
        if (vt_grow(&vt_state.spans, &vt_state.capspans, vt_state.nspans + 1,
                    sizeof *vt_state.spans, 64)) {
            vt_state.c.dropped++;
            return;
        }
        vt_state.spans[vt_state.nspans++] = *s;
        return;
    }
    vt_state.left_out.timeline++;
    if (!vt_state.folded.instances)
        vt_state.folded.first_step = s->step;
    vt_state.folded.instances++;
    vt_state.folded.last_step = s->step;
    for (int d = 0; d < vt_state.devices_used; d++)
        if (s->live_max[d] > vt_state.folded.live_max[d])
            vt_state.folded.live_max[d] = s->live_max[d];
}

/* Called in the child of a fork with every lock held: the child owns none of its parent's
 * allocations. The records, tables and peak sets are left where they are, not freed: freeing a
 * million of them would write to every page the child shares with its parent (copying them all) and
 * take as long as the parent took to make them, in a child that may only exec. */
void vt_table_reset_after_fork(void)
{
    vt_identity_reset_after_fork();
    uint8_t phase = vt_state.phase;
    uint32_t step = vt_state.step, instance = vt_state.instance;
    int markers = vt_state.markers;
    memset(&vt_state, 0, sizeof vt_state);
    memset(&A, 0, sizeof A);
    live_ix = vmm_ix = host_ix = (books_index){0};
    atomic_store(&hint_slots, NULL);
    extras = NULL;
    pending_ooms = 0;
    neras = 0;
    reach.size_end = 0;
    memset(samples_due, 0, sizeof samples_due);
    atomic_store(&samples_waiting.any, 0);
    for (int d = 0; d < VT_MAX_DEVICES; d++)
        atomic_store(&buffers.settled[d], 0);
    /* The phase the parent was in carries on in the child. */
    vt_state.phase = phase;
    vt_state.step = step;
    vt_state.instance = instance;
    vt_state.markers = markers;
    if (in_phase(phase))
        vt_span_open_locked(phase, vt_clock());
}
