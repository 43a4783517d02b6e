/* Copies between host and device (copies.h). The counters and the pinned ranges are guarded by
 * the state lock, so that a copy is counted in the phase and step the books are in. */
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "copies.h"
#include "json_out.h"
#include "resolve.h"
#include "snapshot_keys.h"
#include "stacks.h"
#include "table.h"

/* What a copy was, by direction and, for host to device and back, the host side. */
enum { H2D_PAGEABLE, H2D_PINNED, D2H_PAGEABLE, D2H_PINNED, D2D, H2H, NKINDS };

typedef struct {
    uint64_t bytes[NKINDS], calls[NKINDS];
    uint64_t sync_d2h; /* device-to-host copies the calling thread waited for */
} counts;

/* Steps counted one by one; later steps are folded together. */
#define STEPS 256
/* Distinct copy sites kept with VRAMTAP_COPY_STACKS=1, and how many of the largest are written. */
#define SITES 64
#define SITES_WRITTEN 8
#define NPHASES (VT_PHASE_OTHER + 1)

typedef struct {
    uint32_t site;
    uint64_t bytes, calls;
    uint64_t by_kind[NKINDS];
} site_counts;

struct vt_copies_frozen {
    counts total, phase[NPHASES], step[STEPS], later;
    uint32_t nsteps; /* steps that had copies, up to the last of them, at most STEPS */
    uint32_t later_first, later_last; /* the steps folded into `later` */
    site_counts sites[SITES];
    int nsites;
    uint64_t sites_left_out; /* bytes copied from sites past SITES */
};

static struct vt_copies_frozen books;
static int stacks_on;

/* Pinned host ranges, sorted by start. */
typedef struct {
    uintptr_t start, end;
} range;
static range *pinned;
static size_t npinned, cappinned;

void vt_copies_init(void)
{
    const char *s = getenv("VRAMTAP_COPY_STACKS");
    stacks_on = s && !strcmp(s, "1") && vt_cfg.stacks;
}

/* The index of the first range starting after addr. */
static size_t pinned_upper(uintptr_t addr)
{
    size_t lo = 0, hi = npinned;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pinned[mid].start <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int pinned_has(uintptr_t addr)
{
    size_t i = pinned_upper(addr);
    return i > 0 && addr < pinned[i - 1].end;
}

void vt_copies_pinned_add(uintptr_t addr, uint64_t size)
{
    if (!addr || !size || vt_cfg.disabled)
        return;
    vt_lock();
    size_t i = pinned_upper(addr);
    if (i > 0 && pinned[i - 1].start == addr) {
        pinned[i - 1].end = addr + size; /* a stale entry: the memory was freed unseen */
    } else {
        if (npinned == cappinned) {
            size_t cap = cappinned ? 2 * cappinned : 64;
            range *grown = realloc(pinned, cap * sizeof *grown);
            if (!grown) {
                vt_unlock();
                vt_warn_once("out of memory: some pinned memory will be counted as pageable");
                return;
            }
            pinned = grown;
            cappinned = cap;
        }
        memmove(pinned + i + 1, pinned + i, (npinned - i) * sizeof *pinned);
        pinned[i] = (range){addr, addr + size};
        npinned++;
    }
    vt_unlock();
}

void vt_copies_pinned_remove(uintptr_t addr)
{
    if (!addr || vt_cfg.disabled)
        return;
    vt_lock();
    size_t i = pinned_upper(addr);
    if (i > 0 && pinned[i - 1].start == addr) {
        memmove(pinned + i - 1, pinned + i, (npinned - i) * sizeof *pinned);
        npinned--;
    }
    vt_unlock();
}

enum { SIDE_DEVICE, SIDE_PINNED, SIDE_PAGEABLE, SIDE_UNKNOWN };

/* What the books say of one end (state lock held): a unified pointer is device memory when a
 * live device allocation starts there; anything else the books cannot tell is left to the
 * driver. */
static int side_from_books(vt_copy_side s)
{
    if (s.end == VT_END_DEVICE)
        return SIDE_DEVICE;
    if (pinned_has(s.addr))
        return SIDE_PINNED;
    if (s.end == VT_END_HOST)
        return SIDE_PAGEABLE;
    return vt_live_find_locked(s.addr) ? SIDE_DEVICE : SIDE_UNKNOWN;
}

/* What the driver says of a unified pointer the books do not know (an interior device address,
 * memory registered by a route vramtap did not see): memory it does not know is pageable host
 * memory, as it treats it. */
static int side_from_driver(uintptr_t p)
{
    CUresult (*attr)(void *, CUpointer_attribute, CUdeviceptr) = (CUresult(*)(
        void *, CUpointer_attribute, CUdeviceptr))vt_real_driver(VT_DRV_cuPointerGetAttribute);
    unsigned int type = 0;
    if (!attr || attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)p) != CUDA_SUCCESS)
        return SIDE_PAGEABLE;
    return type == CU_MEMORYTYPE_HOST ? SIDE_PINNED : SIDE_DEVICE;
}

