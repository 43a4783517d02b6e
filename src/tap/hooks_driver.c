/* The driver's allocation functions, reached by name (a program linked with -lcuda) or through
 * the routes of resolve.c (everything else: NVIDIA's runtime, static runtimes in NCCL and
 * cuBLAS, PyTorch's driver API table). Calls made underneath a wrapped runtime call are the
 * same logical allocation and are not recorded again. */
#include <cuda.h>

#undef cuGetProcAddress

#include "pinned.h"
#include "resolve.h"
#include "table.h"

#define REAL(name) ((__typeof__(&name))vt_real_driver(VT_DRV_##name))
/* The real function as `real`; without libcuda the wrapper answers as a driver that is not
 * initialised. */
#define REAL_OR_RETURN(name)                                                                       \
    __typeof__(&name) real = REAL(name);                                                           \
    if (!real)                                                                                     \
    return CUDA_ERROR_NOT_INITIALIZED

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t size, CUstream s);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *p, size_t size, CUmemoryPool pool, CUstream s);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s);
CUresult cuStreamGetDevice_ptsz(CUstream s, CUdevice *d);

/* Defines the exported wrapper `name`, of parameters `params` passed on as `args`. A call made
 * inside another wrapped call on this thread (the runtime's own, into the driver) is the same
 * logical allocation: it is passed on at once, counted as nested, a tail call that needs no
 * stack frame (12 instructions; 20 when the outermost call's path shared the function and its
 * frame). The outermost call goes on to `outermost_<name>`, whose body follows the macro. */
