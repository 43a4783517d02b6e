#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "json_out.h"
#include "locks.h"
#include "pystack.h"
#include "stacks.h"
#include "symbols.h"
#include "table.h"

/* An interned stack: native return addresses, then Python (code id << 32 | line) entries,
 * innermost first. The frames are the hash key. */
typedef struct {
    UT_hash_handle hh;
    uint32_t id;
    uint16_t n_native, n_py;
    uint64_t frames[];
} vt_stack;

static vt_stack *by_frames;
static vt_stack **by_id;
static uint32_t nstacks, capstacks;
static uintptr_t self_lo, self_hi; /* this library's text, whose frames are skipped */

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
            self_lo = lo;
            self_hi = hi;
            return 1;
        }
    }
    return 0;
}

void vt_stacks_init(void)
{
    dl_iterate_phdr(find_self, (void *)(uintptr_t)&vt_stacks_init);
    unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
}

static uint32_t intern(const uint64_t *frames, int n_native, int n_py)
{
    size_t keylen = (size_t)(n_native + n_py) * sizeof(uint64_t);
    uint32_t id = VT_NO_SITE;
    vt_lock_take(VT_LOCK_STACKS);
    vt_stack *s;
    HASH_FIND(hh, by_frames, frames, keylen, s);
    if (s) {
        id = s->id;
    } else if (nstacks < VT_NO_SITE - 1 && (s = malloc(sizeof *s + keylen))) {
        if (nstacks == capstacks) {
            uint32_t cap = capstacks ? capstacks * 2 : 1024;
            vt_stack **n = realloc(by_id, cap * sizeof *n);
            if (!n) {
                free(s);
                goto out;
            }
            by_id = n;
            capstacks = cap;
        }
        memset(&s->hh, 0, sizeof s->hh);
        s->n_native = (uint16_t)n_native;
        s->n_py = (uint16_t)n_py;
        memcpy(s->frames, frames, keylen);
        vt_hash_oom = 0;
        HASH_ADD_KEYPTR(hh, by_frames, s->frames, keylen, s);
        if (vt_hash_oom) {
            free(s);
            goto out;
        }
        s->id = nstacks;
        by_id[nstacks++] = s;
        id = s->id;
    }
out:
    vt_lock_give(VT_LOCK_STACKS);
    return id;
}

uint32_t vt_stack_here(void)
{
    if (!vt_cfg.stacks)
        return VT_NO_SITE;
    void *ips[VT_MAX_DEPTH + 16];
    uint64_t frames[VT_MAX_DEPTH * 2];
    int n = unw_backtrace(ips, vt_cfg.depth + 16);
    int first = 0;
    while (first < n && (uintptr_t)ips[first] >= self_lo && (uintptr_t)ips[first] < self_hi)
        first++;
    int n_native = 0;
    for (int i = first; i < n && n_native < vt_cfg.depth; i++)
        frames[n_native++] = (uint64_t)(uintptr_t)ips[i];
    int n_py = vt_cfg.python_stacks ? vt_pystack_capture(frames + n_native, VT_MAX_DEPTH) : 0;
    return intern(frames, n_native, n_py);
}

uint32_t vt_stack_count(void)
{
    vt_lock_take(VT_LOCK_STACKS);
    uint32_t n = nstacks;
    vt_lock_give(VT_LOCK_STACKS);
    return n;
}

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

/* C++ names are demangled when the process has a C++ runtime; vramtap does not bring one. */
static char *demangle(const char *name)
{
    static demangle_fn fn;
    static int looked;
    if (!looked) {
        fn = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
        looked = 1;
    }
    if (!fn || strncmp(name, "_Z", 2))
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
        /* A return address points after the call: look up the call itself. */
        uintptr_t ip = (uintptr_t)s->frames[i];
        Dl_info info;
        struct link_map *lm = NULL;
        const char *module = "?";
        uintptr_t offset = ip;
        const char *sym = NULL;
        if (dladdr1((void *)(ip - 1), &info, (void **)&lm, RTLD_DL_LINKMAP) && info.dli_fname) {
            module = base_name(info.dli_fname);
            offset = ip - (uintptr_t)info.dli_fbase;
            sym = info.dli_sname;
            /* The main program's path is empty in the loader's list. */
            const char *path = *info.dli_fname ? info.dli_fname : "/proc/self/exe";
            if (lm)
                sym = vt_symbol_lookup(path, ip - 1 - lm->l_addr);
            if (!sym)
                sym = info.dli_sname;
        }
        sig = fnv1a(sig, module, strlen(module) + 1);
        sig = fnv1a(sig, &offset, sizeof offset);
        fprintf(f, "%s{\"type\": \"native\", \"module\": ", i ? ", " : "");
        vt_json_str(f, module);
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
