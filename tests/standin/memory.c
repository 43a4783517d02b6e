/* libcuda.so.1 stand-in: device, managed, stream-ordered and pinned host allocations, memory
 * pools, and what a pointer is. */
#include "driver.h"

#include <stdio.h>
#include <stdlib.h>

static size_t round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

CUresult charge(struct books *b, int device, size_t bytes)
{
    size_t room = b->capacity - b->context_bytes - b->dev[device].used;
    if (bytes > room)
        return CUDA_ERROR_OUT_OF_MEMORY;
    b->dev[device].used += bytes;
    return CUDA_SUCCESS;
}

void refund(struct books *b, int device, size_t bytes)
{
    b->dev[device].used -= bytes;
}

/* Takes an address range for an allocation already counted; 0 < size <= capacity. */
static CUresult new_block(struct books *b, enum block_kind kind, int device, size_t size,
                          struct CUmemPoolHandle_st *pool, uintptr_t *addr)
{
    struct arena *a = kind == BLOCK_MANAGED ? &b->managed : &b->dev[device].heap;
    struct block *blk = malloc(sizeof *blk);
    if (!blk)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t span = round_up(size, BLOCK_ALIGN);
    uintptr_t at = arena_alloc(a, span, BLOCK_ALIGN);
    if (!at) {
        free(blk);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *blk = (struct block){
        .addr = at, .size = size, .span = span, .device = device, .kind = kind, .pool = pool};
    HASH_ADD(hh, b->blocks, addr, sizeof blk->addr, blk);
    *addr = at;
    return CUDA_SUCCESS;
}

/* cuMemAlloc, cuMemAllocPitch, cuMemAllocManaged: counted byte for byte as requested. */
static CUresult alloc_counted(enum block_kind kind, size_t size, CUdeviceptr *dptr)
{
    struct books *b = lock_books();
    struct CUctx_st *c = current_ctx(b);
    CUresult r = CUDA_ERROR_INVALID_CONTEXT;
    uintptr_t at = 0;
    if (c) {
        r = charge(b, c->device, size);
        if (r == CUDA_SUCCESS) {
            r = new_block(b, kind, c->device, size, NULL, &at);
            if (r != CUDA_SUCCESS)
                refund(b, c->device, size);
        }
    }
    unlock_books(b);
    if (r == CUDA_SUCCESS)
        *dptr = at;
    return r;
}

static void pool_free(struct books *b, struct CUmemPoolHandle_st *p)
{
    refund(b, p->device, p->reserved);
    HASH_DEL(b->pools, p);
    free(p);
}

static CUresult free_block(struct books *b, uintptr_t addr)
{
    struct block *blk;
    HASH_FIND(hh, b->blocks, &addr, sizeof addr, blk);
    if (!blk)
        return CUDA_ERROR_INVALID_VALUE;
    HASH_DEL(b->blocks, blk);
    arena_free(blk->kind == BLOCK_MANAGED ? &b->managed : &b->dev[blk->device].heap, blk->addr,
               blk->span);
    struct CUmemPoolHandle_st *p = blk->pool;
    if (!p) {
        refund(b, blk->device, blk->size);
    } else {
        p->used -= blk->size;
        if (--p->live == 0 && p->destroyed)
            pool_free(b, p);
    }
    free(blk);
    return CUDA_SUCCESS;
}

CUresult untraced_cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    if (!dptr || !bytesize)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_counted(BLOCK_DEVICE, bytesize, dptr);
}

