/* The books: live allocations, per-device peaks, phase marks and the timeline.
 *
 * One mutex guards all of it, so that event sequence numbers, live bytes and phase state agree
 * with each other. The peaks are peak.c's. */
#ifndef VT_TABLE_H
#define VT_TABLE_H

#include <stdint.h>

/* uthash serves the side tables (stacks, labels, VMM mappings). The library must never exit the
 * program: a failed hash expansion drops the entry instead. Set by the thread whose insertion
 * failed, so per thread. */
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(obj) (vt_hash_oom = 1)
extern __thread __attribute__((visibility("hidden"), tls_model("initial-exec"))) int vt_hash_oom;
#include <uthash.h>

#include "mpath.h"
#include "stacks.h"
#include "tap.h"

typedef enum {
    VT_PHASE_SETUP,
    VT_PHASE_FORWARD,
    VT_PHASE_BACKWARD,
    VT_PHASE_OPTIMIZER,
    VT_PHASE_OTHER
} vt_phase;

VT_HIDDEN const char *vt_phase_name(vt_phase p);

/* When and in which phase an event happened. */
typedef struct {
    uint64_t seq;
    uint64_t time; /* ticks */
    uint32_t step;
    uint32_t instance;
    uint8_t phase;
} vt_mark;

/* The widths of what a record keeps of its birth's sequence number, its id, size, step and
 * phase instance: their low bits. The high bits are an era's (vt_era). */
enum {
    VT_REC_SEQ_BITS = 32,
    VT_REC_ID_BITS = 32,
    VT_REC_SIZE_BITS = 48,
    VT_REC_STEP_BITS = 16,
    VT_REC_INSTANCE_BITS = 21,
    VT_REC_ERA_BITS = 16,
    VT_REC_SITE_BITS = 21,
    VT_REC_HIST_BITS = 30,
    VT_REC_MPATH_BITS = 22
};

/* The high bits, zero below the record's widths, of the births of one era: a birth whose high
 * bits differ from the latest era's starts another. One comes every 2^32 events or
 * allocations, 2^21 phase instances or 2^16 steps, and two with an allocation of 256 TiB or
 * more: the 65,536 a process can have last for ever in practice (past them, allocations are
 * dropped, as when memory runs out). */
typedef struct {
    uint64_t seq, id, size;
    uint32_t step, instance;
} vt_era;

#define VT_MAX_ERAS (1u << VT_REC_ERA_BITS)
extern VT_HIDDEN vt_era vt_eras[VT_MAX_ERAS];

/* A live allocation on the books: 48 bytes. Records sit in an arena of fixed chunks, found by
 * index, never moved (table.c); what only some allocations need is kept aside: a VMM
 * allocation's references, mappings and mapped address (table.c), the death of one the peak
 * keeps (vt_dead, peak.c), labels (identity.c). Its last three words are packed (the VT_REC_AT_
 * and VT_REC_*_BITS below): read them through the vt_rec_ functions. Packed as whole words, a
 * birth is a few shifts in registers; C bit fields were written a piece at a time, and reading
 * a word back over pieces just stored stalls the processor. */
typedef struct vt_rec {
    uintptr_t key;            /* device address, host address, or VMM handle; 0: a free slot */
    uint64_t time;            /* the birth's, in ticks */
    uint32_t seq_low, id_low; /* a free record: seq_low is the next free one's index + 1 */
    uint64_t size_era;        /* size's low bits, then the era */
    uint64_t when;            /* step's and instance's low bits, site, phase, kind */
    uint64_t what;            /* history index, module path, device, API, labelled */
} vt_rec;

/* Where each packed field starts in its word. */
enum {
    VT_REC_AT_ERA = VT_REC_SIZE_BITS,
    VT_REC_AT_INSTANCE = VT_REC_STEP_BITS,
    VT_REC_AT_SITE = VT_REC_AT_INSTANCE + VT_REC_INSTANCE_BITS,
    VT_REC_AT_PHASE = VT_REC_AT_SITE + VT_REC_SITE_BITS,
    VT_REC_AT_KIND = VT_REC_AT_PHASE + 3,
    VT_REC_AT_MPATH = VT_REC_HIST_BITS,
    VT_REC_AT_DEVICE = VT_REC_AT_MPATH + VT_REC_MPATH_BITS,
    VT_REC_AT_API = VT_REC_AT_DEVICE + 5,
    VT_REC_AT_LABELLED = VT_REC_AT_API + 5
};

