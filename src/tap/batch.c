/* Per-thread buffers of device allocations and frees (batch.h). Each is a ring of
 * VT_BATCH_EVENTS events with one writer, its thread, and one reader, the holder of the books'
 * lock: the writer publishes an event by moving `tail` on (release), the reader frees its slot
 * by moving `head` on (release); each reads the other's with acquire. */
#include <pthread.h>
#include <stdlib.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "batch.h"
#include "locks.h"
#include "table.h"

/* Threads past this many buffers at once record at once. */
#define MAX_RINGS 128

typedef struct {
    _Alignas(64) _Atomic uint32_t tail; /* events buffered, counted from the buffer's making */
    _Alignas(64) _Atomic uint32_t head; /* events applied */
    _Atomic int owned;                  /* 0 once its thread ended: another may have it */
    vt_event ev[VT_BATCH_EVENTS];
} ring;
_Static_assert((VT_BATCH_EVENTS & (VT_BATCH_EVENTS - 1)) == 0,
               "a buffer's counters wrap onto its slots");

VT_HIDDEN vt_batch_count vt_batch_rings;
static ring *rings[MAX_RINGS];    /* [0, vt_batch_rings.n), written with the books' lock held */
static uint64_t applied, batches; /* events applied from buffers, and in how many holds */
static VT_TLS ring *mine;
static VT_TLS int refused; /* asked for a buffer and had none: this thread records at once */

/* The key whose destructor gives a thread's buffer up when the thread ends. */
static pthread_key_t ender;
static pthread_once_t ender_once = PTHREAD_ONCE_INIT;
static int have_ender;

/* Runs on the ending thread: what it allocates or frees from here on (another key's destructor
 * may) is recorded at once, as its buffer may be another thread's soon. */
static void give_up(void *r)
{
    mine = NULL;
    refused = 1;
    atomic_store_explicit(&((ring *)r)->owned, 0, memory_order_release);
}

static void make_ender(void)
{
    have_ender = pthread_key_create(&ender, give_up) == 0;
}

/* With the lock held: a buffer a thread that ended left applied, or NULL. */
static ring *left_over_locked(int n)
{
    for (int i = 0; i < n; i++) {
        ring *r = rings[i];
        if (!atomic_load_explicit(&r->owned, memory_order_acquire) &&
            atomic_load_explicit(&r->head, memory_order_relaxed) ==
                atomic_load_explicit(&r->tail, memory_order_acquire))
            return r;
    }
    return NULL;
}

/* A buffer for the calling thread (made outside the lock), or NULL. */
static ring *take(void)
{
    pthread_once(&ender_once, make_ender);
    if (!have_ender)
        return NULL;
    ring *fresh = aligned_alloc(_Alignof(ring), sizeof(ring));
    if (fresh) {
        atomic_init(&fresh->tail, 0);
        atomic_init(&fresh->head, 0);
    }
    vt_lock();
    int n = atomic_load_explicit(&vt_batch_rings.n, memory_order_relaxed);
    ring *r = left_over_locked(n);
    if (!r && fresh && n < MAX_RINGS) {
        r = fresh;
        fresh = NULL;
        rings[n] = r;
        atomic_store_explicit(&vt_batch_rings.n, n + 1, memory_order_release);
    }
    if (r)
        atomic_store_explicit(&r->owned, 1, memory_order_relaxed);
    vt_unlock();
    free(fresh);
    if (r && pthread_setspecific(ender, r)) {
        atomic_store_explicit(&r->owned, 0, memory_order_release); /* never used */
        return NULL;
    }
    return r;
}

int vt_batch_add(vt_event *e)
{
    ring *r = mine;
    if (!r) {
        if (refused || !(r = take())) {
            refused = 1;
            return -1;
        }
        mine = r;
    }
    e->now = vt_clock();
    uint32_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    r->ev[t & (VT_BATCH_EVENTS - 1)] = *e;
    atomic_store_explicit(&r->tail, t + 1, memory_order_release);
    return t + 1 - atomic_load_explicit(&r->head, memory_order_acquire) >= VT_BATCH_EVENTS;
}

/* The clock, read after every instruction before it has completed and before any after it
 * starts: an event buffered before the lock was taken has an earlier reading, and the buffers'
 * ends read after it hold every event read from the clock before it that is buffered. */
static uint64_t fenced_clock(void)
{
#if defined(__x86_64__)
    _mm_lfence();
    uint64_t t = __rdtsc();
    _mm_lfence();
    return t;
#else
    return vt_clock();
#endif
}

void vt_batch_apply_locked(void)
{
    int n = atomic_load_explicit(&vt_batch_rings.n, memory_order_acquire);
    uint64_t cut = fenced_clock();
    /* the buffers with events: which, and their next and end */
    uint8_t which[MAX_RINGS];
    uint32_t next[MAX_RINGS], end[MAX_RINGS];
    int k = 0;
    for (int i = 0; i < n; i++) {
        uint32_t h = atomic_load_explicit(&rings[i]->head, memory_order_relaxed);
        uint32_t t = atomic_load_explicit(&rings[i]->tail, memory_order_acquire);
        if (h != t)
            which[k] = (uint8_t)i, next[k] = h, end[k] = t, k++;
    }
    if (k)
        batches++;
    while (k) {
        int best = -1;
        uint64_t first = cut;
        for (int j = 0; j < k; j++) {
            uint64_t at = rings[which[j]]->ev[next[j] & (VT_BATCH_EVENTS - 1)].now;
            if (at <= first)
                first = at, best = j;
        }
        if (best < 0)
            break;
        ring *r = rings[which[best]];
        vt_event_apply_locked(&r->ev[next[best] & (VT_BATCH_EVENTS - 1)]);
        applied++;
        if (++next[best] == end[best]) {
            atomic_store_explicit(&r->head, next[best], memory_order_release);
            k--;
            which[best] = which[k], next[best] = next[k], end[best] = end[k];
        }
    }
    for (int j = 0; j < k; j++)
        atomic_store_explicit(&rings[which[j]]->head, next[j], memory_order_release);
}

void vt_batch_reset_after_fork(void)
{
    int n = atomic_load_explicit(&vt_batch_rings.n, memory_order_relaxed);
    for (int i = 0; i < n; i++) {
        ring *r = rings[i];
        atomic_store_explicit(&r->head, atomic_load_explicit(&r->tail, memory_order_relaxed),
                              memory_order_relaxed);
        if (r != mine)
            atomic_store_explicit(&r->owned, 0, memory_order_relaxed);
    }
}

void vt_batch_debug(void)
{
    if (!vt_cfg.thread_buffers)
        return;
    vt_lock();
    unsigned long long events = applied, holds = batches;
    int n = atomic_load_explicit(&vt_batch_rings.n, memory_order_relaxed);
    vt_unlock();
    vt_debug("thread buffers: %llu events applied in %llu holds of the books' lock, from %d "
             "buffers",
             events, holds, n);
}
