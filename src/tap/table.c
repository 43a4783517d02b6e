#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

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

/* Every key here is an address or a handle: a multiplicative mix is enough and much cheaper
 * than uthash's general-purpose default. */
#undef HASH_FUNCTION
#define HASH_FUNCTION(keyptr, keylen, hashv) ((hashv) = addr_hash(keyptr))

static inline unsigned addr_hash(const void *key)
{
    uint64_t a;
    memcpy(&a, key, sizeof a);
    a ^= a >> 33;
    a *= 0xff51afd7ed558ccdULL;
    a ^= a >> 33;
    return (unsigned)a;
}

VT_HIDDEN vt_state_t vt_state;
VT_HIDDEN VT_TLS int vt_hash_oom;

/* CUDA's code for out of memory, the same in the runtime and the driver. */
#define CUDA_OUT_OF_MEMORY 2

static vt_rec *free_recs;
static int pending_ooms;

/* A VMM mapping: the range [addr, addr+size) of a reserved address space is backed by the
 * physical allocation `handle`. */
struct vt_vmap {
    uintptr_t addr;
    uint64_t size;
    uintptr_t handle;
    UT_hash_handle hh;
};

void vt_lock(void)
{
    vt_lock_take(VT_LOCK_STATE);
    vt_state.c.nested_calls += vt_nested_pending;
    vt_nested_pending = 0;
}

void vt_unlock(void)
{
    vt_lock_give(VT_LOCK_STATE);
}

static int in_phase(uint8_t phase)
{
    return phase == VT_PHASE_FORWARD || phase == VT_PHASE_BACKWARD || phase == VT_PHASE_OPTIMIZER;
}

vt_mark vt_mark_now_locked(void)
{
    vt_mark m = {.seq = ++vt_state.seq,
                 .time = vt_clock(),
                 .step = vt_state.step,
                 .instance = vt_state.instance,
                 .phase = vt_state.phase};
    return m;
}

static vt_rec *rec_new(void)
{
    vt_rec *r = free_recs;
    if (r)
        free_recs = r->next;
    else if (!(r = malloc(sizeof *r)))
        return NULL;
    memset(r, 0, sizeof *r);
    r->site = VT_NO_SITE;
    return r;
}

void vt_rec_free(vt_rec *r)
{
    if (r->labelled)
        vt_identity_forget_locked(r);
    r->next = free_recs;
    free_recs = r;
}

/* Returns VT_FIRST_USE and VT_NEW_PEAK flags for the sampling that follows outside the lock. */
enum { VT_FIRST_USE = 1, VT_NEW_PEAK = 2 };

static int account_alloc(vt_rec *r)
{
    vt_device *d = &vt_state.dev[r->device];
    int flags = 0;
    if (!d->used) {
        d->used = 1;
        d->last_used = d->used_at_peak = -1;
        d->last_rss = d->rss_at_peak = -1;
        d->last_workers = d->workers_at_peak = -1;
        flags |= VT_FIRST_USE;
    }
    d->live += r->size;
    d->allocs++;
    d->pool_allocs += r->kind == VT_KIND_POOL;
    d->last_alloc_seq = r->birth.seq;
    vt_state.c.allocs++;
    vt_state.made_device_alloc = 1;
    if (vt_peak_note_alloc(d, r))
        flags |= VT_NEW_PEAK;
    vt_history_note_locked(r, 0, flags & VT_NEW_PEAK);
    if (in_phase(vt_state.phase) && d->live > vt_state.open.live_max[r->device])
        vt_state.open.live_max[r->device] = d->live;
    if (pending_ooms) {
        for (int i = 0; i < vt_state.nooms; i++) {
            vt_oom *o = &vt_state.ooms[i];
            if (!o->retry_succeeded && o->device == r->device && r->size >= o->size) {
                o->retry_succeeded = 1;
                pending_ooms--;
            }
        }
    }
    return flags;
}

/* The record leaves the live set: the peak keeps it if it was live then, else it is recycled. */
static void account_free(vt_rec *r)
{
    vt_device *d = &vt_state.dev[r->device];
    d->live -= r->size;
    vt_state.c.frees++;
    r->death = vt_mark_now_locked();
    r->dead = 1;
    vt_history_note_locked(r, 1, 0);
    if (!vt_peak_note_free(d, r))
        vt_rec_free(r);
}