#define VT_REC_NO_SITE ((1u << VT_REC_SITE_BITS) - 1)
/* The module path's recomputation bit, where a record keeps it. */
#define VT_REC_MPATH_RECOMPUTED (1u << (VT_REC_MPATH_BITS - 1))

_Static_assert(sizeof(vt_rec) == 48, "a record is 48 bytes");
_Static_assert(VT_REC_AT_ERA + VT_REC_ERA_BITS <= 64 && VT_REC_AT_KIND + 3 <= 64 &&
                   VT_REC_AT_LABELLED + 1 <= 64,
               "the packed fields fit their words");
_Static_assert(VT_MAX_DEVICES <= 32 && VT_API_COUNT <= 32 && VT_KIND_HOST < 8,
               "devices, APIs and kinds fit a record");
_Static_assert(VT_REC_SEQ_BITS == 32 && VT_REC_ID_BITS == 32, "seq_low and id_low are 32 bits");

/* The `bits` bits of w from bit `at`. */
static inline uint32_t vt_bits(uint64_t w, int at, int bits)
{
    return (uint32_t)((w >> at) & ((UINT64_C(1) << bits) - 1));
}

static inline const vt_era *vt_rec_era(const vt_rec *r)
{
    return &vt_eras[r->size_era >> VT_REC_AT_ERA];
}

static inline uint64_t vt_rec_id(const vt_rec *r)
{
    return vt_rec_era(r)->id | r->id_low;
}

static inline uint64_t vt_rec_size(const vt_rec *r)
{
    return vt_rec_era(r)->size | (r->size_era & ((UINT64_C(1) << VT_REC_SIZE_BITS) - 1));
}

static inline uint64_t vt_rec_seq(const vt_rec *r)
{
    return vt_rec_era(r)->seq | r->seq_low;
}

static inline vt_mark vt_rec_birth(const vt_rec *r)
{
    const vt_era *e = vt_rec_era(r);
    return (vt_mark){.seq = e->seq | r->seq_low,
                     .time = r->time,
                     .step = e->step | vt_bits(r->when, 0, VT_REC_STEP_BITS),
                     .instance =
                         e->instance | vt_bits(r->when, VT_REC_AT_INSTANCE, VT_REC_INSTANCE_BITS),
                     .phase = (uint8_t)vt_bits(r->when, VT_REC_AT_PHASE, 3)};
}

static inline vt_kind vt_rec_kind(const vt_rec *r)
{
    return (vt_kind)vt_bits(r->when, VT_REC_AT_KIND, 3);
}

static inline uint32_t vt_rec_site(const vt_rec *r)
{
    uint32_t site = vt_bits(r->when, VT_REC_AT_SITE, VT_REC_SITE_BITS);
    return site == VT_REC_NO_SITE ? VT_NO_SITE : site;
}

/* The index of its allocation's event in the history + 1 while the event is in a kept window,
 * else 0. */
static inline uint32_t vt_rec_hist(const vt_rec *r)
{
    return vt_bits(r->what, 0, VT_REC_HIST_BITS);
}

static inline void vt_rec_set_hist(vt_rec *r, uint32_t hist)
{
    r->what = (r->what & ~((UINT64_C(1) << VT_REC_HIST_BITS) - 1)) | hist;
}

static inline int vt_rec_device(const vt_rec *r)
{
    return (int)vt_bits(r->what, VT_REC_AT_DEVICE, 5);
}

static inline vt_api vt_rec_api(const vt_rec *r)
{
    return (vt_api)vt_bits(r->what, VT_REC_AT_API, 5);
}

/* Whether identity.c holds labels for it. */
static inline int vt_rec_labelled(const vt_rec *r)
{
    return (int)vt_bits(r->what, VT_REC_AT_LABELLED, 1);
}

static inline void vt_rec_set_labelled(vt_rec *r)
{
    r->what |= UINT64_C(1) << VT_REC_AT_LABELLED;
}

/* A module path id (mpath.h) in VT_REC_MPATH_BITS: ids past VT_MPATH_MAX, which name no path
 * in a file, become 0, as does their recomputation bit. */
