/* The calling thread's native frames (unwind.h). libunwind's fast trace (unw_backtrace, with a
 * per-thread cache of how to step over each return address) costs about 77 instructions a
 * frame here; a call chain seen before is not walked: see "Chains seen before" below. */
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

/* ---- Chains seen before ----
 * A call chain seen before is not walked: its return addresses are read from where they lie in
 * the stack. Where each lies is found the second time the chain is seen, by a walk that reports
 * each frame's stack pointer (libunwind's unw_step, about ten times slower than the fast
 * trace). A chain is looked up by the address of the capturing frame (`sp`), then checked
 * return address by return address from there out. The first lies just above that frame: the
 * capture's caller put it there with its call, so it is fresh and names that caller and the
 * call. A function called from a given place with the stack at a given depth has its frame at
 * a given place (unless it sizes its frame as it runs, with alloca), so the next return address
 * checked is the one its own caller put there, and so on: checked out to the deepest frame
 * kept, the frames are the chain's. Only on the thread's own stack, whose pages stay mapped as
 * long as the thread runs. */
#define CHAIN_SETS 32
#define CHAIN_WAYS 4
#define MISSED_SLOTS 128

typedef struct {
    uintptr_t sp;
    int n_slots;     /* return addresses checked, from the first above sp out; 0: an empty way */
    int own;         /* of them, the innermost, which are skipped ones (this library's) */
    int hit;         /* since it was recorded, or since a miss in its set spared it */
    uint32_t memo;   /* kept for vt_unwind_here's caller (unwind.h) */
    uintptr_t *slot; /* n_slots stack addresses, then the return addresses they held */
} chain;

typedef struct {
    uintptr_t stack_lo, stack_hi;
    int nskipped;                  /* the skipped ranges the chains were recorded with */
    uint64_t missed[MISSED_SLOTS]; /* chains missed, by hash: the second miss records */
    chain set[CHAIN_SETS][CHAIN_WAYS];
} chain_cache;

static VT_TLS chain_cache *cache;
static VT_TLS int cache_failed; /* asked once: the stack's bounds, or memory, were not had */
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static int cache_ok;

static void chains_clear(chain_cache *c)
{
    for (int s = 0; s < CHAIN_SETS; s++)
        for (int w = 0; w < CHAIN_WAYS; w++) {
            free(c->set[s][w].slot);
            c->set[s][w] = (chain){0};
        }
}

static void cache_gone(void *p)
{
    chain_cache *c = p;
    cache = NULL;
    chains_clear(c);
    free(c);
}

static void cache_key_make(void)
{
    cache_ok = !pthread_key_create(&cache_key, cache_gone);
}

/* The thread's cache, made with the bounds of its stack; NULL when that cannot be. */
static chain_cache *cache_here(void)
{
    if (cache || cache_failed)
        return cache;
    cache_failed = 1;
    pthread_once(&cache_once, cache_key_make);
    pthread_attr_t attr;
    if (!cache_ok || pthread_getattr_np(pthread_self(), &attr))
        return NULL;
    void *lo = NULL;
    size_t size = 0;
    int got = !pthread_attr_getstack(&attr, &lo, &size);
    pthread_attr_destroy(&attr);
    chain_cache *c = got ? vt_pystack_thread_data(cache_key, sizeof *c) : NULL;
    if (c) {
        c->stack_lo = (uintptr_t)lo;
        c->stack_hi = (uintptr_t)lo + size;
        cache_failed = 0;
    }
    return cache = c;
}

static chain *set_of(chain_cache *c, uintptr_t sp)
{
    return c->set[vt_hash_end(vt_hash_fold(0, sp)) % CHAIN_SETS];
}

/* The frames kept of a chain seen before at sp, when its return addresses are all still where
 * they were, and its memo; 0 otherwise. Reads the thread's own stack above the capture's
 * frame. */
VT_NO_SANITIZE static int chain_frames(chain_cache *c, uintptr_t sp, uint64_t *frames, int depth,
                                       uint32_t **memo)
{
    if (c->nskipped != atomic_load_explicit(&nskipped, memory_order_acquire))
        return 0;
    chain *set = set_of(c, sp);
    for (int w = 0; w < CHAIN_WAYS; w++) {
        chain *e = &set[w];
        if (e->sp != sp || !e->n_slots || e->n_slots - e->own > depth)
            continue;
        int n = e->n_slots;
        const uintptr_t *slot = e->slot, *ret = e->slot + n;
        /* Every slot checked, without a branch per slot: a mismatch is rare, and where it lies
         * does not matter. */
        uintptr_t differ = 0;
#pragma GCC unroll 4
        for (int i = 0; i < n; i++)
            differ |= *(const uintptr_t *)slot[i] ^ ret[i];
        if (differ)
            continue;
        memcpy(frames, ret + e->own, (size_t)(n - e->own) * sizeof *frames);
        e->hit = 1;
        *memo = &e->memo;
        return e->n_slots - e->own;
    }
    return 0;
}

