#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "json_out.h"
#include "locks.h"
#include "modules.h"
#include "pystack.h"
#include "stacks.h"
#include "symbols.h"
#include "table.h"
#include "unwind.h"

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
static uint32_t nstacks;
static size_t capstacks;
static uint64_t dropped;
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
    if (vt_grow(&by_id, &capstacks, (size_t)nstacks + 1, sizeof *by_id, 1024))
        return 0;
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
        h = vt_hash_fold(h, frames[i]);
    return vt_hash_end(h);
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

uint32_t vt_stack_capture(void)
{
    uint64_t frames[VT_MAX_DEPTH * 2];
    uint32_t *memo;
    int n_native =
        vt_unwind_here((uintptr_t)__builtin_frame_address(0), frames, vt_cfg.depth, &memo);
    int n_py = vt_cfg.python_stacks ? vt_pystack_capture(frames + n_native, VT_MAX_DEPTH) : 0;
    /* A call chain the unwinder knows, with no Python frames: its site, once interned, is kept
     * with the chain (no hash of the frames, no comparison) */
    if (n_py || !memo)
        return intern_recent(frames, n_native, n_py);
    if (!*memo)
        *memo = intern_recent(frames, n_native, 0) + 1; /* VT_NO_SITE + 1 is 0: not kept */
    return *memo - 1;
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
