/* Finding the real CUDA functions, and the four routes by which a program obtains driver
 * functions without naming them: dlsym on a libcuda handle, cuGetProcAddress (both forms),
 * and the runtime's cudaGetDriverEntryPoint[ByVersion]. Every route ends in vt_route_swap. */
#ifndef VT_RESOLVE_H
#define VT_RESOLVE_H

#include <stdatomic.h>
#include <stdint.h>

#include "tap.h"

/* Driver functions vramtap wraps, then those it only calls, named as libcuda exports them:
 * allocations and lookups (hooks_driver.c), copies, host registration and the waits that end
 * asynchronous downloads (hooks_copy_driver.c, with the per-thread default stream variants the
 * runtime looks up with flags 2). */
#define VT_DRIVER_WRAPPED(X) VT_DRIVER_ALLOCS(X) VT_DRIVER_COPIES(X) VT_DRIVER_WAITS(X)

#define VT_DRIVER_ALLOCS(X)                                                                        \
    X(cuGetProcAddress)                                                                            \
    X(cuGetProcAddress_v2)                                                                         \
    X(cuMemAlloc_v2)                                                                               \
    X(cuMemFree_v2)                                                                                \
    X(cuMemAllocPitch_v2)                                                                          \
    X(cuMemAllocManaged)                                                                           \
    X(cuMemAllocAsync)                                                                             \
    X(cuMemAllocAsync_ptsz)                                                                        \
    X(cuMemAllocFromPoolAsync)                                                                     \
    X(cuMemAllocFromPoolAsync_ptsz)                                                                \
    X(cuMemFreeAsync)                                                                              \
    X(cuMemFreeAsync_ptsz)                                                                         \
    X(cuMemCreate)                                                                                 \
    X(cuMemRelease)                                                                                \
    X(cuMemMap)                                                                                    \
    X(cuMemUnmap)                                                                                  \
    X(cuMemRetainAllocationHandle)                                                                 \
    X(cuMemHostAlloc)                                                                              \
    X(cuMemAllocHost_v2)                                                                           \
    X(cuMemFreeHost)                                                                               \
    X(cuMemPoolDestroy)

#define VT_DRIVER_COPIES(X)                                                                        \
    X(cuMemcpy)                                                                                    \
    X(cuMemcpy_ptds)                                                                               \
    X(cuMemcpyAsync)                                                                               \
    X(cuMemcpyAsync_ptsz)                                                                          \
    X(cuMemcpyPeer)                                                                                \
    X(cuMemcpyPeer_ptds)                                                                           \
    X(cuMemcpyPeerAsync)                                                                           \
    X(cuMemcpyPeerAsync_ptsz)                                                                      \
    X(cuMemcpyHtoD_v2)                                                                             \
    X(cuMemcpyHtoD_v2_ptds)                                                                        \
    X(cuMemcpyDtoH_v2)                                                                             \
    X(cuMemcpyDtoH_v2_ptds)                                                                        \
    X(cuMemcpyDtoD_v2)                                                                             \
    X(cuMemcpyDtoD_v2_ptds)                                                                        \
    X(cuMemcpyHtoDAsync_v2)                                                                        \
    X(cuMemcpyHtoDAsync_v2_ptsz)                                                                   \
    X(cuMemcpyDtoHAsync_v2)                                                                        \
    X(cuMemcpyDtoHAsync_v2_ptsz)                                                                   \
    X(cuMemcpyDtoDAsync_v2)                                                                        \
    X(cuMemcpyDtoDAsync_v2_ptsz)                                                                   \
    X(cuMemcpy2D_v2)                                                                               \
    X(cuMemcpy2D_v2_ptds)                                                                          \
    X(cuMemcpy2DUnaligned_v2)                                                                      \
    X(cuMemcpy2DUnaligned_v2_ptds)                                                                 \
    X(cuMemcpy2DAsync_v2)                                                                          \
    X(cuMemcpy2DAsync_v2_ptsz)                                                                     \
    X(cuMemcpy3D_v2)                                                                               \
    X(cuMemcpy3D_v2_ptds)                                                                          \
    X(cuMemcpy3DAsync_v2)                                                                          \
    X(cuMemcpy3DAsync_v2_ptsz)                                                                     \
    X(cuMemcpy3DPeer)                                                                              \
    X(cuMemcpy3DPeer_ptds)                                                                         \
    X(cuMemcpy3DPeerAsync)                                                                         \
    X(cuMemcpy3DPeerAsync_ptsz)                                                                    \
    X(cuMemcpyBatchAsync)                                                                          \
    X(cuMemcpyBatchAsync_ptsz)                                                                     \
    X(cuMemcpyBatchAsync_v2)                                                                       \
    X(cuMemcpyBatchAsync_v2_ptsz)                                                                  \
    X(cuMemcpy3DBatchAsync)                                                                        \
    X(cuMemcpy3DBatchAsync_ptsz)                                                                   \
    X(cuMemcpy3DBatchAsync_v2)                                                                     \
    X(cuMemcpy3DBatchAsync_v2_ptsz)                                                                \
    X(cuMemHostRegister_v2)                                                                        \
    X(cuMemHostUnregister)

