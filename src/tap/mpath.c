#include <stdlib.h>
#include <string.h>

#include "json_out.h"
#include "locks.h"
#include "mpath.h"
#include "pyframes.h"
#include "pylayout.h"
#include "snapshot_keys.h"
#include "table.h" /* uthash, with the library's out-of-memory handling */
#include "vramtap.h"

_Static_assert(VRAMTAP_MODULE_RECOMPUTED == VT_MPATH_RECOMPUTED, "one recomputation bit");

_Atomic uint32_t vramtap_module_current;
_Atomic uint32_t vramtap_module_allocs;

typedef struct {
    UT_hash_handle hh;
    uint32_t id;
    char path[];
} mpath;

/* Guarded by VT_LOCK_MPATHS. Paths are never freed: the writer reads them unlocked. By id in
 * pages allocated as they fill: nothing moves. */
#define PAGE 1024u
static mpath *by_path, **by_id[VT_MPATH_MAX / PAGE];
static _Atomic uint32_t npaths; /* written under the lock, read without it */

/* The slot of path npaths, NULL when memory ran out (lock held). */
static mpath **next_slot(void)
{
    mpath ***page = &by_id[npaths / PAGE];
    if (!*page)
        *page = calloc(PAGE, sizeof **page);
    return *page ? &(*page)[npaths % PAGE] : NULL;
}

VT_EXPORT unsigned int vramtap_module_path(const char *path)
{
    if (!path)
        return 0;
    size_t len = strlen(path);
    mpath *m = malloc(sizeof *m + len + 1);
    if (!m)
        return 0;
    memcpy(m->path, path, len + 1);
    uint32_t id = 0;
    vt_lock_take(VT_LOCK_MPATHS);
    mpath *old, **slot;
    HASH_FIND(hh, by_path, m->path, len, old);
    if (old) {
        id = old->id;
    } else if (npaths < VT_MPATH_MAX && (slot = next_slot())) {
        vt_hash_oom = 0;
        m->id = npaths + 1;
        HASH_ADD_KEYPTR(hh, by_path, m->path, len, m);
        if (!vt_hash_oom) {
            *slot = m;
            atomic_store_explicit(&npaths, npaths + 1, memory_order_release);
            id = m->id;
            m = NULL;
        }
    }
    vt_lock_give(VT_LOCK_MPATHS);
    free(m);
    return id;
}

VT_EXPORT unsigned int vramtap_module_enter(unsigned int id)
{
    return atomic_exchange_explicit(&vramtap_module_current, id, memory_order_relaxed);
}

/* ---- the module of an allocation, read from the allocating thread's frames ---- */

VT_TLS uint64_t vt_mpath_looked;
_Atomic uint32_t vramtap_module_backward;

/* Module objects the hooks named, by address (guarded by VT_LOCK_MPATHS). */
typedef struct {
    UT_hash_handle hh;
    const void *module;
    uint32_t id;
} bound;
static bound *bounds;

VT_EXPORT int vramtap_module_bind(const void *module, unsigned int id)
{
    if (!module || !id)
        return -1;
    bound *b = malloc(sizeof *b), *old;
    if (!b)
        return -1;
    *b = (bound){.module = module, .id = id};
    int ok = 1;
    vt_lock_take(VT_LOCK_MPATHS);
    HASH_FIND_PTR(bounds, &module, old);
    if (old) {
        old->id = id;
    } else {
        vt_hash_oom = 0;
        HASH_ADD_PTR(bounds, module, b);
        ok = !vt_hash_oom;
        if (ok)
            b = NULL;
    }
    vt_lock_give(VT_LOCK_MPATHS);
    free(b);
    return ok ? 0 : -1;
}

VT_EXPORT void vramtap_module_unbind(const void *module)
{
    bound *b;
    vt_lock_take(VT_LOCK_MPATHS);
    HASH_FIND_PTR(bounds, &module, b);
    if (b)
        HASH_DEL(bounds, b);
    vt_lock_give(VT_LOCK_MPATHS);
    free(b);
}

/* The path id the hooks bound to the first of modules[0, n) they named, under one lock; its
 * index in *at (n where they named none). */
static uint32_t first_bound(const void *const *modules, int n, int *at)
{
    uint32_t id = 0;
    int i = 0;
    vt_lock_take(VT_LOCK_MPATHS);
    for (; i < n && !id; i++) {
        bound *b;
        HASH_FIND_PTR(bounds, &modules[i], b);
        id = b ? b->id : 0;
    }
    vt_lock_give(VT_LOCK_MPATHS);
    *at = id ? i - 1 : n;
    return id;
}

vt_mpath_flag vt_mpath_watching;