static int kind_of(int dst, int src)
{
    if (dst == SIDE_DEVICE)
        return src == SIDE_DEVICE ? D2D : src == SIDE_PINNED ? H2D_PINNED : H2D_PAGEABLE;
    if (src == SIDE_DEVICE)
        return dst == SIDE_PINNED ? D2H_PINNED : D2H_PAGEABLE;
    return H2H;
}

static int any(const counts *c)
{
    for (int k = 0; k < NKINDS; k++)
        if (c->calls[k])
            return 1;
    return 0;
}

static void add(counts *c, int kind, uint64_t bytes, int waited)
{
    c->bytes[kind] += bytes;
    c->calls[kind]++;
    c->sync_d2h += (uint64_t)waited;
}

static void add_site_locked(uint32_t site, int kind, uint64_t bytes)
{
    int i = 0;
    while (i < books.nsites && books.sites[i].site != site)
        i++;
    if (i == books.nsites) {
        if (i == SITES) {
            books.sites_left_out += bytes;
            return;
        }
        books.sites[books.nsites++] = (site_counts){.site = site};
    }
    books.sites[i].bytes += bytes;
    books.sites[i].calls++;
    books.sites[i].by_kind[kind] += bytes;
}

static void count_locked(int dst, int src, uint64_t bytes, int sync, uint32_t site)
{
    int kind = kind_of(dst, src);
    int waited = (kind == D2H_PAGEABLE) || (kind == D2H_PINNED && sync);
    add(&books.total, kind, bytes, waited);
    add(&books.phase[vt_state.phase < NPHASES ? vt_state.phase : VT_PHASE_OTHER], kind, bytes,
        waited);
    uint32_t step = vt_state.step;
    if (step < STEPS) {
        add(&books.step[step], kind, bytes, waited);
        if (step >= books.nsteps)
            books.nsteps = step + 1;
    } else {
        if (!any(&books.later))
            books.later_first = step;
        add(&books.later, kind, bytes, waited);
        books.later_last = step;
    }
    if (site != VT_NO_SITE)
        add_site_locked(site, kind, bytes);
}

void vt_copy_note(vt_copy_side dst, vt_copy_side src, uint64_t bytes, int sync)
{
    if (vt_cfg.disabled || !bytes)
        return;
    uint32_t site = stacks_on ? vt_stack_here() : VT_NO_SITE;
    vt_lock();
    int d = side_from_books(dst), s = side_from_books(src);
    if (d != SIDE_UNKNOWN && s != SIDE_UNKNOWN) {
        count_locked(d, s, bytes, sync, site);
        vt_unlock();
        return;
    }
    vt_unlock();
    /* no CUDA call under a vramtap lock */
    if (d == SIDE_UNKNOWN)
        d = side_from_driver(dst.addr);
    if (s == SIDE_UNKNOWN)
        s = side_from_driver(src.addr);
    vt_lock();
    count_locked(d, s, bytes, sync, site);
    vt_unlock();
}

vt_copies_frozen *vt_copies_freeze_locked(void)
{
    vt_copies_frozen *z = malloc(sizeof *z);
    if (z)
        *z = books;
    return z;
}

void vt_copies_reset_after_fork(void)
{
    memset(&books, 0, sizeof books);
}