#define DRIVER_WRAPPER(name, params, args)                                                         \
    static CUresult outermost_##name params;                                                       \
    VT_EXPORT CUresult name params                                                                 \
    {                                                                                              \
        __typeof__(&name) real;                                                                    \
        if (vt_depth && atomic_load_explicit(&vt_known_ready, memory_order_acquire) &&             \
            (real = (__typeof__(&name))vt_known[VT_DRV_##name]))                                   \
            return vt_nested_pending++, real args;                                                 \
        return outermost_##name args;                                                              \
    }                                                                                              \
    static __attribute__((noinline)) CUresult outermost_##name params

/* In an outermost_ function: the real function as `real`, as REAL_OR_RETURN, and a nested call
 * passed on, as DRIVER_WRAPPER does once the driver's functions are known. */
#define REAL_PASSING_NESTED(name, ...)                                                             \
    REAL_OR_RETURN(name);                                                                          \
    if (vt_depth)                                                                                  \
    return vt_nested_pending++, real(__VA_ARGS__)

/* 1 when this outermost call is to be recorded. */
static int recording(void)
{
    return !vt_cfg.disabled;
}

static void note(CUresult rc, vt_api api, vt_kind kind, int device, CUdeviceptr p, uint64_t size)
{
    if (rc != CUDA_SUCCESS)
        vt_note_fail(api, device, size, rc, rc == CUDA_ERROR_OUT_OF_MEMORY);
    else if (p)
        vt_note_alloc(api, kind, device, (uintptr_t)p, size);
}

/* An allocation on the current device: its slot is fetched before the device is asked for
 * (vt_live_prefetch). */
static void note_current(CUresult rc, vt_api api, vt_kind kind, CUdeviceptr p, uint64_t size)
{
    vt_live_prefetch(rc == CUDA_SUCCESS ? p : 0);
    note(rc, api, kind, vt_device_current(), p, size);
}

DRIVER_WRAPPER(cuMemAlloc_v2, (CUdeviceptr *p, size_t size), (p, size))
{
    REAL_PASSING_NESTED(cuMemAlloc_v2, p, size);
    vt_guard_enter();
    CUresult rc = real(p, size);
    vt_guard_leave();
    if (recording())
        note_current(rc, VT_API_cuMemAlloc_v2, VT_KIND_DEVICE, p ? *p : 0, size);
    return rc;
}

DRIVER_WRAPPER(cuMemAllocPitch_v2,
               (CUdeviceptr *p, size_t *pitch, size_t width, size_t height, unsigned int elem),
               (p, pitch, width, height, elem))
{
    REAL_PASSING_NESTED(cuMemAllocPitch_v2, p, pitch, width, height, elem);
    vt_guard_enter();
    CUresult rc = real(p, pitch, width, height, elem);
    vt_guard_leave();
    if (recording()) {
        uint64_t size =
            rc == CUDA_SUCCESS && pitch ? (uint64_t)*pitch * height : (uint64_t)width * height;
        note_current(rc, VT_API_cuMemAllocPitch_v2, VT_KIND_DEVICE, p ? *p : 0, size);
    }
    return rc;
}

DRIVER_WRAPPER(cuMemAllocManaged, (CUdeviceptr *p, size_t size, unsigned int flags),
               (p, size, flags))
{
    REAL_PASSING_NESTED(cuMemAllocManaged, p, size, flags);
    vt_guard_enter();
    CUresult rc = real(p, size, flags);
    vt_guard_leave();
    if (recording())
        note_current(rc, VT_API_cuMemAllocManaged, VT_KIND_MANAGED, p ? *p : 0, size);
    return rc;
}

DRIVER_WRAPPER(cuMemFree_v2, (CUdeviceptr p), (p))
{
    REAL_PASSING_NESTED(cuMemFree_v2, p);
    vt_guard_enter();
    if (recording() && p)
        vt_note_free((uintptr_t)p);
    CUresult rc = real(p);
    vt_guard_leave();
    return rc;
}

static CUresult alloc_async(__typeof__(&cuMemAllocAsync) real, int ptsz, CUdeviceptr *p,
                            size_t size, CUstream s)
{
    vt_guard_enter();
    CUresult rc = real(p, size, s);
    vt_guard_leave();
    if (recording()) {
        CUdeviceptr ptr = p && rc == CUDA_SUCCESS ? *p : 0;
        vt_live_prefetch(ptr);
        note(rc, VT_API_cuMemAllocAsync, VT_KIND_POOL, vt_device_of_stream((uintptr_t)s, ptsz, ptr),
             ptr, size);
    }
    return rc;
}

DRIVER_WRAPPER(cuMemAllocAsync, (CUdeviceptr *p, size_t size, CUstream s), (p, size, s))
{
    REAL_PASSING_NESTED(cuMemAllocAsync, p, size, s);
    return alloc_async(real, 0, p, size, s);
}

DRIVER_WRAPPER(cuMemAllocAsync_ptsz, (CUdeviceptr *p, size_t size, CUstream s), (p, size, s))
{
    REAL_PASSING_NESTED(cuMemAllocAsync_ptsz, p, size, s);
    return alloc_async(real, 1, p, size, s);
}

static CUresult alloc_from_pool(__typeof__(&cuMemAllocFromPoolAsync) real, int ptsz, CUdeviceptr *p,
                                size_t size, CUmemoryPool pool, CUstream s)
{
    vt_guard_enter();
    CUresult rc = real(p, size, pool, s);
    vt_guard_leave();
    if (recording()) {
        CUdeviceptr ptr = p && rc == CUDA_SUCCESS ? *p : 0;
        vt_live_prefetch(ptr);
        int device = vt_device_of_stream((uintptr_t)s, ptsz, ptr);
        if (ptr)
            vt_note_pool(device, (uintptr_t)pool);
        note(rc, VT_API_cuMemAllocFromPoolAsync, VT_KIND_POOL, device, ptr, size);
    }
    return rc;
}

DRIVER_WRAPPER(cuMemAllocFromPoolAsync,
               (CUdeviceptr *p, size_t size, CUmemoryPool pool, CUstream s), (p, size, pool, s))
{
    REAL_PASSING_NESTED(cuMemAllocFromPoolAsync, p, size, pool, s);
    return alloc_from_pool(real, 0, p, size, pool, s);
}

DRIVER_WRAPPER(cuMemAllocFromPoolAsync_ptsz,
               (CUdeviceptr *p, size_t size, CUmemoryPool pool, CUstream s), (p, size, pool, s))
{
    REAL_PASSING_NESTED(cuMemAllocFromPoolAsync_ptsz, p, size, pool, s);
    return alloc_from_pool(real, 1, p, size, pool, s);
}

static CUresult free_async(__typeof__(&cuMemFreeAsync) real, CUdeviceptr p, CUstream s)
{
    vt_guard_enter();
    if (recording() && p)
        vt_note_free((uintptr_t)p);
    CUresult rc = real(p, s);
    vt_guard_leave();
    return rc;
}

DRIVER_WRAPPER(cuMemFreeAsync, (CUdeviceptr p, CUstream s), (p, s))
{
    REAL_PASSING_NESTED(cuMemFreeAsync, p, s);
    return free_async(real, p, s);
}

DRIVER_WRAPPER(cuMemFreeAsync_ptsz, (CUdeviceptr p, CUstream s), (p, s))
{
    REAL_PASSING_NESTED(cuMemFreeAsync_ptsz, p, s);
    return free_async(real, p, s);
}

/* Virtual memory management: physical memory is what costs. */
DRIVER_WRAPPER(cuMemCreate,
               (CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
                unsigned long long flags),
               (h, size, prop, flags))
{
    REAL_PASSING_NESTED(cuMemCreate, h, size, prop, flags);
    vt_guard_enter();
    CUresult rc = real(h, size, prop, flags);
    vt_guard_leave();
    if (!recording())
        return rc;
    int on_device = prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
    int device = on_device ? prop->location.id : vt_device_current();
    if (rc != CUDA_SUCCESS)
        vt_note_fail(VT_API_cuMemCreate, device, size, rc, rc == CUDA_ERROR_OUT_OF_MEMORY);
    else if (h && on_device)
        vt_note_vmm_create((uintptr_t)*h, device, size);
    return rc;
}

DRIVER_WRAPPER(cuMemRelease, (CUmemGenericAllocationHandle h), (h))
{
    REAL_PASSING_NESTED(cuMemRelease, h);
    vt_guard_enter();
    if (recording())
        vt_note_vmm_release((uintptr_t)h);
    CUresult rc = real(h);
    vt_guard_leave();
    return rc;
}

DRIVER_WRAPPER(cuMemRetainAllocationHandle, (CUmemGenericAllocationHandle *h, void *addr),
               (h, addr))
{
    REAL_PASSING_NESTED(cuMemRetainAllocationHandle, h, addr);
    vt_guard_enter();
    CUresult rc = real(h, addr);
    vt_guard_leave();
    if (recording() && rc == CUDA_SUCCESS && h)
        vt_note_vmm_retain((uintptr_t)*h);
    return rc;
}

DRIVER_WRAPPER(cuMemMap,
               (CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                unsigned long long flags),
               (p, size, offset, h, flags))
{
    REAL_PASSING_NESTED(cuMemMap, p, size, offset, h, flags);
    vt_guard_enter();
    CUresult rc = real(p, size, offset, h, flags);
    vt_guard_leave();
    if (recording() && rc == CUDA_SUCCESS)
        vt_note_vmm_map((uintptr_t)p, size, (uintptr_t)h);
    return rc;
}

DRIVER_WRAPPER(cuMemUnmap, (CUdeviceptr p, size_t size), (p, size))
{
    REAL_PASSING_NESTED(cuMemUnmap, p, size);
    vt_guard_enter();
    if (recording())
        vt_note_vmm_unmap((uintptr_t)p, size);
    CUresult rc = real(p, size);
    vt_guard_leave();
    return rc;
}

/* Pools: the sampler adds up the pools allocated from; one destroyed is forgotten first. */
VT_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    REAL_OR_RETURN(cuMemPoolDestroy);
    int outer = vt_guard_enter();
    if (outer && recording()) /* not an allocation: not a nested call when inner */
        vt_note_pool_destroy((uintptr_t)pool);
    CUresult rc = real(pool);
    vt_guard_leave();
    return rc;
}

/* Pinned host memory: kept apart, never part of a device peak. */
static void note_host(CUresult rc, vt_api api, void *p, size_t size)
{
    if (rc != CUDA_SUCCESS)
        vt_note_fail(api, -1, size, rc, 0);
    else if (p) {
        vt_note_host_alloc(api, (uintptr_t)p, size);
        vt_pinned_add((uintptr_t)p, size);
    }
}

DRIVER_WRAPPER(cuMemHostAlloc, (void **p, size_t size, unsigned int flags), (p, size, flags))
{
    REAL_PASSING_NESTED(cuMemHostAlloc, p, size, flags);
    vt_guard_enter();
    CUresult rc = real(p, size, flags);
    vt_guard_leave();
    if (recording())
        note_host(rc, VT_API_cuMemHostAlloc, p ? *p : NULL, size);
    return rc;
}

DRIVER_WRAPPER(cuMemAllocHost_v2, (void **p, size_t size), (p, size))
{
    REAL_PASSING_NESTED(cuMemAllocHost_v2, p, size);
    vt_guard_enter();
    CUresult rc = real(p, size);
    vt_guard_leave();
    if (recording())
        note_host(rc, VT_API_cuMemAllocHost_v2, p ? *p : NULL, size);
    return rc;
}

DRIVER_WRAPPER(cuMemFreeHost, (void *p), (p))
{
    REAL_PASSING_NESTED(cuMemFreeHost, p);
    vt_guard_enter();
    if (recording() && p) {
        vt_pinned_remove((uintptr_t)p);
        vt_note_host_free((uintptr_t)p);
    }
    CUresult rc = real(p);
    vt_guard_leave();
    return rc;
}

/* The lookups themselves: whatever they return that vramtap wraps becomes the wrapper, including
 * a lookup of cuGetProcAddress, which returns the wrapper of the same signature. */
VT_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                       cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    REAL_OR_RETURN(cuGetProcAddress_v2);
    CUresult rc = real(symbol, pfn, version, flags, status);
    if (rc == CUDA_SUCCESS)
        vt_route_swap(pfn, "cuGetProcAddress_v2", symbol, version, flags);
    return rc;
}

VT_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    REAL_OR_RETURN(cuGetProcAddress);
    CUresult rc = real(symbol, pfn, version, flags);
    if (rc == CUDA_SUCCESS)
        vt_route_swap(pfn, "cuGetProcAddress", symbol, version, flags);
    return rc;
}

void *vt_driver_wrapper(vt_drv which)
{
    static void *const wrappers[VT_DRV_COUNT] = {
#define VT_DRV_WRAPPER(name) [VT_DRV_##name] = (void *)name,
        VT_DRIVER_ALLOCS(VT_DRV_WRAPPER)
#undef VT_DRV_WRAPPER
    };
    if ((unsigned)which >= VT_DRV_COUNT)
        return NULL;
    return wrappers[which] ? wrappers[which] : vt_copy_wrapper(which);
}
