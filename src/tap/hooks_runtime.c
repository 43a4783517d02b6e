/* The CUDA runtime's allocation functions. Each wrapper calls the next definition (libcudart),
 * holds the recursion guard so that the driver call underneath is not counted again, and
 * records the outcome. Frees are recorded before the real call: once the real free returns,
 * another thread may be handed the same address. */
/* cudaGetDriverEntryPoint is deprecated but still called by programs: it must be wrapped. */
#define CUDA_ENABLE_DEPRECATED
#include <cuda_runtime_api.h>

#include "pinned.h"
#include "resolve.h"
#include "table.h"

#define REAL(name)                                                                                 \
    ({                                                                                             \
        static _Atomic(void *) cache_;                                                             \
        (__typeof__(&name))vt_real_next(&cache_, #name);                                           \
    })

/* The real function as `real`; without a runtime to call, the wrapper answers as one that
 * could not initialise. */
#define REAL_OR_RETURN(name)                                                                       \
    __typeof__(&name) real = REAL(name);                                                           \
    if (!real)                                                                                     \
    return cudaErrorInitializationError

cudaError_t cudaMallocAsync_ptsz(void **p, size_t size, cudaStream_t s);
cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s);
cudaError_t cudaMallocFromPoolAsync_ptsz(void **p, size_t size, cudaMemPool_t pool, cudaStream_t s);
cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **fn, unsigned long long flags,
                                         enum cudaDriverEntryPointQueryResult *status);
cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **fn,
                                                  unsigned int version, unsigned long long flags,
                                                  enum cudaDriverEntryPointQueryResult *status);

/* 1 when a call is to be recorded: the outermost of vramtap's wrappers, vramtap not disabled.
 * Asked before anything else is: a nested or unrecorded call asks the driver nothing. */
static int recording(int outer)
{
    return outer && !vt_cfg.disabled;
}

static void note(cudaError_t rc, vt_api api, vt_kind kind, int device, void *p, uint64_t size)
{
    if (rc != cudaSuccess)
        vt_note_fail(api, device, size, rc, rc == cudaErrorMemoryAllocation);
    else if (p)
        vt_note_alloc(api, kind, device, (uintptr_t)p, size);
}

/* An allocation on the current device: its slot is fetched before the device is asked for
 * (vt_live_prefetch). */
static void note_current(int outer, cudaError_t rc, vt_api api, vt_kind kind, void *p,
                         uint64_t size)
{
    if (!recording(outer))
        return;
    vt_live_prefetch(rc == cudaSuccess ? (uintptr_t)p : 0);
    note(rc, api, kind, vt_device_current(), p, size);
}

static void note_free(int outer, const void *p)
{
    if (p && recording(outer))
        vt_note_free((uintptr_t)p);
}

VT_EXPORT cudaError_t cudaMalloc(void **p, size_t size)
{
    REAL_OR_RETURN(cudaMalloc);
    int outer = vt_guard_enter();
    cudaError_t rc = real(p, size);
    vt_guard_leave();
    note_current(outer, rc, VT_API_cudaMalloc, VT_KIND_DEVICE, p ? *p : NULL, size);
    return rc;
}

VT_EXPORT cudaError_t cudaMallocManaged(void **p, size_t size, unsigned int flags)
{
    REAL_OR_RETURN(cudaMallocManaged);
    int outer = vt_guard_enter();
    cudaError_t rc = real(p, size, flags);
    vt_guard_leave();
    note_current(outer, rc, VT_API_cudaMallocManaged, VT_KIND_MANAGED, p ? *p : NULL, size);
    return rc;
}

VT_EXPORT cudaError_t cudaMallocPitch(void **p, size_t *pitch, size_t width, size_t height)
{
    REAL_OR_RETURN(cudaMallocPitch);
    int outer = vt_guard_enter();
    cudaError_t rc = real(p, pitch, width, height);
    vt_guard_leave();
    uint64_t size =
        rc == cudaSuccess && pitch ? (uint64_t)*pitch * height : (uint64_t)width * height;
    note_current(outer, rc, VT_API_cudaMallocPitch, VT_KIND_DEVICE, p ? *p : NULL, size);
    return rc;
}