/* uthash frees a table when its last entry leaves and builds it again on the next insert: in a
 * program whose live set keeps emptying (a workspace allocated and freed per call) that is a
 * malloc, a memset and a free per allocation. Each table keeps an anchor, key 0, which no
 * allocation has (NULL pointers are never recorded). */
static vt_rec anchors[3];
static struct vt_vmap vmap_anchor;

static void anchor(vt_rec **table)
{
    if (*table)
        return;
    vt_rec *a = &anchors[table == &vt_state.live ? 0 : table == &vt_state.vmm ? 1 : 2];
    memset(a, 0, sizeof *a);
    vt_hash_oom = 0;
    HASH_ADD(hh, *table, key, sizeof a->key, a);
}

int vt_table_anchor(const vt_rec *r)
{
    return r->key == 0;
}

/* The record of `key`; never the anchor (a release of handle 0 or NULL finds nothing). */
static vt_rec *find(vt_rec *table, uintptr_t key)
{
    vt_rec *r = NULL;
    if (key)
        HASH_FIND(hh, table, &key, sizeof key, r);
    return r;
}

/* A new record in `table`, or NULL (counted as dropped) when memory ran out. */
vt_rec *vt_live_find_locked(uintptr_t addr)
{
    return find(vt_state.live, addr);
}

static vt_rec *insert(vt_rec **table, uintptr_t key, vt_api api, vt_kind kind, int device,
                      uint64_t size, uint32_t site)
{
    vt_rec *r = rec_new();
    if (!r) {
        vt_state.c.dropped++;
        return NULL;
    }
    r->key = key;
    r->api = (uint8_t)api;
    r->kind = (uint8_t)kind;
    r->device = (int16_t)device;
    r->size = size;
    r->site = site;
    r->mpath = vt_mpath_now();
    r->id = ++vt_state.next_id;
    anchor(table);
    vt_hash_oom = 0;
    HASH_ADD(hh, *table, key, sizeof r->key, r);
    if (vt_hash_oom) {
        vt_rec_free(r);
        vt_state.c.dropped++;
        return NULL;
    }
    r->birth = vt_mark_now_locked();
    return r;
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
 * a handle value the driver reused): the old allocation is gone. */
static void drop_stale(vt_rec **table, uintptr_t key)
{
    vt_rec *stale = find(*table, key);
    if (stale) {
        HASH_DEL(*table, stale);
        account_free(stale);
    }
}

void vt_note_alloc(vt_api api, vt_kind kind, int device, uintptr_t addr, uint64_t size)
{
    uint32_t site = vt_stack_here();
    int flags = 0, in_range = device_in_range(device);
    vt_history_prepare();
    vt_lock();
    if (device_ok(in_range)) {
        drop_stale(&vt_state.live, addr);
        vt_rec *r = insert(&vt_state.live, addr, api, kind, device, size, site);
        if (r) {
            r->address = addr;
            flags = account_alloc(r);
        }
    }
    vt_unlock();
    if (flags)
        vt_sample_after_alloc(device, flags & VT_FIRST_USE, flags & VT_NEW_PEAK);
}

void vt_note_free(uintptr_t addr)
{
    vt_history_prepare();
    vt_lock();
    vt_rec *r = find(vt_state.live, addr);
    if (r) {
        HASH_DEL(vt_state.live, r);
        account_free(r);
    } else {
        vt_state.c.unknown_frees++;
    }
    vt_unlock();
}

static void host_drop(vt_rec *r)
{
    HASH_DEL(vt_state.host, r);
    vt_state.hostmem.live -= r->size;
    vt_rec_free(r);
}

void vt_note_host_alloc(vt_api api, uintptr_t addr, uint64_t size)
{
    uint32_t site = vt_stack_here();
    vt_lock();
    vt_rec *stale = find(vt_state.host, addr);
    if (stale)
        host_drop(stale);
    vt_rec *r = insert(&vt_state.host, addr, api, VT_KIND_HOST, 0, size, site);
    if (r) {
        vt_state.c.host_allocs++;
        vt_state.hostmem.allocs++;
        vt_state.hostmem.live += size;
        if (vt_state.hostmem.live > vt_state.hostmem.peak) {
            vt_state.hostmem.peak = vt_state.hostmem.live;
            vt_state.hostmem.peak_time = r->birth.time;
        }
    }
    vt_unlock();
}