static inline uint32_t vt_rec_mpath_pack(uint32_t mpath)
{
    uint32_t index = mpath & ~VT_MPATH_RECOMPUTED;
    if (!index || index > VT_MPATH_MAX)
        return 0;
    return index | (mpath & VT_MPATH_RECOMPUTED ? VT_REC_MPATH_RECOMPUTED : 0);
}

static inline uint32_t vt_rec_mpath_unpack(uint32_t packed)
{
    return (packed & ~VT_REC_MPATH_RECOMPUTED) |
           (packed & VT_REC_MPATH_RECOMPUTED ? VT_MPATH_RECOMPUTED : 0);
}

/* The nn.Module path current at its birth, as the record keeps it (vt_rec_mpath_pack). */
static inline uint32_t vt_rec_mpath_packed(const vt_rec *r)
{
    return vt_bits(r->what, VT_REC_AT_MPATH, VT_REC_MPATH_BITS);
}

/* The nn.Module path current at its birth (mpath.h). */
static inline uint32_t vt_rec_mpath(const vt_rec *r)
{
    return vt_rec_mpath_unpack(vt_rec_mpath_packed(r));
}

/* A VMM allocation's first address it was mapped at (0 until mapped). Lock held. */
VT_HIDDEN uintptr_t vt_rec_vmm_address(const vt_rec *r);

/* Where the allocation is: its key, or for a VMM allocation vt_rec_vmm_address. Inline: every
 * free asks. Lock held. */
static inline uintptr_t vt_rec_address(const vt_rec *r)
{
    return vt_rec_kind(r) == VT_KIND_VMM ? vt_rec_vmm_address(r) : r->key;
}

/* An allocation that was live at its device's peak and died since: the peak keeps it. */
typedef struct {
    vt_rec r;
    vt_mark death;
    uintptr_t address;
    uint32_t copied; /* the copy in steps (freeze.c) that holds it already, else 0 */
} vt_dead;

/* One allocation as a file shows it: the writer's copy (freeze.h) and the history's. */
typedef struct {
    uint64_t id, size;
    uintptr_t address;
    vt_mark birth, death;
    uint32_t site;
    uint32_t mpath; /* the nn.Module path current at birth (mpath.h), 0 for none */
    int16_t device;
    uint8_t api, kind, dead;
} frozen_rec;

/* What the books and the history read of an allocation as it is born; the rest of its birth
 * (address, site, module path) stays in its record. */
typedef struct {
    uint64_t id, size;
    vt_mark birth;
    int16_t device;
    uint8_t api, kind;
} vt_birth;

/* *f: r as a file shows it alive, at `address` (vt_rec_address's, or the peak's copy's).
 * Field by field into its place: a whole struct made aside and copied was read back over the
 * pieces just stored, which stalls the processor (a million records at exit). */
static inline void vt_rec_freeze(frozen_rec *f, const vt_rec *r, uintptr_t address)
{
    f->id = vt_rec_id(r);
    f->size = vt_rec_size(r);
    f->address = address;
    f->birth = vt_rec_birth(r);
    f->death = (vt_mark){0};
    f->site = vt_rec_site(r);
    f->mpath = vt_rec_mpath(r);
    f->device = (int16_t)vt_rec_device(r);
    f->api = (uint8_t)vt_rec_api(r);
    f->kind = (uint8_t)vt_rec_kind(r);
    f->dead = 0;
}

/* A listed allocation a file shows dead: where it is in vt_copied's recs, and its death. */
typedef struct {
    size_t at;
    vt_mark death;
} vt_copied_death;

struct vt_identity_frozen;
/* The allocations a copy for a file lists (freeze.h), with their labels and the loose ranges
 * (identity.h; NULL: none, or dropped when memory ran out). Each is its 48-byte record as the
 * books keep it, its key replaced by the address the file shows (vt_rec_address's, or the
 * peak's copy's), and is decoded only as the file is written, outside the lock (an era never
 * changes once made): a frozen_rec a listed allocation took twice the memory for the time of
 * the write. Those shown dead have their death aside, in the order of recs. */
typedef struct {
    vt_rec *recs;
    size_t n, cap;
    vt_copied_death *deaths;
    size_t ndeaths, capdeaths;
    struct vt_identity_frozen *labels;
    int full; /* an allocation did not fit in cap */
} vt_copied;
/* Adds r, at `address`, with its labels (lock held): alive, or dead at *death; 0 when full. */
VT_HIDDEN int vt_copied_add_locked(vt_copied *c, const vt_rec *r, uintptr_t address,
                                   const vt_mark *death);