VT_EXPORT cudaError_t cudaMalloc3D(struct cudaPitchedPtr *pp, struct cudaExtent extent)
{
    REAL_OR_RETURN(cudaMalloc3D);
    int outer = vt_guard_enter();
    cudaError_t rc = real(pp, extent);
    vt_guard_leave();
    uint64_t rows = (uint64_t)extent.height * extent.depth;
    uint64_t size = rc == cudaSuccess && pp ? (uint64_t)pp->pitch * rows : extent.width * rows;
    note_current(outer, rc, VT_API_cudaMalloc3D, VT_KIND_DEVICE, pp ? pp->ptr : NULL, size);
    return rc;
}

VT_EXPORT cudaError_t cudaFree(void *p)
{
    REAL_OR_RETURN(cudaFree);
    int outer = vt_guard_enter();
    note_free(outer, p);
    cudaError_t rc = real(p);
    vt_guard_leave();
    return rc;
}

static cudaError_t malloc_async(__typeof__(&cudaMallocAsync) real, void **p, size_t size,
                                cudaStream_t s)
{
    if (!real)
        return cudaErrorInitializationError;
    int outer = vt_guard_enter();
    cudaError_t rc = real(p, size, s);
    vt_guard_leave();
    if (!recording(outer))
        return rc;
    void *ptr = p && rc == cudaSuccess ? *p : NULL;
    vt_live_prefetch((uintptr_t)ptr);
    note(rc, VT_API_cudaMallocAsync, VT_KIND_POOL,
         vt_device_of_stream((uintptr_t)s, 0, (uintptr_t)ptr), ptr, size);
    return rc;
}

VT_EXPORT cudaError_t cudaMallocAsync(void **p, size_t size, cudaStream_t s)
{
    return malloc_async(REAL(cudaMallocAsync), p, size, s);
}

VT_EXPORT cudaError_t cudaMallocAsync_ptsz(void **p, size_t size, cudaStream_t s)
{
    return malloc_async(REAL(cudaMallocAsync_ptsz), p, size, s);
}

static cudaError_t malloc_from_pool(__typeof__(&cudaMallocFromPoolAsync) real, void **p,
                                    size_t size, cudaMemPool_t pool, cudaStream_t s)
{
    if (!real)
        return cudaErrorInitializationError;
    int outer = vt_guard_enter();
    cudaError_t rc = real(p, size, pool, s);
    vt_guard_leave();
    if (!recording(outer))
        return rc;
    void *ptr = p && rc == cudaSuccess ? *p : NULL;
    vt_live_prefetch((uintptr_t)ptr);
    int device = vt_device_of_pointer((uintptr_t)ptr);
    if (ptr)
        vt_note_pool(device, (uintptr_t)pool);
    note(rc, VT_API_cudaMallocFromPoolAsync, VT_KIND_POOL, device, ptr, size);
    return rc;
}

VT_EXPORT cudaError_t cudaMallocFromPoolAsync(void **p, size_t size, cudaMemPool_t pool,
                                              cudaStream_t s)
{
    return malloc_from_pool(REAL(cudaMallocFromPoolAsync), p, size, pool, s);
}

VT_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void **p, size_t size, cudaMemPool_t pool,
                                                   cudaStream_t s)
{
    return malloc_from_pool(REAL(cudaMallocFromPoolAsync_ptsz), p, size, pool, s);
}

static cudaError_t free_async(__typeof__(&cudaFreeAsync) real, void *p, cudaStream_t s)
{
    if (!real)
        return cudaErrorInitializationError;
    int outer = vt_guard_enter();
    note_free(outer, p);
    cudaError_t rc = real(p, s);
    vt_guard_leave();
    return rc;
}

VT_EXPORT cudaError_t cudaFreeAsync(void *p, cudaStream_t s)
{
    return free_async(REAL(cudaFreeAsync), p, s);
}

