#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "json_out.h"
#include "locks.h"
#include "modules.h"
#include "pystack.h"
#include "stacks.h"
#include "symbols.h"
#include "table.h"

/* An interned stack: native return addresses, then Python (code id << 32 | line) entries,
 * innermost first, then the module of each native frame. The frames are the hash key. */
typedef struct {
    UT_hash_handle hh;
    uint32_t id;
    uint16_t n_native, n_py;
    uint64_t frames[];
} vt_stack;

static uint16_t *modules_of(const vt_stack *s)
{
    return (uint16_t *)(s->frames + s->n_native + s->n_py);
}

static vt_stack *by_frames;
static vt_stack **by_id;
static uint32_t nstacks, capstacks;
static uint64_t dropped;
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

void vt_stacks_init(void)
{
    dl_iterate_phdr(find_self, (void *)(uintptr_t)&vt_stacks_init);
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

void vt_stacks_skip_cuda(void)
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

static vt_stack *find_locked(const uint64_t *frames, size_t keylen)
{
    vt_stack *s;
    HASH_FIND(hh, by_frames, frames, keylen, s);
    return s;
}

/* Publishes `s` (its key and modules filled in); 0 when it could not be. */
static int add_locked(vt_stack *s, size_t keylen)
{
    if (nstacks >= VT_MAX_STACKS)
        return 0;
    if (nstacks == capstacks) {
        uint32_t cap = capstacks ? capstacks * 2 : 1024;
        vt_stack **n = realloc(by_id, cap * sizeof *n);
        if (!n)
            return 0;
        by_id = n;
        capstacks = cap;
    }
    vt_hash_oom = 0;
    HASH_ADD_KEYPTR(hh, by_frames, s->frames, keylen, s);
    if (vt_hash_oom)
        return 0;
    s->id = nstacks;
    by_id[nstacks++] = s;
    return 1;
}

/* A stack seen before costs one lookup under the lock. A new one has its modules recorded
 * first, with no lock held (that asks the loader), then is published. NULL when it could not
 * be interned. */
static const vt_stack *intern(const uint64_t *frames, int n_native, int n_py)
{
    size_t keylen = (size_t)(n_native + n_py) * sizeof(uint64_t);
    vt_lock_take(VT_LOCK_STACKS);
    const vt_stack *found = find_locked(frames, keylen);
    vt_lock_give(VT_LOCK_STACKS);
    if (found)
        return found;
    vt_stack *s = malloc(sizeof *s + keylen + (size_t)n_native * sizeof(uint16_t));
    if (s) {
        memset(&s->hh, 0, sizeof s->hh);
        s->n_native = (uint16_t)n_native;
        s->n_py = (uint16_t)n_py;
        memcpy(s->frames, frames, keylen);
        vt_modules_resolve(frames, n_native, modules_of(s));
    }
    vt_lock_take(VT_LOCK_STACKS);
    found = find_locked(frames, keylen);
    int added = !found && s && add_locked(s, keylen);
    if (added)
        found = s;
    else if (!found)
        dropped++;
    vt_lock_give(VT_LOCK_STACKS);
    if (!added)
        free(s);
    return found;
}

/* Each thread remembers the stacks it interned last, by a hash of their frames: an allocation
 * from a call chain seen before costs a hash and a comparison, with no lock and no walk of the
 * shared table. Interned stacks are never freed, so a remembered one stays valid. */
#define RECENT_SLOTS 64
static VT_TLS const vt_stack *recent[RECENT_SLOTS];

static uint64_t frames_hash(const uint64_t *frames, int n)
{
    uint64_t h = (uint64_t)n;
    for (int i = 0; i < n; i++)
        h = (h ^ frames[i]) * 0x9e3779b97f4a7c15ULL;
    return h ^ h >> 32;
}

static uint32_t intern_recent(const uint64_t *frames, int n_native, int n_py)
{
    const vt_stack **slot = &recent[frames_hash(frames, n_native + n_py) % RECENT_SLOTS];
    const vt_stack *s = *slot;
    if (!s || s->n_native != n_native || s->n_py != n_py ||
        memcmp(s->frames, frames, (size_t)(n_native + n_py) * sizeof(uint64_t))) {
        s = intern(frames, n_native, n_py);
        if (!s)
            return VT_NO_SITE;
        *slot = s;
    }
    return s->id;
}

/* The frames above the program's call (this library's, and attached, the CUDA libraries') are
 * walked and dropped. A thread walks as many more than the depth kept as it dropped last time,
 * and again, further, when that was too few: each frame walked costs about as much as a hash
 * lookup. */
static VT_TLS int dropped_last = -1;

static int walk(void **ips, int *first)
{
    int extra = dropped_last >= 0 ? dropped_last : margin;
    for (;;) {
        int max = vt_cfg.depth + extra;
        int n = backtrace_here(ips, max);
        int f = 0;
        while (f < n && is_skipped(ips[f]))
            f++;
        if (n == max && n - f < vt_cfg.depth && extra < margin) {
            extra = margin;
            continue;
        }
        dropped_last = f;
        *first = f;
        return n;
    }
}

uint32_t vt_stack_here(void)
{
    if (!vt_cfg.stacks)
        return VT_NO_SITE;
    void *ips[VT_MAX_DEPTH + 64];
    uint64_t frames[VT_MAX_DEPTH * 2];
    int first;
    int n = walk(ips, &first);
    int n_native = 0;
    for (int i = first; i < n && n_native < vt_cfg.depth; i++)
        frames[n_native++] = (uint64_t)(uintptr_t)ips[i];
    int n_py = vt_cfg.python_stacks ? vt_pystack_capture(frames + n_native, VT_MAX_DEPTH) : 0;
    return intern_recent(frames, n_native, n_py);
}

uint32_t vt_stack_count(uint64_t *not_interned)
{
    vt_lock_take(VT_LOCK_STACKS);
    uint32_t n = nstacks;
    if (not_interned)
        *not_interned = dropped;
    vt_lock_give(VT_LOCK_STACKS);
    return n;
}

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

/* C++ names are demangled when the process has a C++ runtime; vramtap does not bring one. */
static char *demangle(const char *name)
{
    static atomic_int looked;
    static _Atomic(demangle_fn) found;
    if (strncmp(name, "_Z", 2))
        return NULL;
    if (!atomic_load(&looked)) {
        atomic_store(&found, (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle"));
        atomic_store(&looked, 1);
    }
    demangle_fn fn = atomic_load(&found);
    if (!fn)
        return NULL;
    int status = 0;
    return fn(name, NULL, NULL, &status);
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* vramtap's own Python hooks (the module-call wrapper sits in every forward's stack): skipped
 * like the library's own native frames. */
static int own_python_frame(const char *file)
{
    static const char *const own[] = {"/vramtap/vramtap_torch.py", "/vramtap/sitecustomize.py"};
    size_t n = file ? strlen(file) : 0;
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        size_t k = strlen(own[i]);
        if (n >= k && !strcmp(file + n - k, own[i]))
            return 1;
    }
    return 0;
}

/* The signature hashes what is the same in every run: module names and offsets, Python files,
 * functions and lines; never raw addresses. */
void vt_stack_write_json(FILE *f, uint32_t id, uint32_t index)
{
    vt_lock_take(VT_LOCK_STACKS);
    vt_stack *s = id < nstacks ? by_id[id] : NULL;
    vt_lock_give(VT_LOCK_STACKS);
    if (!s)
        return;
    uint64_t sig = 0xcbf29ce484222325ULL;
    fprintf(f, "{\"id\": %u, \"frames\": [", index);
    for (int i = 0; i < s->n_native; i++) {
        /* Names come from the module recorded at interning and its file on disk, never from
         * what is loaded now. A return address points after the call: the symbol is the
         * call's. */
        uintptr_t ip = (uintptr_t)s->frames[i], offset = ip;
        uint16_t mid = modules_of(s)[i];
        const char *module = "?", *sym = NULL;
        if (mid != VT_NO_MODULE) {
            vt_module m = vt_module_get(mid);
            module = base_name(m.path);
            offset = ip - m.base;
            sym = vt_symbol_lookup(m.path, offset - 1);
        }
        sig = fnv1a(sig, module, strlen(module) + 1);
        sig = fnv1a(sig, &offset, sizeof offset);
        fprintf(f, "%s{\"type\": \"native\", \"module\": ", i ? ", " : "");
        vt_json_str(f, module);
        fputs(", \"module_id\": ", f);
        if (mid != VT_NO_MODULE)
            fprintf(f, "%u", mid);
        else
            fputs("null", f);
        fprintf(f, ", \"offset\": \"0x%lx\", \"symbol\": ", (unsigned long)offset);
        char *dem = sym ? demangle(sym) : NULL;
        vt_json_str(f, dem ? dem : sym);
        free(dem);
        fputc('}', f);
    }
    int written = s->n_native;
    for (int i = 0; i < s->n_py; i++) {
        uint64_t e = s->frames[s->n_native + i];
        uint32_t code = (uint32_t)(e >> 32), line = (uint32_t)e;
        const char *file = vt_pystack_file(code), *fn = vt_pystack_function(code);
        if (own_python_frame(file))
            continue;
        sig = fnv1a(sig, file ? file : "", file ? strlen(file) + 1 : 1);
        sig = fnv1a(sig, fn ? fn : "", fn ? strlen(fn) + 1 : 1);
        sig = fnv1a(sig, &line, sizeof line);
        fprintf(f, "%s{\"type\": \"python\", \"file\": ", written++ ? ", " : "");
        vt_json_str(f, file);
        fprintf(f, ", \"function\": ");
        vt_json_str(f, fn);
        fprintf(f, ", \"line\": %u}", line);
    }
    fprintf(f, "], \"signature\": \"%016llx\"}", (unsigned long long)sig);
}