static void write_pair(FILE *f, const char *name, const counts *c, int pageable, int pinned_kind)
{
    fprintf(f,
            "\"%s\": {\"pageable_bytes\": %llu, \"pinned_bytes\": %llu, \"pageable_calls\": %llu, "
            "\"pinned_calls\": %llu}",
            name, (unsigned long long)c->bytes[pageable], (unsigned long long)c->bytes[pinned_kind],
            (unsigned long long)c->calls[pageable], (unsigned long long)c->calls[pinned_kind]);
}

static void write_counts(FILE *f, const counts *c)
{
    fputc('{', f);
    write_pair(f, "h2d", c, H2D_PAGEABLE, H2D_PINNED);
    fputs(", ", f);
    write_pair(f, "d2h", c, D2H_PAGEABLE, D2H_PINNED);
    fprintf(f,
            ", \"d2d\": {\"bytes\": %llu, \"calls\": %llu}, \"h2h\": {\"bytes\": %llu, "
            "\"calls\": %llu}, \"sync_d2h_calls\": %llu}",
            (unsigned long long)c->bytes[D2D], (unsigned long long)c->calls[D2D],
            (unsigned long long)c->bytes[H2H], (unsigned long long)c->calls[H2H],
            (unsigned long long)c->sync_d2h);
}

static int by_bytes_desc(const void *a, const void *b)
{
    const site_counts *x = a, *y = b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

static const char *const kind_names[NKINDS] = {"h2d_pageable", "h2d_pinned", "d2h_pageable",
                                               "d2h_pinned",   "d2d",        "h2h"};

static void write_sites(FILE *f, vt_copies_frozen *z,
                        void (*site)(FILE *f, void *ctx, uint32_t site), void *ctx)
{
    qsort(z->sites, (size_t)z->nsites, sizeof *z->sites, by_bytes_desc);
    fputs(", \"sites\": ", f);
    if (!stacks_on) {
        fputs("null", f);
        return;
    }
    fputc('[', f);
    for (int i = 0; i < z->nsites && i < SITES_WRITTEN; i++) {
        const site_counts *s = &z->sites[i];
        fprintf(f, "%s{\"site\": ", i ? ", " : "");
        site(f, ctx, s->site);
        fprintf(f, ", \"bytes\": %llu, \"calls\": %llu", (unsigned long long)s->bytes,
                (unsigned long long)s->calls);
        for (int k = 0; k < NKINDS; k++)
            if (s->by_kind[k])
                fprintf(f, ", \"%s_bytes\": %llu", kind_names[k],
                        (unsigned long long)s->by_kind[k]);
        fputc('}', f);
    }
    uint64_t rest = z->sites_left_out;
    for (int i = SITES_WRITTEN; i < z->nsites; i++)
        rest += z->sites[i].bytes;
    fprintf(f, "], \"sites_left_out_bytes\": %llu", (unsigned long long)rest);
}

void vt_copies_write(FILE *f, vt_copies_frozen *z, void (*site)(FILE *f, void *ctx, uint32_t site),
                     void *ctx)
{
    if (!z) { /* no memory for the copy: unknown, not zero */
        fputs(VT_JSON_KEY(VT_K_COPIES) "null,\n", f);
        return;
    }
    fputs(VT_JSON_KEY(VT_K_COPIES) "{\"total\": ", f);
    write_counts(f, &z->total);
    fputs(", \"phases\": {", f);
    for (int p = 0; p < NPHASES; p++) {
        fprintf(f, "%s\"%s\": ", p ? ", " : "", vt_phase_name((vt_phase)p));
        write_counts(f, &z->phase[p]);
    }
    fputs("}, \"steps\": [", f);
    int first = 1;
    for (uint32_t s = 0; s < z->nsteps; s++) {
        if (!any(&z->step[s]))
            continue;
        fprintf(f, "%s\n  {\"step\": %u, \"copies\": ", first ? "" : ",", s);
        write_counts(f, &z->step[s]);
        fputc('}', f);
        first = 0;
    }
    fputs("], \"later_steps\": ", f);
    if (any(&z->later)) {
        fprintf(f, "{\"first\": %u, \"last\": %u, \"copies\": ", z->later_first, z->later_last);
        write_counts(f, &z->later);
        fputc('}', f);
    } else {
        fputs("null", f);
    }
    write_sites(f, z, site, ctx);
    fputs("},\n", f);
}