VT_EXPORT cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s)
{
    return free_async(REAL(cudaFreeAsync_ptsz), p, s);
}

/* A pool the program destroys is never queried again (sample.c adds up pools' figures). */
VT_EXPORT cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool)
{
    REAL_OR_RETURN(cudaMemPoolDestroy);
    int outer = vt_guard_enter();
    if (recording(outer))
        vt_note_pool_destroy((uintptr_t)pool);
    cudaError_t rc = real(pool);
    vt_guard_leave();
    return rc;
}

static void note_host(int outer, cudaError_t rc, vt_api api, void *p, size_t size)
{
    if (!recording(outer))
        return;
    if (rc != cudaSuccess)
        vt_note_fail(api, -1, size, rc, 0);
    else if (p) {
        vt_note_host_alloc(api, (uintptr_t)p, size);
        vt_pinned_add((uintptr_t)p, size);
    }
}

VT_EXPORT cudaError_t cudaMallocHost(void **p, size_t size)
{
    REAL_OR_RETURN(cudaMallocHost);
    int outer = vt_guard_enter();
    cudaError_t rc = real(p, size);
    vt_guard_leave();
    note_host(outer, rc, VT_API_cudaMallocHost, p ? *p : NULL, size);
    return rc;
}

VT_EXPORT cudaError_t cudaHostAlloc(void **p, size_t size, unsigned int flags)
{
    REAL_OR_RETURN(cudaHostAlloc);
    int outer = vt_guard_enter();
    cudaError_t rc = real(p, size, flags);
    vt_guard_leave();
    note_host(outer, rc, VT_API_cudaHostAlloc, p ? *p : NULL, size);
    return rc;
}

VT_EXPORT cudaError_t cudaFreeHost(void *p)
{
    REAL_OR_RETURN(cudaFreeHost);
    int outer = vt_guard_enter();
    if (p && recording(outer)) {
        vt_pinned_remove((uintptr_t)p);
        vt_note_host_free((uintptr_t)p);
    }
    cudaError_t rc = real(p);
    vt_guard_leave();
    return rc;
}

/* The runtime hands out driver entry points: the swap makes them ours too. */
static cudaError_t entry_point(__typeof__(&cudaGetDriverEntryPoint) real, const char *symbol,
                               void **fn, unsigned long long flags,
                               enum cudaDriverEntryPointQueryResult *status)
{
    if (!real)
        return cudaErrorInitializationError;
    cudaError_t rc = real(symbol, fn, flags, status);
    if (rc == cudaSuccess)
        vt_route_swap(fn, "cudaGetDriverEntryPoint", symbol, 0, flags);
    return rc;
}

VT_EXPORT cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **fn,
                                              unsigned long long flags,
                                              enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point(REAL(cudaGetDriverEntryPoint), symbol, fn, flags, status);
}

VT_EXPORT cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **fn,
                                                   unsigned long long flags,
                                                   enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point(REAL(cudaGetDriverEntryPoint_ptsz), symbol, fn, flags, status);
}

static cudaError_t entry_point_by_version(__typeof__(&cudaGetDriverEntryPointByVersion) real,
                                          const char *symbol, void **fn, unsigned int version,
                                          unsigned long long flags,
                                          enum cudaDriverEntryPointQueryResult *status)
{
    if (!real)
        return cudaErrorInitializationError;
    cudaError_t rc = real(symbol, fn, version, flags, status);
    if (rc == cudaSuccess)
        vt_route_swap(fn, "cudaGetDriverEntryPointByVersion", symbol, (int)version, flags);
    return rc;
}

VT_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn,
                                                       unsigned int version,
                                                       unsigned long long flags,
                                                       enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point_by_version(REAL(cudaGetDriverEntryPointByVersion), symbol, fn, version,
                                  flags, status);
}

VT_EXPORT cudaError_t cudaGetDriverEntryPointByVersion_ptsz(
    const char *symbol, void **fn, unsigned int version, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point_by_version(REAL(cudaGetDriverEntryPointByVersion_ptsz), symbol, fn, version,
                                  flags, status);
}
