#include <stdlib.h>
#include <string.h>

#include "json_out.h"
#include "locks.h"
#include "mpath.h"
#include "snapshot_keys.h"
#include "table.h" /* uthash, with the library's out-of-memory handling */
#include "vramtap.h"

_Static_assert(VRAMTAP_MODULE_RECOMPUTED == VT_MPATH_RECOMPUTED, "one recomputation bit");

_Atomic uint32_t vramtap_module_current;
uint32_t vramtap_module_allocs;

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