CUresult untraced_cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                     size_t Height, unsigned int ElementSizeBytes)
{
    if (!dptr || !pPitch || !WidthInBytes || !Height ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    if (WidthInBytes > SIZE_MAX / 2)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* Rows start on the texture alignment, as on the real part. */
    size_t pitch = round_up(WidthInBytes, BLOCK_ALIGN);
    if (Height > SIZE_MAX / pitch)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = alloc_counted(BLOCK_DEVICE, pitch * Height, dptr);
    if (r == CUDA_SUCCESS)
        *pPitch = pitch;
    return r;
}

CUresult untraced_cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    if (!dptr || !bytesize || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_counted(BLOCK_MANAGED, bytesize, dptr);
}

CUresult untraced_cuMemFree_v2(CUdeviceptr dptr)
{
    struct books *b = lock_books();
    CUresult r = free_block(b, dptr);
    unlock_books(b);
    return r;
}

CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    if (!free || !total)
        return CUDA_ERROR_INVALID_VALUE;
    struct books *b = lock_books();
    struct CUctx_st *c = current_ctx(b);
    if (c) {
        *total = b->capacity;
        *free = b->capacity - b->context_bytes - b->dev[c->device].used;
    }
    unlock_books(b);
    return c ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

/* The live device or managed allocation holding addr, interior addresses included. */
static struct block *containing(struct block *table, uintptr_t addr)
{
    struct block *blk, *tmp;
    HASH_FIND(hh, table, &addr, sizeof addr, blk);
    if (blk)
        return blk;
    HASH_ITER(hh, table, blk, tmp)
    {
        if (addr >= blk->addr && addr - blk->addr < blk->size)
            return blk;
    }
    return NULL;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    struct books *b = lock_books();
    struct block *blk = containing(b->blocks, dptr);
    struct vrange *m, *res;
    CUresult r = CUDA_SUCCESS;
    uintptr_t base = 0;
    size_t size = 0;
    if (blk) {
        base = blk->addr;
        size = blk->size;
    } else if (vmm_lookup(b, dptr, &m, &res)) {
        base = m->addr;
        size = m->size;
    } else {
        r = CUDA_ERROR_NOT_FOUND;
    }
    unlock_books(b);
    if (r == CUDA_SUCCESS && pbase)
        *pbase = base;
    if (r == CUDA_SUCCESS && psize)
        *psize = size;
    return r;
}

/* ---- memory pools and stream-ordered allocation ---- */

struct CUmemPoolHandle_st *pool_new(struct books *b, int device, bool is_default)
{
    struct CUmemPoolHandle_st *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->key = (uintptr_t)p;
    p->device = device;
    p->is_default = is_default;
    p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
    HASH_ADD(hh, b->pools, key, sizeof p->key, p);
    return p;
}

static struct CUmemPoolHandle_st *live_pool(struct books *b, CUmemoryPool pool)
{
    uintptr_t key = (uintptr_t)pool;
    struct CUmemPoolHandle_st *p;
    HASH_FIND(hh, b->pools, &key, sizeof key, p);
    return p && !p->destroyed ? p : NULL;
}

/* Used bytes are the live allocations; reserved bytes follow them up in GRANULE steps and are
 * what the device is charged, like the real pool that keeps freed memory for reuse. */
static CUresult pool_alloc(struct books *b, struct CUmemPoolHandle_st *p, size_t size,
                           uintptr_t *addr)
{
    if (size > b->capacity)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t want = round_up(p->used + size, GRANULE);
    size_t grow = want > p->reserved ? want - p->reserved : 0;
    CUresult r = charge(b, p->device, grow);
    if (r != CUDA_SUCCESS)
        return r;
    r = new_block(b, BLOCK_DEVICE, p->device, size, p, addr);
    if (r != CUDA_SUCCESS) {
        refund(b, p->device, grow);
        return r;
    }
    p->reserved += grow;
    if (p->reserved > p->reserved_high)
        p->reserved_high = p->reserved;
    p->used += size;
    if (p->used > p->used_high)
        p->used_high = p->used;
    p->live++;
    return CUDA_SUCCESS;
}

/* pool NULL: the current pool of the stream's device. */
static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream stream)
{
    if (!dptr || !size)
        return CUDA_ERROR_INVALID_VALUE;
    struct books *b = lock_books();
    int device;
    uintptr_t at = 0;
    CUresult r = stream_device(b, stream, &device);
    if (r == CUDA_SUCCESS) {
        struct CUmemPoolHandle_st *p = pool ? live_pool(b, pool) : b->dev[device].current_pool;
        r = p ? pool_alloc(b, p, size, &at) : CUDA_ERROR_INVALID_VALUE;
    }
    unlock_books(b);
    if (r == CUDA_SUCCESS)
        *dptr = at;
    return r;
}

CUresult untraced_cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return alloc_async(dptr, bytesize, NULL, hStream);
}

CUresult untraced_cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return alloc_async(dptr, bytesize, NULL, hStream);
}

CUresult untraced_cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                          CUstream hStream)
{
    return pool ? alloc_async(dptr, bytesize, pool, hStream) : CUDA_ERROR_INVALID_VALUE;
}

CUresult untraced_cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                               CUmemoryPool pool, CUstream hStream)
{
    return pool ? alloc_async(dptr, bytesize, pool, hStream) : CUDA_ERROR_INVALID_VALUE;
}

