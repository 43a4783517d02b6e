/* The calling thread's native frames (unwind.h). libunwind's fast trace (unw_backtrace, with a
 * per-thread cache of how to step over each return address) costs about 77 instructions a
 * frame here; a call chain seen before is mostly not walked: see "Outer frames" below. */
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "pyapi.h"
#include "stacks.h"
#include "unwind.h"

/* Code whose frames are skipped at the top of a stack: this library's text, and attached
 * through CUPTI, the driver's, CUPTI's and the runtime's (a callback runs inside them: what
 * the program called is below). */
#define MAX_SKIPPED 16
static struct {
    uintptr_t lo, hi;
} skipped[MAX_SKIPPED];
static atomic_int nskipped; /* an entry is written before it is counted */
/* Frames walked beyond the depth kept, for those skipped (more when attached). */
static int margin = 16;

#ifdef __SANITIZE_THREAD__
/* libunwind frees its per-thread caches (unw_backtrace's trace cache among them) from a
 * thread-key destructor that runs after ThreadSanitizer has retired the thread, and crashes
 * there: a ThreadSanitizer build walks the stack step by step with one shared cache. */
#define CACHE_POLICY UNW_CACHE_GLOBAL
static int backtrace_here(void **ips, int max)
{
    unw_context_t ctx;
    unw_cursor_t cur;
    int n = 0;
    if (unw_getcontext(&ctx) || unw_init_local(&cur, &ctx))
        return 0;
    while (n < max && unw_step(&cur) > 0) {
        unw_word_t ip;
        if (unw_get_reg(&cur, UNW_REG_IP, &ip))
            break;
        ips[n++] = (void *)ip;
    }
    return n;
}
#else
#define CACHE_POLICY UNW_CACHE_PER_THREAD
#define backtrace_here unw_backtrace
#endif

static void skip_range(uintptr_t lo, uintptr_t hi)
{
    int n = atomic_load(&nskipped);
    if (n < MAX_SKIPPED) {
        skipped[n].lo = lo;
        skipped[n].hi = hi;
        atomic_store(&nskipped, n + 1);
    }
}

static int find_self(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    uintptr_t probe = (uintptr_t)data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (probe >= lo && probe < hi) {
            skip_range(lo, hi);
            return 1;
        }
    }
    return 0;
}

void vt_unwind_init(void)
{
    dl_iterate_phdr(find_self, (void *)(uintptr_t)&vt_unwind_init);
    unw_set_caching_policy(unw_local_addr_space, CACHE_POLICY);
}

static int find_cuda(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    static const char *const prefixes[] = {"libcupti.so", "libcuda.so", "libcudart.so"};
    const char *name = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    name = name ? name + 1 : info->dlpi_name;
    for (size_t p = 0; name && p < sizeof prefixes / sizeof prefixes[0]; p++) {
        if (strncmp(name, prefixes[p], strlen(prefixes[p])))
            continue;
        for (int i = 0; i < info->dlpi_phnum; i++) {
            const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
            if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X))
                skip_range(info->dlpi_addr + ph->p_vaddr,
                           info->dlpi_addr + ph->p_vaddr + ph->p_memsz);
        }
    }
    return 0;
}

void vt_unwind_skip_cuda(void)
{
    margin = 64;
    dl_iterate_phdr(find_cuda, NULL);
}

static int is_skipped(const void *ip)
{
    for (int i = 0, n = atomic_load_explicit(&nskipped, memory_order_acquire); i < n; i++)
        if ((uintptr_t)ip >= skipped[i].lo && (uintptr_t)ip < skipped[i].hi)
            return 1;
    return 0;
}

/* How many of the n frames walked, from the innermost, are skipped ones. */
static int skipped_above(void *const *ips, int n)
{
    int f = 0;
    while (f < n && is_skipped(ips[f]))
        f++;
    return f;
}

/* The frames above the program's call are walked and dropped. A thread walks as many more than
 * the depth kept as it dropped last time, and again, further, when that was too few. */
static VT_TLS int dropped_last = -1;

__attribute__((noinline)) static int walk(void **ips, int depth, int *first)
{
    int extra = dropped_last >= 0 ? dropped_last : margin;
    for (;;) {
        int max = depth + extra;
        int n = backtrace_here(ips, max);
        int f = skipped_above(ips, n);
        if (n == max && n - f < depth && extra < margin) {
            extra = margin;
            continue;
        }
        dropped_last = f;
        *first = f;
        return n;
    }
}