/* *f: listed allocation i of c as the file shows it; *dead_at (0 for i = 0) is where the next
 * death may be, for c's allocations read in order. */
static inline void vt_copied_get(const vt_copied *c, size_t i, size_t *dead_at, frozen_rec *f)
{
    vt_rec_freeze(f, &c->recs[i], c->recs[i].key);
    if (*dead_at < c->ndeaths && c->deaths[*dead_at].at == i) {
        f->death = c->deaths[(*dead_at)++].death;
        f->dead = 1;
    }
}

/* A post-mortem copied in steps shows the moment of the failure: the allocations on `device`
 * born by `seq` that die before the copy reaches their records are added to `to` as they die. */
typedef struct {
    vt_copied *to;
    uint64_t seq;
    int device;
    uint64_t added; /* how many */
} vt_copy_sink;

/* A chunked array: elements never move, chunks are added as it grows and kept when it
 * shrinks (table.c). */
typedef struct {
    void **chunk;
    uint32_t nchunks;
    size_t capchunks;
} vt_chunks;

/* The records a device's peak keeps (live at the peak, died since), in the order they died. */
typedef struct {
    vt_chunks c;
    uint32_t n, labelled;
} vt_dead_list;

/* A phase instance for the timeline. */
typedef struct {
    uint32_t instance;
    uint8_t phase;
    uint32_t step;
    uint64_t start, end;               /* ticks; end is 0 while open */
    uint64_t live_max[VT_MAX_DEVICES]; /* first: written by allocations while open */
    uint64_t live_start[VT_MAX_DEVICES], live_end[VT_MAX_DEVICES];
} vt_span;

/* Device-wide memory as the driver reports it, and the pools' own figures. */
typedef struct {
    uint64_t time, seq;
    int64_t free_bytes, total_bytes;
    uint64_t pool[4];  /* reserved, used, reserved high, used high */
    int64_t rss_bytes; /* the process's resident host memory then, -1 unknown */
    uint8_t reason, have_pool;
} vt_sample;

#define VT_MAX_SAMPLES 256
#define VT_MAX_POOLS 8

typedef struct {
    /* What each allocation and free reads or writes first, on as few cache lines as they fit:
     * threads that take turns on the books pass these lines between processors. */
    int used;
    uint64_t live, peak, allocs;
    uint64_t pool_allocs; /* stream-ordered allocations: without any, no pool figures */
    uint64_t last_alloc_seq, last_oom_seq;
    uint64_t peak_seq;
    uint64_t peak_time;
    uint8_t peak_phase;
    uint32_t peak_step;
    vt_dead_list dead;
    char name[128], uuid[48], pci_bus_id[32];
    uint64_t total;
    vt_sample samples[VT_MAX_SAMPLES];
    int nsamples;
    uint64_t last_peak_sample; /* ticks */
    uint64_t peak_samples;
    int info_attempts;
    int info_settled;              /* no more asking for the device's facts (buffering, table.c) */
    int64_t last_used;             /* total - free of the latest sample, -1 before any */
    int64_t used_at_peak;          /* of the latest sample at or before the peak, -1 if none */
    int64_t last_rss, rss_at_peak; /* the same for the process's resident host memory */
    int64_t last_workers, workers_at_peak; /* and for its workers' PSS, summed */
    uint64_t pool_reserved_high, pool_reserved_now;
    int have_pool;
    uintptr_t pools[VT_MAX_POOLS]; /* pools allocated from explicitly */
    int npools;
} vt_device;

/* A child process (a data-loader worker): its proportional set size, highest and latest. */
typedef struct {
    int pid;
    int64_t pss_high, pss_last;
} vt_worker;

#define VT_MAX_WORKERS 64

typedef struct {
    vt_worker w[VT_MAX_WORKERS];
    int n;
    int64_t sum_last, sum_high; /* all workers' PSS together */
    uint64_t left_out;          /* workers seen past VT_MAX_WORKERS */
} vt_workers;

/* The process's resident host memory at a sample, and when. */
typedef struct {
    int64_t bytes; /* 0: no sample yet */
    uint64_t time;
    uint8_t phase;
    uint32_t step;
} vt_ram;

/* The first three are written at every allocation and free: vt_state keeps them on its first
 * line. */
