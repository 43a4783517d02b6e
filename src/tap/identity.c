/* Identity evidence (identity.h): labelled address ranges, attached to the allocation they
 * start at or kept loose until a file is written. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "identity.h"
#include "grow.h"
#include "json_out.h"
#include "vramtap.h"
#include "snapshot_keys.h"

/* A label attached to an allocation: [off, off + len) of it. */
typedef struct {
    uint64_t off, len;
    uint8_t cat;
} owned_label;

/* The labels of one allocation. Most hold one (a parameter, a gradient), kept inline; nodes come
 * from a free list, so labelling a new allocation and forgetting it call no allocator: a step
 * that re-makes a thousand gradients labels a thousand new allocations. */
typedef struct owned {
    uint64_t id; /* the record's allocation id */
    UT_hash_handle hh;
    owned_label first;
    uint32_t n, cap;    /* labels in all; room in `more` */
    owned_label *more;  /* labels after the first */
    struct owned *next; /* in the free list */
} owned;

/* A range that did not start at an allocation when labelled. Its label holds for an
 * allocation that contains `addr` and was live at some moment between the first and the last
 * time the range was labelled (event sequence numbers). */
typedef struct {
    uintptr_t addr;
    UT_hash_handle hh;
    uint64_t len, seq_first, seq_last;
    uint8_t cat;
} loose;

/* Bounds: a flat buffer or a segment holds many ranges, each one label; a run labels the same
 * ranges at each step, so these are reached only by a program that labels ever new memory. */
#define MAX_PER_ALLOC 256
#define MAX_LOOSE (1u << 18)
/* Ranges handled per turn of the lock: a batch of thousands never holds it long. */
#define LOCKED_BATCH 256
/* Nodes the free list grows by. */
#define OWNED_CHUNK 256

static const char *const cat_names[VT_ID_COUNT] = {"parameters", "gradients", "optimizer_state",
                                                   "activations", "temporary"};

static owned *by_alloc, *free_owned;
static loose *by_addr;
static uint32_t nloose;
static struct {
    uint64_t ranges, attached, loose, dropped;
} counts;

static int category_of(const char *name)
{
    for (int c = 0; name && c < VT_ID_COUNT; c++)
        if (!strcasecmp(name, cat_names[c]))
            return c;
    return -1;
}

static owned_label *label_at(owned *o, uint32_t i)
{
    return i ? &o->more[i - 1] : &o->first;
}

static owned *new_owned(void)
{
    if (!free_owned) {
        owned *chunk = malloc(OWNED_CHUNK * sizeof *chunk);
        if (!chunk)
            return NULL;
        for (uint32_t i = 0; i < OWNED_CHUNK; i++) {
            chunk[i].next = free_owned;
            free_owned = &chunk[i];
        }
    }
    owned *o = free_owned;
    free_owned = o->next;
    return o;
}

static void free_owned_node(owned *o)
{
    free(o->more);
    o->next = free_owned;
    free_owned = o;
}

static int attach(vt_rec *r, uint64_t len, uint8_t cat)
{
    owned *o = NULL;
    uint64_t id = vt_rec_id(r), size = vt_rec_size(r);
    if (len > size)
        len = size;
    if (vt_rec_labelled(
            r)) /* else it has no entry: a new allocation costs no search of the table */
        HASH_FIND(hh, by_alloc, &id, sizeof id, o);
    if (!o) {
        if (!(o = new_owned()))
            return -1;
        *o = (owned){.id = id, .first = {0, len, cat}, .n = 1};
        vt_hash_oom = 0;
        HASH_ADD(hh, by_alloc, id, sizeof o->id, o);
        if (vt_hash_oom) {
            free_owned_node(o);
            return -1;
        }
        vt_rec_set_labelled(r);
        return 0;
    }
    for (uint32_t i = 0; i < o->n; i++) {
        owned_label *l = label_at(o, i);
        if (l->off == 0 && l->len == len) {
            l->cat = cat;
            return 0;
        }
    }
    if (o->n - 1 == o->cap) {
        uint32_t cap = o->cap ? o->cap * 2 : 1;
        if (cap > MAX_PER_ALLOC - 1) /* the first label is inline */
            cap = MAX_PER_ALLOC - 1;
        owned_label *v = cap > o->cap ? realloc(o->more, cap * sizeof *v) : NULL;
        if (!v)
            return -1;
        o->more = v;
        o->cap = cap;
    }
    o->more[o->n++ - 1] = (owned_label){0, len, cat};
    return 0;
}