/* ---- Outer frames ----
 * A call chain seen before is walked only up to the program's call; the frames beyond it are
 * read from where their return addresses lie in the stack, found the second time the chain is
 * seen by a walk that reports each frame's stack pointer (libunwind's unw_step, about ten
 * times slower). The chain is known by where the capture runs (the caller's frame address)
 * and the frames walked from there to the program's call: the same functions at the same
 * place put the frames beyond at the same addresses, and while those addresses still hold the
 * return addresses seen, the frames are those. Only on the thread's own stack, whose pages
 * stay mapped as long as the thread runs. */
#define OUTER_ENTRIES 64
#define OUTER_KEY 14 /* frames between the capture and the program's call, and the call */
#define MISSED_SLOTS 128

typedef struct {
    uintptr_t sp;
    int n_key, n_outer;
    int hit; /* since it was recorded, or since a miss elsewhere spared it */
    uintptr_t key[OUTER_KEY];
    uintptr_t *slot; /* n_outer stack addresses, then the return addresses they held */
} outer_entry;

typedef struct {
    uintptr_t stack_lo, stack_hi;
    uint64_t missed[MISSED_SLOTS]; /* chains missed, by hash: the second miss records */
    outer_entry e[OUTER_ENTRIES];
} outer_cache;

static VT_TLS outer_cache *outer;
static VT_TLS int outer_failed; /* asked once: the stack's bounds, or memory, were not had */
static pthread_key_t outer_key;
static pthread_once_t outer_once = PTHREAD_ONCE_INIT;
static int outer_ok;

static void outer_gone(void *p)
{
    outer_cache *c = p;
    outer = NULL;
    for (int i = 0; i < OUTER_ENTRIES; i++)
        free(c->e[i].slot);
    free(c);
}

static void outer_key_make(void)
{
    outer_ok = !pthread_key_create(&outer_key, outer_gone);
}

/* The thread's cache, made with the bounds of its stack; NULL when that cannot be. */
static outer_cache *outer_here(void)
{
    if (outer || outer_failed)
        return outer;
    outer_failed = 1;
    pthread_once(&outer_once, outer_key_make);
    pthread_attr_t attr;
    if (!outer_ok || pthread_getattr_np(pthread_self(), &attr))
        return NULL;
    void *lo = NULL;
    size_t size = 0;
    int got = !pthread_attr_getstack(&attr, &lo, &size);
    pthread_attr_destroy(&attr);
    outer_cache *c = got ? vt_pystack_thread_data(outer_key, sizeof *c) : NULL;
    if (c) {
        c->stack_lo = (uintptr_t)lo;
        c->stack_hi = (uintptr_t)lo + size;
        outer_failed = 0;
    }
    return outer = c;
}

/* The walked frames that name the chain: from ips[2] (ips[0] is in walk or walk_prefix, ips[1]
 * in vt_unwind_here at a call site of each) to the program's call. */
static uint64_t key_hash(uintptr_t sp, void *const *ips, int first)
{
    uint64_t h = sp;
    for (int i = 2; i <= first; i++)
        h = vt_hash_fold(h, (uintptr_t)ips[i]);
    return vt_hash_end(h);
}

static int key_fits(int first)
{
    return first >= 2 && first - 1 <= OUTER_KEY;
}

static outer_entry *entry_of(outer_cache *c, uint64_t h)
{
    return &c->e[h % OUTER_ENTRIES];
}

/* The frames beyond the program's call, when the chain is one seen before and its return
 * addresses are still where they were; 0 otherwise. Reads the thread's own stack above the
 * capture's frame. */
VT_NO_SANITIZE static int outer_frames(outer_cache *c, uintptr_t sp, void *const *ips, int first,
                                       uint64_t *frames, int room)
{
    outer_entry *e = entry_of(c, key_hash(sp, ips, first));
    if (e->sp != sp || e->n_key != first - 1 || e->n_outer > room)
        return 0;
    for (int i = 0; i < e->n_key; i++)
        if (e->key[i] != (uintptr_t)ips[i + 2])
            return 0;
    const uintptr_t *slot = e->slot, *ret = e->slot + e->n_outer;
    for (int i = 0; i < e->n_outer; i++)
        if (*(const uintptr_t *)slot[i] != ret[i])
            return 0;
    for (int i = 0; i < e->n_outer; i++)
        frames[i] = ret[i];
    e->hit = 1;
    return e->n_outer + 1;
}