#define VT_DRIVER_WAITS(X)                                                                         \
    X(cuStreamSynchronize)                                                                         \
    X(cuStreamSynchronize_ptsz)                                                                    \
    X(cuEventSynchronize)                                                                          \
    X(cuCtxSynchronize)                                                                            \
    X(cuCtxSynchronize_v2)

#define VT_DRIVER_CALLED(X)                                                                        \
    X(cuCtxGetDevice)                                                                              \
    X(cuStreamGetDevice)                                                                           \
    X(cuStreamGetDevice_ptsz)                                                                      \
    X(cuPointerGetAttribute)                                                                       \
    X(cuMemGetInfo_v2)                                                                             \
    X(cuDeviceGet)                                                                                 \
    X(cuDeviceGetName)                                                                             \
    X(cuDeviceTotalMem_v2)                                                                         \
    X(cuDeviceGetUuid_v2)                                                                          \
    X(cuDeviceGetPCIBusId)                                                                         \
    X(cuDeviceGetDefaultMemPool)                                                                   \
    X(cuMemPoolGetAttribute)                                                                       \
    X(cuThreadExchangeStreamCaptureMode)

#define VT_DRIVER_FUNCS(X) VT_DRIVER_WRAPPED(X) VT_DRIVER_CALLED(X)

typedef enum {
#define VT_DRV_ENUM(name) VT_DRV_##name,
    VT_DRIVER_FUNCS(VT_DRV_ENUM)
#undef VT_DRV_ENUM
        VT_DRV_COUNT
} vt_drv;

/* Every wrapped call looks its real function up: once found, that is a load, inline; the
 * lookups themselves (the _slow forms) run until they succeed. */
extern VT_HIDDEN atomic_int vt_known_ready;
extern VT_HIDDEN void *vt_known[VT_DRV_COUNT];
VT_HIDDEN void *vt_real_driver_slow(vt_drv which);
VT_HIDDEN void *vt_real_next_slow(_Atomic(void *) *cache, const char *name);

/* The real function libcuda exports under that name, or NULL when libcuda is not loaded. */
static inline void *vt_real_driver(vt_drv which)
{
    return atomic_load_explicit(&vt_known_ready, memory_order_acquire) ? vt_known[which]
                                                                       : vt_real_driver_slow(which);
}

/* The real function of a runtime symbol: the next definition after this library. */
static inline void *vt_real_next(_Atomic(void *) *cache, const char *name)
{
    void *p = atomic_load_explicit(cache, memory_order_acquire);
    return p ? p : vt_real_next_slow(cache, name);
}
VT_HIDDEN void *vt_real_dlsym(void *handle, const char *name);

/* If *pfn is a real driver function vramtap wraps, replace it with the wrapper. `route` and
 * the lookup arguments only feed VRAMTAP_DEBUG lines. */
VT_HIDDEN void vt_route_swap(void **pfn, const char *route, const char *symbol, int version,
                             unsigned long long flags);

/* Which device: one set of answers for every hook, from the driver (the runtime makes its
 * device's context current for every call), -1 when the driver cannot tell (such an allocation
 * is counted in `dropped`, not charged to a guess).
 * vt_device_current: the device of the calling thread's context.
 * vt_device_of_pointer: where memory at `p` lives; the current device when not known.
 * vt_device_of_stream: a stream-ordered allocation's, the stream's (the default streams: the
 * current device); drivers before 12.8 lack cuStreamGetDevice, and then the pointer tells. */
VT_HIDDEN int vt_device_current(void);
VT_HIDDEN int vt_device_of_pointer(uintptr_t p);
VT_HIDDEN int vt_device_of_created_stream(uintptr_t stream, int ptsz, uintptr_t p);
static inline int vt_device_of_stream(uintptr_t stream, int ptsz, uintptr_t p)
{
    /* a default stream (null or named): the current device's */
    return stream <= VT_STREAM_PER_THREAD ? vt_device_current()
                                          : vt_device_of_created_stream(stream, ptsz, p);
}

/* The current device's free and total memory (driver), 0 on success. Only from inside a hook:
 * never before main or at exit. */
VT_HIDDEN int vt_query_meminfo(int64_t *free_bytes, int64_t *total_bytes);

/* While a stream is captured into a CUDA graph in global mode, a query CUDA deems unsafe from
 * any thread would invalidate the capture. Around its own queries the calling thread opts out,
 * as libraries are meant to; vt_capture_restore puts back what vt_capture_relax returned. */
VT_HIDDEN int vt_capture_relax(void);
VT_HIDDEN void vt_capture_restore(int mode);

/* Wrappers for the driver functions, defined in hooks_driver.c (NULL for those only called);
 * vt_copy_wrapper: those of VT_DRIVER_COPIES and VT_DRIVER_WAITS, defined in hooks_copy_driver.c
 * (NULL for others). */
VT_HIDDEN void *vt_driver_wrapper(vt_drv which);
VT_HIDDEN void *vt_copy_wrapper(vt_drv which);

#endif