/* Nothing is queued, so a stream-ordered free takes effect at once. */
static CUresult free_async(CUdeviceptr dptr, CUstream stream)
{
    struct books *b = lock_books();
    int device;
    CUresult r = stream_device(b, stream, &device);
    if (r == CUDA_SUCCESS)
        r = free_block(b, dptr);
    unlock_books(b);
    return r;
}

CUresult untraced_cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    return free_async(dptr, hStream);
}

CUresult untraced_cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    return free_async(dptr, hStream);
}

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    if (!pool || !poolProps || poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    struct books *b = lock_books();
    CUresult r = CUDA_ERROR_INVALID_DEVICE;
    if (valid_device(b, poolProps->location.id)) {
        struct CUmemPoolHandle_st *p = pool_new(b, poolProps->location.id, false);
        r = p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
        if (p)
            *pool = p;
    }
    unlock_books(b);
    return r;
}

/* As on the real driver, a pool destroyed with allocations outstanding lives on until the last
 * of them is freed. */
CUresult untraced_cuMemPoolDestroy(CUmemoryPool pool)
{
    struct books *b = lock_books();
    struct CUmemPoolHandle_st *p = live_pool(b, pool);
    CUresult r = p && !p->is_default ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        struct device *dev = &b->dev[p->device];
        if (dev->current_pool == p)
            dev->current_pool = dev->default_pool;
        p->destroyed = true;
        if (p->live == 0)
            pool_free(b, p);
    }
    unlock_books(b);
    return r;
}

static CUresult device_pool(CUmemoryPool *pool, CUdevice dev, bool current)
{
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    struct books *b = lock_books();
    bool ok = valid_device(b, dev);
    if (ok)
        *pool = current ? b->dev[dev].current_pool : b->dev[dev].default_pool;
    unlock_books(b);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    return device_pool(pool_out, dev, false);
}

CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    return device_pool(pool, dev, true);
}

/* The live pool whose attribute `call` reads or sets, or NULL. On NVIDIA's driver a destroyed
 * pool's handle is freed memory: the call is undefined and may crash. The stand-in answers an
 * error and says so, for the tests to see. */
static struct CUmemPoolHandle_st *attribute_pool(struct books *b, CUmemoryPool pool,
                                                 const char *call)
{
    struct CUmemPoolHandle_st *p = live_pool(b, pool);
    if (!p)
        fprintf(stderr, "standin: %s on a pool that is not live (%p)\n", call, (void *)pool);
    return p;
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    struct books *b = lock_books();
    struct CUmemPoolHandle_st *p = attribute_pool(b, pool, "cuMemPoolGetAttribute");
    CUresult r = p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (p) {
        switch (attr) {
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
            *(int *)value = p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES];
            break;
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
            *(cuuint64_t *)value = p->release_threshold;
            break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
            *(cuuint64_t *)value = p->reserved;
            break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
            *(cuuint64_t *)value = p->reserved_high;
            break;
        case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
            *(cuuint64_t *)value = p->used;
            break;
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
            *(cuuint64_t *)value = p->used_high;
            break;
        default:
            r = CUDA_ERROR_INVALID_VALUE;
        }
    }
    unlock_books(b);
    return r;
}

/* The high-water marks accept only 0, which resets them to the current value; the current
 * figures are read-only. The release threshold is kept but, as documented for this stand-in,
 * reserved memory only shrinks through cuMemPoolTrimTo. */
CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    struct books *b = lock_books();
    struct CUmemPoolHandle_st *p = attribute_pool(b, pool, "cuMemPoolSetAttribute");
    CUresult r = p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (p) {
        switch (attr) {
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
            p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES] = *(int *)value;
            break;
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
            p->release_threshold = *(cuuint64_t *)value;
            break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
            if (*(cuuint64_t *)value != 0)
                r = CUDA_ERROR_INVALID_VALUE;
            else
                p->reserved_high = p->reserved;
            break;
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
            if (*(cuuint64_t *)value != 0)
                r = CUDA_ERROR_INVALID_VALUE;
            else
                p->used_high = p->used;
            break;
        default:
            r = CUDA_ERROR_INVALID_VALUE;
        }
    }
    unlock_books(b);
    return r;
}

/* Keeps at least minBytesToKeep reserved (in whole granules) and whatever live allocations
 * need; never grows the reservation. */
CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    struct books *b = lock_books();
    struct CUmemPoolHandle_st *p = live_pool(b, pool);
    if (p) {
        size_t keep = minBytesToKeep > p->reserved ? p->reserved : minBytesToKeep;
        size_t floor = round_up(p->used, GRANULE);
        keep = round_up(keep, GRANULE);
        if (keep < floor)
            keep = floor;
        if (keep < p->reserved) {
            refund(b, p->device, p->reserved - keep);
            p->reserved = keep;
        }
    }
    unlock_books(b);
    return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- pinned host memory: real memory, never counted against a device ---- */

static CUresult host_alloc(void **pp, size_t bytesize, unsigned int flags)
{
    if (!pp || !bytesize ||
        (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                             CU_MEMHOSTALLOC_WRITECOMBINED)))
        return CUDA_ERROR_INVALID_VALUE;
    struct books *b = lock_books();
    struct CUctx_st *c = current_ctx(b);
    CUresult r = c ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_CONTEXT;
    void *mem = NULL;
    struct block *blk = c ? malloc(sizeof *blk) : NULL;
    if (blk && posix_memalign(&mem, 4096, bytesize) == 0) {
        *blk = (struct block){.addr = (uintptr_t)mem,
                              .size = bytesize,
                              .span = bytesize,
                              .device = c->device,
                              .kind = BLOCK_HOST};
        HASH_ADD(hh, b->host, addr, sizeof blk->addr, blk);
        r = CUDA_SUCCESS;
    } else {
        free(blk);
    }
    unlock_books(b);
    if (r == CUDA_SUCCESS)
        *pp = mem;
    return r;
}

CUresult untraced_cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    return host_alloc(pp, bytesize, Flags);
}

CUresult untraced_cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    return host_alloc(pp, bytesize, 0);
}

CUresult untraced_cuMemFreeHost(void *p)
{
    struct books *b = lock_books();
    uintptr_t key = (uintptr_t)p;
    struct block *blk;
    HASH_FIND(hh, b->host, &key, sizeof key, blk);
    if (blk && blk->kind != BLOCK_HOST)
        blk = NULL; /* registered memory is unregistered, not freed */
    if (blk)
        HASH_DEL(b->host, blk);
    unlock_books(b);
    if (!blk)
        return CUDA_ERROR_INVALID_VALUE;
    free(p);
    free(blk);
    return CUDA_SUCCESS;
}

/* ---- pointer attributes ---- */

bool identify(struct books *b, uintptr_t addr, struct pointer *out)
{
    struct block *blk = containing(b->blocks, addr);
    if (!blk)
        blk = containing(b->host, addr);
    if (blk) {
        *out = (struct pointer){.kind = blk->kind == BLOCK_MANAGED  ? PTR_MANAGED
                                        : blk->kind == BLOCK_DEVICE ? PTR_DEVICE
                                                                    : PTR_HOST,
                                .device = blk->device,
                                .start = blk->addr,
                                .size = blk->size,
                                .pool = blk->pool};
        return true;
    }
    struct vrange *m, *res;
    if (!vmm_lookup(b, addr, &m, &res))
        return false;
    *out = (struct pointer){
        .kind = PTR_MAPPED, .device = m->phys->device, .start = res->addr, .size = res->size};
    return true;
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    count_device_query();
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    struct books *b = lock_books();
    struct pointer p;
    CUresult r = identify(b, ptr, &p) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        switch (attribute) {
        case CU_POINTER_ATTRIBUTE_CONTEXT:
            *(CUcontext *)data = &b->dev[p.device].ctx;
            break;
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
            *(unsigned int *)data = p.kind == PTR_HOST ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
            break;
        case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
            *(CUdeviceptr *)data = ptr;
            break;
        case CU_POINTER_ATTRIBUTE_HOST_POINTER:
            if (p.kind == PTR_HOST || p.kind == PTR_MANAGED)
                *(void **)data = (void *)ptr;
            else
                r = CUDA_ERROR_INVALID_VALUE;
            break;
        case CU_POINTER_ATTRIBUTE_IS_MANAGED:
            *(unsigned int *)data = p.kind == PTR_MANAGED;
            break;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
            *(int *)data = p.device;
            break;
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
            *(CUdeviceptr *)data = p.start;
            break;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
            *(size_t *)data = p.size;
            break;
        case CU_POINTER_ATTRIBUTE_MAPPED:
            *(unsigned int *)data = 1;
            break;
        case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
            *(CUmemoryPool *)data = p.pool;
            break;
        default:
            r = CUDA_ERROR_INVALID_VALUE;
        }
    }
    unlock_books(b);
    return r;
}