static int keep_loose(uintptr_t addr, uint64_t len, uint8_t cat)
{
    loose *l = NULL;
    HASH_FIND(hh, by_addr, &addr, sizeof addr, l);
    if (l && (l->len != len || l->cat != cat)) {
        l->len = len;
        l->cat = cat;
        l->seq_first = vt_state.seq;
    } else if (!l) {
        if (nloose >= MAX_LOOSE || !(l = malloc(sizeof *l)))
            return -1;
        *l = (loose){.addr = addr, .len = len, .cat = cat, .seq_first = vt_state.seq};
        vt_hash_oom = 0;
        HASH_ADD(hh, by_addr, addr, sizeof l->addr, l);
        if (vt_hash_oom) {
            free(l);
            return -1;
        }
        nloose++;
    }
    l->seq_last = vt_state.seq;
    return 0;
}

static void label_locked(uintptr_t addr, uint64_t len, uint8_t cat)
{
    counts.ranges++;
    vt_rec *r = vt_live_find_locked(addr);
    if (r && !attach(r, len, cat))
        counts.attached++;
    else if (!keep_loose(addr, len, cat))
        counts.loose++;
    else
        counts.dropped++;
}

VT_EXPORT int vramtap_label_ranges(const unsigned long long *ranges, unsigned long long n,
                                   const char *category)
{
    int cat = category_of(category);
    if (cat < 0)
        return VRAMTAP_EUNKNOWN;
    if (vt_cfg.disabled || !ranges)
        return VRAMTAP_OK;
    for (unsigned long long i = 0; i < n;) {
        vt_lock();
        for (unsigned long long end = i + LOCKED_BATCH; i < n && i < end; i++)
            if (ranges[2 * i] && ranges[2 * i + 1])
                label_locked((uintptr_t)ranges[2 * i], ranges[2 * i + 1], (uint8_t)cat);
        vt_unlock();
    }
    return VRAMTAP_OK;
}

VT_EXPORT int vramtap_label_range(const void *address, unsigned long long bytes,
                                  const char *category)
{
    unsigned long long range[2] = {(unsigned long long)(uintptr_t)address, bytes};
    return vramtap_label_ranges(range, 1, category);
}

void vt_identity_forget_locked(const vt_rec *r)
{
    owned *o = NULL;
    uint64_t id = vt_rec_id(r);
    HASH_FIND(hh, by_alloc, &id, sizeof id, o);
    if (!o)
        return;
    HASH_DEL(by_alloc, o);
    free_owned_node(o);
}

void vt_identity_reset_after_fork(void)
{
    by_alloc = NULL;
    free_owned = NULL;
    by_addr = NULL;
    nloose = 0;
    memset(&counts, 0, sizeof counts);
}

typedef struct {
    uint64_t id, off, len;
    uint8_t cat;
} frozen_owned;

typedef struct {
    uintptr_t addr;
    uint64_t len, seq_first, seq_last;
    uint8_t cat;
} frozen_loose;

struct vt_identity_frozen {
    frozen_owned *owned;
    size_t nowned, capowned;
    frozen_loose *loose;
    uint32_t nloose;
    uint64_t ranges, attached, loose_labelled, dropped, loose_matched;
};

vt_identity_frozen *vt_identity_freeze_locked(void)
{
    vt_identity_frozen *z = calloc(1, sizeof *z);
    if (!z || (nloose && !(z->loose = malloc(nloose * sizeof *z->loose)))) {
        free(z);
        return NULL;
    }
    for (loose *l = by_addr; l; l = l->hh.next)
        z->loose[z->nloose++] = (frozen_loose){l->addr, l->len, l->seq_first, l->seq_last, l->cat};
    z->ranges = counts.ranges;
    z->attached = counts.attached;
    z->loose_labelled = counts.loose;
    z->dropped = counts.dropped;
    return z;
}

