/* Finding the real CUDA functions, and the four routes by which a program obtains driver
 * functions without naming them: dlsym on a libcuda handle, cuGetProcAddress (both forms),
 * and the runtime's cudaGetDriverEntryPoint[ByVersion]. Every route ends in vt_route_swap. */
#ifndef VT_RESOLVE_H
#define VT_RESOLVE_H

#include <stdint.h>

#include "tap.h"

/* Driver functions vramtap wraps (hooks_driver.c defines each), then those it only calls,
 * named as libcuda exports them. */
#define VT_DRIVER_WRAPPED(X)                                                                       \
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

/* The real function libcuda exports under that name, or NULL when libcuda is not loaded. */
VT_HIDDEN void *vt_real_driver(vt_drv which);
/* The real function of a runtime symbol: the next definition after this library. */
VT_HIDDEN void *vt_real_next(_Atomic(void *) *cache, const char *name);
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
VT_HIDDEN int vt_device_of_stream(uintptr_t stream, int ptsz, uintptr_t p);

/* The current device's free and total memory (driver), 0 on success. Only from inside a hook:
 * never before main or at exit. */
VT_HIDDEN int vt_query_meminfo(int64_t *free_bytes, int64_t *total_bytes);

/* While a stream is captured into a CUDA graph in global mode, a query CUDA deems unsafe from
 * any thread would invalidate the capture. Around its own queries the calling thread opts out,
 * as libraries are meant to; vt_capture_restore puts back what vt_capture_relax returned. */
VT_HIDDEN int vt_capture_relax(void);
VT_HIDDEN void vt_capture_restore(int mode);

/* Wrappers for the driver functions, defined in hooks_driver.c (NULL for those only called). */
VT_HIDDEN void *vt_driver_wrapper(vt_drv which);

#endif
