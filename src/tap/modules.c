#include <elf.h>
#include <limits.h>
#include <link.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "locks.h"
#include "modules.h"

/* The address span of a loaded module, from its lowest to its highest PT_LOAD segment. */
typedef struct {
    uintptr_t lo, hi;
    uint16_t id;
} span;

/* Guarded by the modules lock. Spans are valid while nothing has been unloaded since they were
 * learnt (the loader's dlpi_subs count): a later object may be mapped where an unloaded one
 * was. Modules themselves are never forgotten. */
static vt_module mods[VT_MAX_MODULES];
static int nmods;
static span spans[VT_MAX_MODULES];
static int nspans;
static unsigned long long spans_subs;
static uint64_t dropped;

/* What the loader says about the object holding one address. */
typedef struct {
    uintptr_t ip;
    int found;
    unsigned long long subs;
    uintptr_t base, lo, hi;
    char path[PATH_MAX];
    char build_id[2 * 64 + 1];
} lookup;

static void read_build_id(const struct dl_phdr_info *info, const ElfW(Phdr) * ph, lookup *l)
{
    const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
    const unsigned char *end = p + ph->p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
        const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
        const unsigned char *name = p + sizeof *n;
        const unsigned char *desc = name + ((n->n_namesz + 3) & ~3u);
        if (desc + n->n_descsz > end)
            return;
        if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && !memcmp(name, "GNU", 4) &&
            n->n_descsz <= 64) {
            for (unsigned i = 0; i < n->n_descsz; i++)
                snprintf(l->build_id + 2 * i, 3, "%02x", desc[i]);
            return;
        }
        p = desc + ((n->n_descsz + 3) & ~3u);
    }
}

static int find_object(struct dl_phdr_info *info, size_t size, void *data)
{
    lookup *l = data;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
        l->subs = info->dlpi_subs;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    int inside = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr, b = a + ph->p_memsz;
        lo = a < lo ? a : lo;
        hi = b > hi ? b : hi;
        inside |= l->ip >= a && l->ip < b;
    }
    if (!inside)
        return 0;
    l->found = 1;
    l->base = info->dlpi_addr;
    l->lo = lo;
    l->hi = hi;
    snprintf(l->path, sizeof l->path, "%s", info->dlpi_name ? info->dlpi_name : "");
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_NOTE && !l->build_id[0])
            read_build_id(info, &info->dlpi_phdr[i], l);
    return 1;
}

/* The loader's list names the main program "" and may hold relative names (a dlopen of
 * "./libx.so"): recorded as absolute paths, so that the command can open them later. */
static void absolute_path(lookup *l)
{
    char buf[PATH_MAX];
    if (!l->path[0]) {
        ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
        if (n > 0) {
            buf[n] = 0;
            snprintf(l->path, sizeof l->path, "%s", buf);
        }
    } else if (l->path[0] != '/' && realpath(l->path, buf)) {
        snprintf(l->path, sizeof l->path, "%s", buf);
    }
}

static int span_of(uintptr_t ip)
{
    for (int i = 0; i < nspans; i++)
        if (ip >= spans[i].lo && ip < spans[i].hi)
            return spans[i].id;
    return VT_NO_MODULE;
}

/* Records the module `l` describes (or finds it recorded); its id, or VT_NO_MODULE. */
static uint16_t record(const lookup *l)
{
    char *path = strdup(l->path), *build_id = l->build_id[0] ? strdup(l->build_id) : NULL;
    uint16_t id = VT_NO_MODULE;
    vt_lock_take(VT_LOCK_MODULES);
    for (int i = 0; i < nmods && id == VT_NO_MODULE; i++)
        if (mods[i].base == l->base && !strcmp(mods[i].path, l->path))
            id = (uint16_t)i;
    if (id == VT_NO_MODULE && path && nmods < VT_MAX_MODULES) {
        mods[nmods] = (vt_module){.path = path, .build_id = build_id, .base = l->base};
        id = (uint16_t)nmods++;
        path = build_id = NULL;
    } else if (id == VT_NO_MODULE) {
        dropped++;
    }
    if (id != VT_NO_MODULE && l->subs == spans_subs && nspans < VT_MAX_MODULES &&
        span_of(l->ip) == VT_NO_MODULE)
        spans[nspans++] = (span){.lo = l->lo, .hi = l->hi, .id = id};
    vt_lock_give(VT_LOCK_MODULES);
    free(path);
    free(build_id);
    return id;
}

static int count_subs(struct dl_phdr_info *info, size_t size, void *data)
{
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
        *(unsigned long long *)data = info->dlpi_subs;
    return 1;
}

void vt_modules_resolve(const uint64_t *ips, int n, uint16_t *ids)
{
    unsigned long long subs = 0;
    dl_iterate_phdr(count_subs, &subs);
    vt_lock_take(VT_LOCK_MODULES);
    if (subs != spans_subs) {
        nspans = 0;
        spans_subs = subs;
    }
    vt_lock_give(VT_LOCK_MODULES);
    for (int i = 0; i < n; i++) {
        /* A return address points after the call; the call itself is what the module holds. */
        uintptr_t ip = (uintptr_t)ips[i] - 1;
        vt_lock_take(VT_LOCK_MODULES);
        ids[i] = (uint16_t)span_of(ip);
        vt_lock_give(VT_LOCK_MODULES);
        if (ids[i] != VT_NO_MODULE)
            continue;
        lookup l = {.ip = ip};
        dl_iterate_phdr(find_object, &l);
        if (!l.found)
            continue;
        absolute_path(&l);
        ids[i] = record(&l);
    }
}

int vt_module_count(uint64_t *not_recorded)
{
    vt_lock_take(VT_LOCK_MODULES);
    int n = nmods;
    if (not_recorded)
        *not_recorded = dropped;
    vt_lock_give(VT_LOCK_MODULES);
    return n;
}

vt_module vt_module_get(int id)
{
    vt_lock_take(VT_LOCK_MODULES);
    vt_module m = mods[id];
    vt_lock_give(VT_LOCK_MODULES);
    return m;
}
