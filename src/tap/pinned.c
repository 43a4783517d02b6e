/* Pinned host ranges (pinned.h): a sorted array behind a sequence count. A change makes the
 * count odd, edits, and makes it even again; a lookup that saw it odd or changed looks again.
 * A full array is replaced by one twice its size and the old one is never freed, since a lookup
 * may still be reading it: what is left behind is at most the size of the array in use. */
#include <sched.h>
#include <stdlib.h>

#include "pinned.h"
#include "table.h"

typedef struct {
    _Atomic uintptr_t start, end;
    _Atomic uint64_t seq; /* the books' when pinned */
} range;

typedef struct {
    size_t cap;
    _Atomic size_t n;
    range r[];
} set;

static _Atomic(set *) current;
static _Atomic unsigned seq;

/* The index of the first range of s starting after addr, among its first n. */
static size_t upper(const set *s, size_t n, uintptr_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (atomic_load_explicit(&s->r[mid].start, memory_order_relaxed) <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int vt_pinned_has(uintptr_t addr)
{
    for (int tries = 0;; tries++) {
        unsigned before = atomic_load_explicit(&seq, memory_order_acquire);
        set *s = atomic_load_explicit(&current, memory_order_acquire);
        int found = 0;
        if (!(before & 1) && s) {
            size_t n = atomic_load_explicit(&s->n, memory_order_relaxed);
            n = n < s->cap ? n : s->cap;
            size_t i = upper(s, n, addr);
            found = i > 0 && addr < atomic_load_explicit(&s->r[i - 1].end, memory_order_relaxed);
        }
        atomic_thread_fence(memory_order_acquire);
        if (!(before & 1) && atomic_load_explicit(&seq, memory_order_relaxed) == before)
            return found;
        if (tries > 64) /* the changing thread lost its CPU: let it finish */
            sched_yield();
    }
}

static void begin_change(void)
{
    atomic_fetch_add_explicit(&seq, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
}

static void end_change(void)
{
    atomic_fetch_add_explicit(&seq, 1, memory_order_release);
}

static void put(range *r, uintptr_t start, uintptr_t end, uint64_t seq)
{
    atomic_store_explicit(&r->start, start, memory_order_relaxed);
    atomic_store_explicit(&r->end, end, memory_order_relaxed);
    atomic_store_explicit(&r->seq, seq, memory_order_relaxed);
}

static void move(range *to, range *from)
{
    put(to, atomic_load_explicit(&from->start, memory_order_relaxed),
        atomic_load_explicit(&from->end, memory_order_relaxed),
        atomic_load_explicit(&from->seq, memory_order_relaxed));
}

/* The set, its size and where addr goes in it (state lock held); 1 when a range starts there. */
static int locate(set **s, size_t *n, size_t *i, uintptr_t addr)
{
    *s = atomic_load_explicit(&current, memory_order_relaxed);
    *n = *s ? atomic_load_explicit(&(*s)->n, memory_order_relaxed) : 0;
    *i = *s ? upper(*s, *n, addr) : 0;
    return *i > 0 && atomic_load_explicit(&(*s)->r[*i - 1].start, memory_order_relaxed) == addr;
}

void vt_pinned_add(uintptr_t addr, uint64_t size)
{
    if (!addr || !size || vt_cfg.disabled)
        return;
    vt_lock();
    set *s;
    size_t n, i;
    if (locate(&s, &n, &i, addr)) {
        begin_change(); /* a stale entry: the memory was freed unseen */
        put(&s->r[i - 1], addr, addr + size, vt_state.seq);
        end_change();
        vt_unlock();
        return;
    }
    if (!s || n == s->cap) {
        size_t cap = s ? 2 * s->cap : 64;
        set *grown = malloc(sizeof *grown + cap * sizeof grown->r[0]);
        if (!grown) {
            vt_unlock();
            vt_warn_once("out of memory: some pinned memory will be counted as pageable");
            return;
        }
        grown->cap = cap;
        for (size_t k = 0; k < n; k++)
            move(&grown->r[k], &s->r[k]);
        atomic_store_explicit(&grown->n, n, memory_order_relaxed);
        atomic_store_explicit(&current, grown, memory_order_release);
        s = grown;
    }
    begin_change();
    for (size_t k = n; k > i; k--)
        move(&s->r[k], &s->r[k - 1]);
    put(&s->r[i], addr, addr + size, vt_state.seq);
    atomic_store_explicit(&s->n, n + 1, memory_order_relaxed);
    end_change();
    vt_unlock();
}

void vt_pinned_remove(uintptr_t addr)
{
    if (!addr || vt_cfg.disabled)
        return;
    vt_lock();
    set *s;
    size_t n, i;
    if (locate(&s, &n, &i, addr)) {
        begin_change();
        for (size_t k = i; k < n; k++)
            move(&s->r[k - 1], &s->r[k]);
        atomic_store_explicit(&s->n, n - 1, memory_order_relaxed);
        end_change();
    }
    vt_unlock();
}

vt_pinned_range *vt_pinned_freeze_locked(size_t *n)
{
    set *s = atomic_load_explicit(&current, memory_order_relaxed);
    *n = s ? atomic_load_explicit(&s->n, memory_order_relaxed) : 0;
    vt_pinned_range *v = *n ? malloc(*n * sizeof *v) : NULL;
    if (!v) {
        *n = 0;
        return NULL;
    }
    for (size_t i = 0; i < *n; i++)
        v[i] = (vt_pinned_range){atomic_load_explicit(&s->r[i].start, memory_order_relaxed),
                                 atomic_load_explicit(&s->r[i].end, memory_order_relaxed),
                                 atomic_load_explicit(&s->r[i].seq, memory_order_relaxed)};
    return v;
}