int vt_identity_freeze_rec_locked(vt_identity_frozen *z, const vt_rec *r)
{
    owned *o = NULL;
    if (!z || !vt_rec_labelled(r))
        return 1;
    uint64_t id = vt_rec_id(r);
    HASH_FIND(hh, by_alloc, &id, sizeof id, o);
    if (!o)
        return 1;
    if (vt_grow(&z->owned, &z->capowned, z->nowned + o->n, sizeof *z->owned, 16))
        return 0;
    for (uint32_t i = 0; i < o->n; i++) {
        const owned_label *l = label_at(o, i);
        z->owned[z->nowned++] = (frozen_owned){id, l->off, l->len, l->cat};
    }
    return 1;
}

static int by_id(const void *pa, const void *pb)
{
    const frozen_owned *a = pa, *b = pb;
    return (a->id > b->id) - (a->id < b->id);
}

static int by_start(const void *pa, const void *pb)
{
    const frozen_loose *a = pa, *b = pb;
    return (a->addr > b->addr) - (a->addr < b->addr);
}

void vt_identity_frozen_ready(vt_identity_frozen *z)
{
    if (!z)
        return;
    if (z->nowned)
        qsort(z->owned, z->nowned, sizeof *z->owned, by_id);
    if (z->nloose)
        qsort(z->loose, z->nloose, sizeof *z->loose, by_start);
}

/* The first element of a sorted array whose leading uint64_t field (id, address) is >= key. */
static size_t lower_bound(const void *base, size_t n, size_t size, uint64_t key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t k;
        memcpy(&k, (const char *)base + mid * size, sizeof k);
        if (k < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

const char *vt_identity_category_name(int cat)
{
    return cat_names[cat];
}

void vt_identity_labels(vt_identity_frozen *z, uint64_t id, uintptr_t address, uint64_t size,
                        uint64_t birth_seq, int dead, uint64_t death_seq, vt_label_fn fn, void *ctx)
{
    if (!z)
        return;
    /* the first attached label of `id`, and of loose ones the first starting at or after the
     * allocation */
    for (size_t i = lower_bound(z->owned, z->nowned, sizeof *z->owned, id);
         i < z->nowned && z->owned[i].id == id; i++)
        fn(ctx, z->owned[i].off, z->owned[i].len, z->owned[i].cat);
    size_t first_loose = address ? lower_bound(z->loose, z->nloose, sizeof *z->loose, address) : 0;
    for (size_t i = first_loose; address && i < z->nloose && z->loose[i].addr - address < size;
         i++) {
        const frozen_loose *l = &z->loose[i];
        if (l->seq_last < birth_seq || (dead && l->seq_first >= death_seq))
            continue;
        uint64_t off = l->addr - address;
        fn(ctx, off, l->len < size - off ? l->len : size - off, l->cat);
        z->loose_matched++;
    }
}

int vt_identity_loose_at(const vt_identity_frozen *z, size_t i, uintptr_t *addr, uint64_t *len,
                         uint8_t *cat, uint64_t *seq_last)
{
    if (!z || i >= z->nloose)
        return 0;
    *addr = z->loose[i].addr;
    *len = z->loose[i].len;
    *cat = z->loose[i].cat;
    *seq_last = z->loose[i].seq_last;
    return 1;
}

void vt_identity_write_summary(FILE *f, const vt_identity_frozen *z)
{
    if (!z)
        return;
    fprintf(f,
            VT_JSON_KEY(
                VT_K_IDENTITY) "{\"ranges\": %llu, \"attached\": %llu, \"loose\": %llu, "
                               "\"loose_kept\": %u, \"loose_matched\": %llu, \"dropped\": %llu},\n",
            (unsigned long long)z->ranges, (unsigned long long)z->attached,
            (unsigned long long)z->loose_labelled, z->nloose, (unsigned long long)z->loose_matched,
            (unsigned long long)z->dropped);
}

void vt_identity_thaw(vt_identity_frozen *z)
{
    if (!z)
        return;
    free(z->owned);
    free(z->loose);
    free(z);
}