typedef struct {
    uint64_t allocs, frees, nested_calls;
    uint64_t unknown_frees, failed_calls, oom_calls, host_allocs, host_frees;
    uint64_t vmm_creates, vmm_releases, vmm_maps, vmm_unmaps, dropped;
} vt_counters;

typedef struct {
    int n;
    uint64_t time;
    int device;
    uint64_t size;
    uint8_t api;
    uint8_t phase;
    uint32_t step;
    uint32_t site;
    int error;
    int retry_succeeded;
    int64_t free_bytes, total_bytes; /* -1 when unknown */
    int written;                     /* a post-mortem file was written for it */
} vt_oom;

#define VT_MAX_OOMS 256
/* The timeline keeps a record per phase instance of the first VT_TIMELINE_STEPS steps, and at
 * most VT_TIMELINE_MAX records in all (VT_TIMELINE_MAX * sizeof(vt_span), about 800 KiB: marks
 * that never advance the step, as in inference servers, must not grow it); later instances are
 * folded into the summary. */
#define VT_TIMELINE_STEPS 64
#define VT_TIMELINE_MAX 1024

/* What each bounded table of the books left out once full (the snapshot's "bounds"). */
typedef struct {
    uint64_t timeline, samples, oom_events, pools, devices;
} vt_left_out;

/* Everything below is guarded by vt_state.lock. */
typedef struct {
    /* Read or written at every allocation and free, on one cache line with c's first three
     * (see vt_device); in a phase an allocation also writes open.live_max */
    uint64_t seq, next_id;
    uint8_t phase; /* current: VT_PHASE_* */
    uint8_t made_device_alloc;
    uint8_t freezing; /* a copy in steps is under way (freeze.c) */
    uint32_t step, instance;
    uint64_t last_time; /* the latest time stamped (vt_time_locked) */
    vt_counters c;
    int markers;           /* any phase ever opened */
    uint32_t freeze_gen;   /* the number of the latest */
    uint32_t freeze_below; /* while it runs: the records of the arena below this index that it
                              holds already */
    vt_copy_sink *sink;    /* while it runs for a post-mortem, else NULL */
    vt_span open;          /* the phase instance in progress (valid while phase is in-phase) */
    struct vt_vmap *vmaps; /* VMM mappings by address */
    vt_device dev[VT_MAX_DEVICES];
    int devices_used; /* devices [0, devices_used) have had an allocation (the others' spans are
                         0: their loops stop there) */
    struct {
        uint64_t live, peak, allocs;
        uint64_t peak_time;
    } hostmem;
    vt_ram ram;         /* the highest resident host memory a sample saw */
    vt_workers workers; /* child processes, read with the samples */
    vt_span *spans;     /* closed phase instances kept as records (see VT_TIMELINE_MAX) */
    size_t nspans, capspans;
    struct {
        uint64_t instances;
        uint32_t first_step, last_step;
        uint64_t live_max[VT_MAX_DEVICES];
    } folded;
    vt_oom ooms[VT_MAX_OOMS];
    int nooms;
    vt_left_out left_out;
} vt_state_t;

extern VT_HIDDEN vt_state_t vt_state;

VT_HIDDEN void vt_lock(void);
VT_HIDDEN void vt_unlock(void);

/* Called by a wrapper before it asks the driver which device a new allocation at addr is on:
 * the allocation's slot in the books is fetched meanwhile, as with a large live set it is a cache
 * miss. vt_note_alloc fetches nothing itself (a second fetch of the same line cost 2 ns a pair
 * at 1k live). */
VT_HIDDEN void vt_live_prefetch(uintptr_t addr);

/* Recording. `site` comes from vt_stack_here() taken before the lock. */
VT_HIDDEN void vt_note_alloc(vt_api api, vt_kind kind, int device, uintptr_t addr, uint64_t size);
VT_HIDDEN void vt_note_free(uintptr_t addr);
VT_HIDDEN void vt_note_fail(vt_api api, int device, uint64_t size, int error, int is_oom);
/* An out-of-memory error the framework raised: recorded like a failed call unless vramtap
 * already saw the failure itself (a failed call on the device since its last allocation).
 * Returns 1 when recorded. */