void vt_note_host_free(uintptr_t addr)
{
    vt_lock();
    vt_rec *r = find(vt_state.host, addr);
    if (r) {
        vt_state.c.host_frees++;
        host_drop(r);
    } else {
        vt_state.c.unknown_frees++;
    }
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
static void vmm_maybe_free(vt_rec *r)
{
    if (r->refs <= 0 && r->maps <= 0) {
        HASH_DEL(vt_state.vmm, r);
        account_free(r);
    }
}

void vt_note_vmm_create(uintptr_t handle, int device, uint64_t size)
{
    uint32_t site = vt_stack_here();
    int in_range = device_in_range(device);
    vt_history_prepare();
    vt_lock();
    vt_state.c.vmm_creates++;
    if (device_ok(in_range)) {
        drop_stale(&vt_state.vmm, handle);
        vt_rec *r =
            insert(&vt_state.vmm, handle, VT_API_cuMemCreate, VT_KIND_VMM, device, size, site);
        if (r) {
            r->refs = 1;
            account_alloc(r);
        }
    }
    vt_unlock();
}

void vt_note_vmm_retain(uintptr_t handle)
{
    vt_lock();
    vt_rec *r = find(vt_state.vmm, handle);
    if (r)
        r->refs++;
    vt_unlock();
}

void vt_note_vmm_release(uintptr_t handle)
{
    vt_lock();
    vt_state.c.vmm_releases++;
    vt_rec *r = find(vt_state.vmm, handle);
    if (r) {
        r->refs--;
        vmm_maybe_free(r);
    } else {
        vt_state.c.unknown_frees++;
    }
    vt_unlock();
}

void vt_note_vmm_map(uintptr_t addr, uint64_t size, uintptr_t handle)
{
    vt_lock();
    vt_state.c.vmm_maps++;
    vt_rec *r = find(vt_state.vmm, handle);
    /* A handle vramtap did not create (imported from another process) maps memory that is
     * not this process's: nothing to count. */
    if (r) {
        struct vt_vmap *m = malloc(sizeof *m);
        if (m) {
            *m = (struct vt_vmap){.addr = addr, .size = size, .handle = handle};
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
            r->maps++;
            if (!r->address)
                r->address = addr;
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
        vt_rec *r = find(vt_state.vmm, m->handle);
        free(m);
        if (r) {
            r->maps--;
            vmm_maybe_free(r);
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
    s->start = now;
    s->end = 0;
    for (int d = 0; d < VT_MAX_DEVICES; d++)
        s->live_start[d] = s->live_max[d] = vt_state.dev[d].live;
}

void vt_span_close_locked(uint64_t now)
{
    vt_span *s = &vt_state.open;
    s->end = now;
    for (int d = 0; d < VT_MAX_DEVICES; d++)
        s->live_end[d] = vt_state.dev[d].live;
    if (s->step < VT_TIMELINE_STEPS && vt_state.nspans < VT_TIMELINE_MAX) {
        if (vt_state.nspans == vt_state.capspans) {
            size_t cap = vt_state.capspans ? vt_state.capspans * 2 : 64;
            vt_span *n = realloc(vt_state.spans, cap * sizeof *n);
            if (!n) {
                vt_state.c.dropped++;
                return;
            }
            vt_state.spans = n;
            vt_state.capspans = cap;
        }
        vt_state.spans[vt_state.nspans++] = *s;
        return;
    }
    vt_state.left_out.timeline++;
    if (!vt_state.folded.instances)
        vt_state.folded.first_step = s->step;
    vt_state.folded.instances++;
    vt_state.folded.last_step = s->step;
    for (int d = 0; d < VT_MAX_DEVICES; d++)
        if (s->live_max[d] > vt_state.folded.live_max[d])
            vt_state.folded.live_max[d] = s->live_max[d];
}

/* Called in the child of a fork with every lock held: the child owns none of its parent's
 * allocations. The records are left where they are, not freed: freeing a million of them
 * would write to every page the child shares with its parent (copying them all) and take as
 * long as the parent took to make them, in a child that may only exec. */
void vt_table_reset_after_fork(void)
{
    vt_identity_reset_after_fork();
    uint8_t phase = vt_state.phase;
    uint32_t step = vt_state.step, instance = vt_state.instance;
    int markers = vt_state.markers;
    memset(&vt_state, 0, sizeof vt_state);
    free_recs = NULL;
    pending_ooms = 0;
    /* The phase the parent was in carries on in the child. */
    vt_state.phase = phase;
    vt_state.step = step;
    vt_state.instance = instance;
    vt_state.markers = markers;
    if (in_phase(phase))
        vt_span_open_locked(phase, vt_clock());
}
