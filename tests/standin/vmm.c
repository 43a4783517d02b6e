/* libcuda.so.1 stand-in: virtual memory management (cuMemCreate, cuMemMap and friends).
 *
 * Physical memory is charged to its device from cuMemCreate until the last reference is released
 * AND the last mapping is gone, which is the rule PyTorch's expandable segments rely on. */
#include "driver.h"

#include <stdlib.h>

static bool inside(uintptr_t addr, const struct vrange *r)
{
    return addr >= r->addr && addr - r->addr < r->size;
}

bool vmm_lookup(struct books *b, uintptr_t addr, struct vrange **mapping,
                struct vrange **reservation)
{
    struct vrange *m, *tmp;
    HASH_ITER(hh, b->mappings, m, tmp)
    {
        if (inside(addr, m))
            break;
    }
    if (!m)
        return false;
    struct vrange *r;
    HASH_ITER(hh, b->reservations, r, tmp)
    {
        if (inside(addr, r))
            break;
    }
    *mapping = m;
    *reservation = r;
    return true;
}

static struct phys *find_phys(struct books *b, CUmemGenericAllocationHandle handle)
{
    struct phys *p;
    HASH_FIND(hh, b->phys, &handle, sizeof handle, p);
    return p;
}

static void free_if_unused(struct books *b, struct phys *p)
{
    if (p->refs > 0 || p->maps > 0)
        return;
    refund(b, p->device, p->size);
    HASH_DEL(b->phys, p);
    free(p);
}

static bool device_prop(const CUmemAllocationProp *prop)
{
    return prop && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED &&
           prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option)
{
    if (!granularity || !device_prop(prop) ||
        (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
         option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(books(), prop->location.id))
        return CUDA_ERROR_INVALID_DEVICE;
    *granularity = GRANULE;
    return CUDA_SUCCESS;
}

CUresult untraced_cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                              const CUmemAllocationProp *prop, unsigned long long flags)
{
    if (!handle || !device_prop(prop) || flags || !size || size % GRANULE)
        return CUDA_ERROR_INVALID_VALUE;
    struct books *b = lock_books();
    int device = prop->location.id;
    CUresult r = valid_device(b, device) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    struct phys *p = NULL;
    if (r == CUDA_SUCCESS) {
        p = malloc(sizeof *p);
        r = p ? charge(b, device, size) : CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS) {
        *p = (struct phys){
            .handle = b->next_handle++, .device = device, .size = size, .refs = 1, .maps = 0};
        HASH_ADD(hh, b->phys, handle, sizeof p->handle, p);
        *handle = p->handle;
    } else {
        free(p);
    }
    unlock_books(b);
    return r;
}

CUresult untraced_cuMemRelease(CUmemGenericAllocationHandle handle)
{
    struct books *b = lock_books();
    struct phys *p = find_phys(b, handle);
    CUresult r = p && p->refs > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        p->refs--;
        free_if_unused(b, p);
    }
    unlock_books(b);
    return r;
}

CUresult untraced_cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    struct books *b = lock_books();
    struct vrange *m, *res;
    bool mapped = vmm_lookup(b, (uintptr_t)addr, &m, &res);
    if (mapped) {
        m->phys->refs++;
        *handle = m->phys->handle;
    }
    unlock_books(b);
    return mapped ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags)
{
    (void)addr; /* only a hint, which the real driver is also free to ignore */
    if (!ptr || !size || size % GRANULE || flags || (alignment & (alignment - 1)))
        return CUDA_ERROR_INVALID_VALUE;
    if (alignment < GRANULE)
        alignment = GRANULE;
    struct books *b = lock_books();
    struct vrange *res = malloc(sizeof *res);
    uintptr_t at = res && size <= REGION_SPAN ? arena_alloc(&b->va, size, alignment) : 0;
    if (at) {
        *res = (struct vrange){.addr = at, .size = size};
        HASH_ADD(hh, b->reservations, addr, sizeof res->addr, res);
    } else {
        free(res);
    }
    unlock_books(b);
    if (!at)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *ptr = at;
    return CUDA_SUCCESS;
}

static bool overlaps(uintptr_t a, size_t asize, uintptr_t b, size_t bsize)
{
    return a < b + bsize && b < a + asize;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    struct books *b = lock_books();
    uintptr_t key = ptr;
    struct vrange *res, *m, *tmp;
    HASH_FIND(hh, b->reservations, &key, sizeof key, res);
    bool ok = res && res->size == size;
    HASH_ITER(hh, b->mappings, m, tmp)
    {
        if (ok && overlaps(m->addr, m->size, ptr, size))
            ok = false; /* still mapped: unmap first */
    }
    if (ok) {
        arena_free(&b->va, res->addr, res->size);
        HASH_DEL(b->reservations, res);
        free(res);
    }
    unlock_books(b);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult untraced_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                           CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    if (!size || size % GRANULE || ptr % GRANULE || offset || flags)
        return CUDA_ERROR_INVALID_VALUE;
    struct books *b = lock_books();
    struct phys *p = find_phys(b, handle);
    bool ok = p && p->refs > 0 && size <= p->size;
    struct vrange *r, *tmp, *in = NULL;
    HASH_ITER(hh, b->reservations, r, tmp)
    {
        if (inside(ptr, r) && size <= r->size - (ptr - r->addr))
            in = r;
    }
    ok = ok && in;
    HASH_ITER(hh, b->mappings, r, tmp)
    {
        if (overlaps(r->addr, r->size, ptr, size))
            ok = false;
    }
    struct vrange *m = ok ? malloc(sizeof *m) : NULL;
    if (m) {
        *m = (struct vrange){.addr = ptr, .size = size, .phys = p};
        HASH_ADD(hh, b->mappings, addr, sizeof m->addr, m);
        p->maps++;
    }
    unlock_books(b);
    if (ok && !m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The range may cover several whole mappings (cuda-samples unmap a multi-chunk range at once),
 * never part of one. */
CUresult untraced_cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    struct books *b = lock_books();
    struct vrange *m, *tmp;
    bool any = false, partial = false;
    HASH_ITER(hh, b->mappings, m, tmp)
    {
        if (!overlaps(m->addr, m->size, ptr, size))
            continue;
        any = true;
        if (m->addr < ptr || m->addr + m->size > ptr + size)
            partial = true;
    }
    bool ok = any && !partial;
    HASH_ITER(hh, b->mappings, m, tmp)
    {
        if (!ok || !overlaps(m->addr, m->size, ptr, size))
            continue;
        struct phys *p = m->phys;
        HASH_DEL(b->mappings, m);
        free(m);
        p->maps--;
        free_if_unused(b, p);
    }
    unlock_books(b);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Access rights have no effect on books; the range must still be fully mapped. */
CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    if (!desc || !count || !size)
        return CUDA_ERROR_INVALID_VALUE;
    struct books *b = lock_books();
    bool ok = true;
    for (size_t i = 0; i < count; i++)
        ok = ok && desc[i].location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
             valid_device(b, desc[i].location.id);
    size_t covered = 0;
    struct vrange *m, *tmp;
    HASH_ITER(hh, b->mappings, m, tmp)
    {
        if (!overlaps(m->addr, m->size, ptr, size))
            continue;
        uintptr_t lo = m->addr > ptr ? m->addr : ptr;
        uintptr_t hi = m->addr + m->size < ptr + size ? m->addr + m->size : ptr + size;
        covered += hi - lo;
    }
    unlock_books(b);
    return ok && covered == size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