VT_HIDDEN int vt_note_framework_oom(int device, uint64_t size);
VT_HIDDEN void vt_note_host_alloc(vt_api api, uintptr_t addr, uint64_t size);
VT_HIDDEN void vt_note_host_free(uintptr_t addr);
VT_HIDDEN void vt_note_vmm_create(uintptr_t handle, int device, uint64_t size);
VT_HIDDEN void vt_note_vmm_retain(uintptr_t handle);
VT_HIDDEN void vt_note_vmm_release(uintptr_t handle);
VT_HIDDEN void vt_note_vmm_map(uintptr_t addr, uint64_t size, uintptr_t handle);
VT_HIDDEN void vt_note_vmm_unmap(uintptr_t addr, uint64_t size);
/* A pool allocated from explicitly: its figures join the device's default pool's. */
VT_HIDDEN void vt_note_pool(int device, uintptr_t pool);
/* The program destroys `pool` (called before the real destroy): it is never queried again.
 * Returns once no sampler is reading the pools it listed before. */
VT_HIDDEN void vt_note_pool_destroy(uintptr_t pool);
/* The device's explicit pools, for the sampler to read outside the lock, at most `max`; each
 * vt_pools_listed() is followed by one vt_pools_read() once the reading is done. */
VT_HIDDEN int vt_pools_listed(int device, uintptr_t *out, int max);
VT_HIDDEN void vt_pools_read(void);

/* Phases (called with the lock held by phase.c). */
/* A time stamp under the lock from `t`, a clock reading taken before it: times stay in the order
 * of the sequence numbers although threads read the clock before they queue for the lock (a
 * reading there is taken out of the time the lock is held). */
static inline uint64_t vt_time_locked(uint64_t t)
{
    if (t < vt_state.last_time)
        t = vt_state.last_time;
    vt_state.last_time = t;
    return t;
}
/* vt_time_locked of a reading taken now, under the lock. */
static inline uint64_t vt_now_locked(void)
{
    return vt_time_locked(vt_clock());
}
/* The moment of an event at clock reading `t` (vt_time_locked), and now. */
VT_HIDDEN vt_mark vt_mark_at_locked(uint64_t t);
VT_HIDDEN vt_mark vt_mark_now_locked(void);
VT_HIDDEN void vt_span_open_locked(uint8_t phase, uint64_t now);
VT_HIDDEN void vt_span_close_locked(uint64_t now);

/* The live device allocation that starts at addr, or NULL (lock held). */
VT_HIDDEN vt_rec *vt_live_find_locked(uintptr_t addr);

/* The arena of records (lock held): records [0, vt_arena_end()) by index; a free slot has key
 * 0, a pinned host allocation kind VT_KIND_HOST. */
VT_HIDDEN uint32_t vt_arena_end(void);
VT_HIDDEN vt_rec *vt_arena_at(uint32_t i);

/* Element i of a chunked array of elements of `size` bytes, chunks of VT_CHUNK_BYTES: 4,096
 * records, so that a record's chunk and place in it are a shift and a mask. */
#define VT_CHUNK_BYTES ((size_t)192 << 10)
_Static_assert(VT_CHUNK_BYTES / sizeof(vt_rec) == 4096 && VT_CHUNK_BYTES % sizeof(vt_rec) == 0,
               "a chunk holds 4,096 records");
static inline void *vt_chunk_at(const vt_chunks *c, size_t size, uint32_t i)
{
    uint32_t per = (uint32_t)(VT_CHUNK_BYTES / size);
    return (char *)c->chunk[i / per] + (size_t)(i % per) * size;
}
/* Adds chunks until elements [0, n) have room: 0, or -1 when memory ran out. Takes a chunk
 * made ahead by vt_books_prepare() when there is one. */
VT_HIDDEN int vt_chunks_grow(vt_chunks *c, size_t size, uint32_t n);
/* Makes room for elements [0, n): inline, since a ramp of new records asks at each one and a
 * chunk lasts thousands. */
static inline int vt_chunks_reserve(vt_chunks *c, size_t size, uint32_t n)
{
    return (uint64_t)c->nchunks * (VT_CHUNK_BYTES / size) >= n ? 0 : vt_chunks_grow(c, size, n);
}

/* Outside the state lock, before recording: makes the memory the next records may need
 * (a chunk), so that recording them allocates nothing. */
VT_HIDDEN void vt_books_prepare(void);

/* The records in the tables of device and VMM allocations (lock held). */
VT_HIDDEN uint64_t vt_books_records(void);

/* The child of a fork starts with empty books. */
VT_HIDDEN void vt_table_reset_after_fork(void);

#endif