/* The walked frames that name a chain among the misses: from ips[2] (ips[0] is in walk, ips[1]
 * in vt_unwind_here) to the program's call. */
static uint64_t missed_hash(uintptr_t sp, void *const *ips, int first)
{
    uint64_t h = sp;
    for (int i = 2; i <= first; i++)
        h = vt_hash_fold(h, (uintptr_t)ips[i]);
    return vt_hash_end(h);
}

/* The way of sp's set a new chain takes: an empty one, else one not hit since it was recorded
 * or last spared; NULL when each was (each is then spared once: two chains that took turns in
 * one way would otherwise pay the slow walk at every allocation). */
static chain *way_for(chain_cache *c, uintptr_t sp)
{
    chain *set = set_of(c, sp);
    for (int w = 0; w < CHAIN_WAYS; w++)
        if (!set[w].n_slots)
            return &set[w];
    for (int w = 0; w < CHAIN_WAYS; w++)
        if (!set[w].hit)
            return &set[w];
    for (int w = 0; w < CHAIN_WAYS; w++)
        set[w].hit = 0;
    return NULL;
}

/* Where the return addresses of ips[k .. n - 1] lie, ips[k] being the first above sp: a walk
 * that reports stack pointers, from a frame at the same depth as walk's, must see the same
 * frames there, each return address at its stack pointer less 8 (the call pushed it there).
 * Nothing is recorded otherwise (a signal frame, a frame the fast walk read differently). */
__attribute__((noinline)) VT_NO_SANITIZE static void
chain_record(chain_cache *c, uintptr_t sp, void *const *ips, int first, int n)
{
    int skipped_now = atomic_load_explicit(&nskipped, memory_order_acquire);
    if (c->nskipped != skipped_now) {
        chains_clear(c);
        c->nskipped = skipped_now;
    }
    uint64_t h = missed_hash(sp, ips, first);
    uint64_t *seen = &c->missed[h % MISSED_SLOTS];
    /* The low bit says which: seen once, or found not to record (then it is not tried again) */
    if (*seen == (h & ~1ULL))
        return;
    if (*seen != (h | 1)) {
        *seen = h | 1;
        return;
    }
    chain *e = way_for(c, sp);
    uintptr_t *slot = e ? malloc(2 * (size_t)n * sizeof *slot) : NULL;
    unw_context_t ctx;
    unw_cursor_t cur;
    if (!slot || unw_getcontext(&ctx) || unw_init_local(&cur, &ctx)) {
        free(slot);
        return;
    }
    /* The first step lands in vt_unwind_here, at another call than ips[1]'s */
    int i = 1, k = -1, ok = 1;
    while (ok && i < n && unw_step(&cur) > 0) {
        unw_word_t ip = 0, at = 0; /* a failed read ends the walk before `where` is used */
        ok = !unw_get_reg(&cur, UNW_REG_IP, &ip) && !unw_get_reg(&cur, UNW_REG_SP, &at);
        uintptr_t where = (uintptr_t)at - 8;
        if (ok && where > sp) {
            if (k < 0)
                k = i;
            ok = ip == (uintptr_t)ips[i] && where + 8 <= c->stack_hi &&
                 *(const uintptr_t *)where == ip;
            slot[i - k] = where;
            slot[n + i - k] = ip;
        } else if (k >= 0) {
            ok = 0; /* a frame below the one before it: not a plain chain of calls */
        }
        i++;
    }
    if (!ok || i != n || k < 2 || k > first) {
        free(slot);
        *seen = h & ~1ULL;
        return;
    }
    int n_slots = n - k;
    memmove(slot + n_slots, slot + n, (size_t)n_slots * sizeof *slot);
    free(e->slot);
    *e = (chain){.sp = sp, .n_slots = n_slots, .own = first - k, .slot = slot};
}

int vt_unwind_here(uintptr_t sp, uint64_t *frames, int depth, uint32_t **memo)
{
    void *ips[VT_MAX_DEPTH + 64];
    chain_cache *c = cache_here();
    int cached = c && sp >= c->stack_lo && sp < c->stack_hi;
    *memo = NULL;
    if (cached) {
        int got = chain_frames(c, sp, frames, depth, memo);
        if (got)
            return got;
    }
    int first;
    int n = walk(ips, depth, &first);
    int n_native = 0;
    for (int i = first; i < n && n_native < depth; i++)
        frames[n_native++] = (uint64_t)(uintptr_t)ips[i];
    if (cached && n_native)
        chain_record(c, sp, ips, first, first + n_native);
    return n_native;
}