/* Where the return addresses of ips[first + 1 .. n - 1] lie: a walk that reports stack
 * pointers, from a frame at the same depth as walk's, must see the same frames, each return
 * address at its stack pointer less 8 (the call pushed it there). Nothing is recorded
 * otherwise (a signal frame, a frame the fast walk read differently). */
__attribute__((noinline)) VT_NO_SANITIZE static void
outer_record(outer_cache *c, uintptr_t sp, void *const *ips, int first, int n)
{
    uint64_t h = key_hash(sp, ips, first);
    uint64_t *seen = &c->missed[h % MISSED_SLOTS];
    outer_entry *e = entry_of(c, h);
    /* The low bit says which: seen once, or found not to record (then it is not tried again) */
    if (*seen == (h & ~1ULL))
        return;
    if (*seen != (h | 1)) {
        *seen = h | 1;
        return;
    }
    /* A chain in use keeps its entry against one that is not yet: two that take turns in one
     * entry would otherwise pay the slow walk at every allocation. */
    if (e->hit) {
        e->hit = 0;
        return;
    }
    int n_outer = n - first - 1;
    if (n_outer < 1)
        return;
    uintptr_t *slot = malloc(2 * (size_t)n_outer * sizeof *slot);
    unw_context_t ctx;
    unw_cursor_t cur;
    if (!slot || unw_getcontext(&ctx) || unw_init_local(&cur, &ctx)) {
        free(slot);
        return;
    }
    /* The first step lands in vt_unwind_here, which is ips[1] */
    int i = 1, ok = 1;
    while (ok && i < n && unw_step(&cur) > 0) {
        unw_word_t ip, at;
        ok = !unw_get_reg(&cur, UNW_REG_IP, &ip) && !unw_get_reg(&cur, UNW_REG_SP, &at);
        if (ok && i > first) {
            uintptr_t where = (uintptr_t)at - 8;
            ok = ip == (uintptr_t)ips[i] && where > sp && where + 8 <= c->stack_hi &&
                 *(const uintptr_t *)where == ip;
            slot[i - first - 1] = where;
            slot[n_outer + i - first - 1] = ip;
        }
        i++;
    }
    if (!ok || i != n) {
        free(slot);
        *seen = h & ~1ULL;
        return;
    }
    free(e->slot);
    e->sp = sp;
    e->n_key = first - 1;
    for (int k = 0; k < e->n_key; k++)
        e->key[k] = (uintptr_t)ips[k + 2];
    e->n_outer = n_outer;
    e->slot = slot;
}

/* As far as the program's call (at most `max` frames): a function of its own, so that its
 * frames are walk's. The index of the program's frame, or -1 when the walk did not reach it. */
__attribute__((noinline)) static int walk_prefix(void **ips, int max)
{
    int n = backtrace_here(ips, max);
    int f = skipped_above(ips, n);
    return f < n ? f : -1;
}

int vt_unwind_here(uintptr_t sp, uint64_t *frames, int depth)
{
    void *ips[VT_MAX_DEPTH + 64];
    int first = dropped_last;
    outer_cache *c = outer_here();
    int cached = c && sp >= c->stack_lo && sp < c->stack_hi;
    if (cached && first >= 0 && key_fits(first)) {
        /* the walk up to the program's call (no further than the frames dropped last time),
         * then the frames beyond from the stack */
        int f = walk_prefix(ips, first + 1);
        if (f >= 0 && key_fits(f)) {
            frames[0] = (uint64_t)(uintptr_t)ips[f];
            int got = outer_frames(c, sp, ips, f, frames + 1, depth - 1);
            if (got)
                return got;
        }
    }
    int n = walk(ips, depth, &first);
    int n_native = 0;
    for (int i = first; i < n && n_native < depth; i++)
        frames[n_native++] = (uint64_t)(uintptr_t)ips[i];
    if (cached && key_fits(first))
        outer_record(c, sp, ips, first, first + n_native);
    return n_native;
}