VT_EXPORT int vramtap_module_watch(const void *module_call, const void *backward_call)
{
    if (!vt_pyframes_watch(module_call, backward_call))
        return 0;
    atomic_store_explicit(&vt_mpath_watching.on, 1, memory_order_relaxed);
    return 1;
}

/* Appends `.name` (or `name` at the start) to path[*len], cut short where it does not fit. */
static void path_append(char *path, size_t cap, size_t *len, const char *name)
{
    if (*len && *len + 1 < cap)
        path[(*len)++] = '.';
    while (*name && *len + 1 < cap)
        path[(*len)++] = *name++;
    path[*len] = 0;
}

static const void *class_of(const void *obj)
{
    const void *type;
    memcpy(&type, (const char *)obj + VT_PY_OB_TYPE, sizeof type);
    return type;
}

/* The class name of module object `obj`, as type(obj).__name__ gives it. Read while its frame
 * runs, so the object and its class are alive. */
static const char *class_name(const void *obj)
{
    const char *type = class_of(obj), *name;
    unsigned long flags;
    memcpy(&name, type + VT_PY_TP_NAME, sizeof name);
    memcpy(&flags, type + VT_PY_TP_FLAGS, sizeof flags);
    const char *dot = flags & VT_PY_HEAPTYPE ? NULL : strrchr(name, '.');
    return dot ? dot + 1 : name;
}

/* The path this thread last made for modules the hooks did not name: the id of the named module
 * above them, their classes, innermost first, and the path's id. A path is made of the named
 * module's path and those classes' names, and classes outlive their running instances: the
 * same classes under the same module make the same path, without building and interning it
 * again at each allocation. */
#define LAST_CLASSES 4
static VT_TLS struct {
    uint32_t parent, id;
    int n;
    const void *classes[LAST_CLASSES];
} last_unbound;

/* Whether modules[0, n), under path id `parent`, are what last_unbound was made for. */
static int same_as_last(const void *const *modules, int n, uint32_t parent)
{
    if (!last_unbound.id || last_unbound.parent != parent || last_unbound.n != n)
        return 0;
    for (int i = 0; i < n; i++)
        if (last_unbound.classes[i] != class_of(modules[i]))
            return 0;
    return 1;
}

/* A module the hooks did not name (kept in a plain list, or made during the forward) is named
 * by its class under the module that called it, as the hooks name it when they keep the
 * current module themselves. */
static uint32_t unbound_id(void)
{
    const void *selves[32];
    int n = vt_pyframes_modules(selves, 32), k;
    uint32_t parent = n > 1 ? first_bound(selves + 1, n - 1, &k) : 0;
    k = parent ? k + 1 : n; /* selves[0, k) are named by their classes */
    if (same_as_last(selves, k, parent))
        return last_unbound.id;
    char path[4096];
    size_t len = 0;
    path[0] = 0;
    if (parent && parent <= vt_mpath_count())
        path_append(path, sizeof path, &len, by_id[(parent - 1) / PAGE][(parent - 1) % PAGE]->path);
    for (int i = k - 1; i >= 0; i--)
        path_append(path, sizeof path, &len, class_name(selves[i]));
    uint32_t id = vramtap_module_path(path);
    if (k <= LAST_CLASSES) {
        last_unbound.parent = parent;
        last_unbound.id = id;
        last_unbound.n = k;
        for (int i = 0; i < k; i++)
            last_unbound.classes[i] = class_of(selves[i]);
    }
    return id;
}

void vt_mpath_look_frames(void)
{
    const void *module;
    vt_mpath_looked = 0;
    if (vt_pyframes_modules(&module, 1) != 1)
        return;
    int at;
    uint32_t id = first_bound(&module, 1, &at);
    if (!id)
        id = unbound_id();
    vt_mpath_looked = 1ull << 32 | vt_mpath_as_now(id);
}

VT_EXPORT unsigned int vramtap_module_here(void)
{
    vt_mpath_look();
    uint64_t looked = vt_mpath_looked;
    vt_mpath_looked = 0;
    return looked ? (uint32_t)looked
                  : atomic_load_explicit(&vramtap_module_current, memory_order_relaxed);
}

uint32_t vt_mpath_count(void)
{
    return atomic_load_explicit(&npaths, memory_order_acquire);
}

void vt_mpath_write_json(FILE *f, uint32_t n)
{
    /* slots below npaths never change: no lock */
    fputs(VT_JSON_KEY(VT_K_MODULE_PATHS) "[", f);
    for (uint32_t i = 0; i < n; i++) {
        fputs(i ? ", " : "", f);
        vt_json_str(f, by_id[i / PAGE][i % PAGE]->path);
    }
    fputs("],\n", f);
}
