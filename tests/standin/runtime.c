/* libcudart.so.13 stand-in.
 *
 * It reaches the driver exactly the way NVIDIA's runtime does (reference:
 * ../shared/reference/cudart13-driver-lookups.txt): on first use it dlopens libcuda.so.1, makes
 * one dlsym, for cuGetProcAddress_v2, and looks up every other entry point through it. From then
 * on it calls the driver only through the pointers it was given, never by name, and each runtime
 * allocation is exactly one driver allocation call. This is what an interposer such as vramtap
 * has to see through, so the stand-in must not be any easier to see through than the real one. */

/* Declares the exported names as libcudart exports them: cudaMallocAsync beside
 * cudaMallocAsync_ptsz, and so on. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>
#include <cupti_runtime_cbid.h>
#include <generated_cuda_runtime_api_meta.h>

#include "log.h"
#include "runtime.h"
#include "trace.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum { RUNTIME_VERSION = 13000, MAX_DEVICES = 64 };

static struct {
    cudaError_t status; /* of reaching the driver; every call fails with it when it is not 0 */
    PFN_cuGetProcAddress_v12000 getProcAddress;
    PFN_cuGetProcAddress_v11030 getProcAddress_v11030;
    PFN_cuGetExportTable_v3000 getExportTable;
    const struct standin_tools_table *tools; /* where calls are reported to tools; NULL: nowhere */
    PFN_cuInit_v2000 init;
    PFN_cuDeviceGet_v2000 deviceGet;
    PFN_cuDeviceGetCount_v2000 deviceGetCount;
    PFN_cuDeviceGetDefaultMemPool_v11020 deviceGetDefaultMemPool;
    PFN_cuDevicePrimaryCtxRetain_v7000 primaryCtxRetain;
    PFN_cuCtxSetCurrent_v4000 ctxSetCurrent;
    PFN_cuCtxGetCurrent_v4000 ctxGetCurrent;
    PFN_cuCtxGetDevice_v2000 ctxGetDevice;
    PFN_cuCtxSynchronize_v2000 ctxSynchronize;
    PFN_cuMemGetInfo_v3020 memGetInfo;
    PFN_cuMemAllocManaged_v6000 memAllocManaged;
    PFN_cuMemAlloc_v3020 memAlloc;
    PFN_cuMemAllocPitch_v3020 memAllocPitch;
    PFN_cuMemFree_v3020 memFree;
    PFN_cuMemFreeHost_v2000 memFreeHost;
    PFN_cuMemHostAlloc_v2020 memHostAlloc;
    PFN_cuPointerGetAttribute_v4000 pointerGetAttribute;
    PFN_cuMemAllocAsync_v11020 memAllocAsync;
    PFN_cuMemAllocAsync_v11020_ptsz memAllocAsync_ptsz;
    PFN_cuMemAllocFromPoolAsync_v11020 memAllocFromPoolAsync;
    PFN_cuMemAllocFromPoolAsync_v11020_ptsz memAllocFromPoolAsync_ptsz;
    PFN_cuMemFreeAsync_v11020 memFreeAsync;
    PFN_cuMemFreeAsync_v11020_ptsz memFreeAsync_ptsz;
    PFN_cuMemPoolTrimTo_v11020 memPoolTrimTo;
    PFN_cuMemPoolSetAttribute_v11020 memPoolSetAttribute;
    PFN_cuMemPoolGetAttribute_v11020 memPoolGetAttribute;
    PFN_cuMemPoolCreate_v11020 memPoolCreate;
    PFN_cuMemPoolDestroy_v11020 memPoolDestroy;
    PFN_cuStreamCreate_v2000 streamCreate;
    PFN_cuStreamGetDevice_v12080 streamGetDevice;
    PFN_cuStreamGetDevice_v12080_ptsz streamGetDevice_ptsz;
    PFN_cuStreamDestroy_v4000 streamDestroy;
} drv;

static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

cudaError_t to_runtime(CUresult r)
{
    switch (r) {
    case CUDA_SUCCESS:
        return cudaSuccess;
    case CUDA_ERROR_INVALID_VALUE:
        return cudaErrorInvalidValue;
    case CUDA_ERROR_OUT_OF_MEMORY:
        return cudaErrorMemoryAllocation;
    case CUDA_ERROR_NOT_INITIALIZED:
        return cudaErrorInitializationError;
    case CUDA_ERROR_NO_DEVICE:
        return cudaErrorNoDevice;
    case CUDA_ERROR_INVALID_DEVICE:
        return cudaErrorInvalidDevice;
    case CUDA_ERROR_INVALID_CONTEXT:
        return cudaErrorDeviceUninitialized;
    case CUDA_ERROR_INVALID_HANDLE:
        return cudaErrorInvalidResourceHandle;
    case CUDA_ERROR_NOT_FOUND:
        return cudaErrorSymbolNotFound;
    case CUDA_ERROR_NOT_PERMITTED:
        return cudaErrorNotPermitted;
    case CUDA_ERROR_NOT_SUPPORTED:
        return cudaErrorNotSupported;
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
        return cudaErrorHostMemoryAlreadyRegistered;
    case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED:
        return cudaErrorHostMemoryNotRegistered;
    default:
        return cudaErrorUnknown;
    }
}

void *lookup(const char *symbol, int version, cuuint64_t flags)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult status;
    if (drv.getProcAddress(symbol, &fn, version, flags, &status) != CUDA_SUCCESS)
        return NULL;
    return fn;
}

static void load_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    standin_log("[dlopen] libcuda.so.1 flags=0x%x -> %p", RTLD_NOW, h);
    if (!h) {
        drv.status = cudaErrorInsufficientDriver;
        return;
    }
    drv.getProcAddress = (PFN_cuGetProcAddress_v12000)dlsym(h, "cuGetProcAddress_v2");
    Dl_info self;
    const char *caller = dladdr((void *)(uintptr_t)load_driver, &self) ? self.dli_fname : "?";
    standin_log("[dlsym] caller=%s handle=%p sym=cuGetProcAddress_v2 -> %p", caller, h,
                (void *)(uintptr_t)drv.getProcAddress);
    if (!drv.getProcAddress) {
        drv.status = cudaErrorInsufficientDriver;
        return;
    }
    /* NVIDIA's runtime opens with this probe; interposers must answer it as the driver does. */
    void *probe;
    drv.getProcAddress("", &probe, 0, 0, NULL);

    bool ok = true;
#define GET(slot, symbol, version, flags)                                                          \
    ok &= (drv.slot = (__typeof__(drv.slot))lookup(symbol, version, flags)) != NULL
    GET(init, "cuInit", 2000, 0);
    /* Both lookup entry points must exist (a driver older than 12.0 is refused); from here on,
     * lookups go through the one the driver handed back rather than the one from dlsym. */
    GET(getProcAddress_v11030, "cuGetProcAddress", 11030, 0);
    GET(getProcAddress, "cuGetProcAddress", 12000, 0);
    GET(deviceGet, "cuDeviceGet", 2000, 0);
    GET(deviceGetCount, "cuDeviceGetCount", 2000, 0);
    GET(deviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool", 11020, 0);
    GET(primaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000, 0);
    GET(ctxSetCurrent, "cuCtxSetCurrent", 4000, 0);
    GET(ctxGetCurrent, "cuCtxGetCurrent", 4000, 0);
    GET(ctxGetDevice, "cuCtxGetDevice", 2000, 0);
    GET(ctxSynchronize, "cuCtxSynchronize", 2000, 0);
    GET(memGetInfo, "cuMemGetInfo", 3020, 0);
    GET(memAllocManaged, "cuMemAllocManaged", 6000, 0);
    GET(memAlloc, "cuMemAlloc", 3020, 0);
    GET(memAllocPitch, "cuMemAllocPitch", 3020, 0);
    GET(memFree, "cuMemFree", 3020, 0);
    GET(memFreeHost, "cuMemFreeHost", 2000, 0);
    GET(memHostAlloc, "cuMemHostAlloc", 2020, 0);
    GET(pointerGetAttribute, "cuPointerGetAttribute", 4000, 0);
    GET(memAllocAsync, "cuMemAllocAsync", 11020, 0);
    GET(memAllocAsync_ptsz, "cuMemAllocAsync", 11020,
        CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    GET(memAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, 0);
    GET(memAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 11020,
        CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    GET(memFreeAsync, "cuMemFreeAsync", 11020, 0);
    GET(memFreeAsync_ptsz, "cuMemFreeAsync", 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    GET(memPoolTrimTo, "cuMemPoolTrimTo", 11020, 0);
    GET(memPoolSetAttribute, "cuMemPoolSetAttribute", 11020, 0);
    GET(memPoolGetAttribute, "cuMemPoolGetAttribute", 11020, 0);
    GET(memPoolCreate, "cuMemPoolCreate", 11020, 0);
    GET(memPoolDestroy, "cuMemPoolDestroy", 11020, 0);
    GET(streamCreate, "cuStreamCreate", 2000, 0);
    GET(streamGetDevice, "cuStreamGetDevice", 12080, 0);
    GET(streamGetDevice_ptsz, "cuStreamGetDevice", 12080,
        CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    GET(streamDestroy, "cuStreamDestroy", 4000, 0);
    GET(getExportTable, "cuGetExportTable", 3000, 0);
#undef GET
    ok &= copy_lookups();
    static const CUuuid tools_id = STANDIN_TOOLS_TABLE_ID;
    if (ok && drv.getExportTable((const void **)&drv.tools, &tools_id) != CUDA_SUCCESS)
        drv.tools = NULL;
    drv.status = ok ? to_runtime(drv.init(0)) : cudaErrorInsufficientDriver;
}

static _Thread_local int rt_device; /* cudaSetDevice's choice: 0 until a thread sets one */
static _Thread_local cudaError_t last_error;

/* Failing calls return through here, so cudaGetLastError sees what the caller saw. */
cudaError_t done(cudaError_t e)
{
    if (e != cudaSuccess)
        last_error = e;
    return e;
}

static cudaError_t load(void)
{
    pthread_once(&drv_once, load_driver);
    return drv.status;
}

/* Each device's primary context is retained once and kept until exit, as NVIDIA's runtime keeps
 * it. Two threads racing here only retain it twice; no lock is held across the driver call, so
 * fork() can never catch one held. */
static _Atomic(CUcontext) primary[MAX_DEVICES];

CUresult primary_ctx(int device, CUcontext *ctx)
{
    if (device < 0 || device >= MAX_DEVICES)
        return CUDA_ERROR_INVALID_DEVICE;
    *ctx = atomic_load(&primary[device]);
    if (*ctx)
        return CUDA_SUCCESS;
    CUresult r = drv.primaryCtxRetain(ctx, device);
    if (r == CUDA_SUCCESS)
        atomic_store(&primary[device], *ctx);
    return r;
}

CUresult make_current(int device)
{
    CUcontext ctx;
    CUresult r = primary_ctx(device, &ctx);
    return r == CUDA_SUCCESS ? drv.ctxSetCurrent(ctx) : r;
}

/* For calls that act on the current device: like NVIDIA's runtime, adopt the context the thread
 * already has (set through the driver API, say), else make the runtime's device current. */
cudaError_t enter(void)
{
    cudaError_t e = load();
    if (e != cudaSuccess)
        return e;
    CUcontext ctx;
    CUresult r = drv.ctxGetCurrent(&ctx);
    if (r == CUDA_SUCCESS && !ctx)
        r = make_current(rt_device);
    return to_runtime(r);
}

/* ---- allocations: each is one driver allocation call ---- */

static cudaError_t untraced_cudaMalloc(void **devPtr, size_t size)
{
    if (!devPtr)
        return done(cudaErrorInvalidValue);
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    /* NVIDIA's cudaMalloc answers a zero-byte request with NULL and success, without the driver. */
    if (!size) {
        *devPtr = NULL;
        return cudaSuccess;
    }
    CUdeviceptr p;
    e = to_runtime(drv.memAlloc(&p, size));
    if (e == cudaSuccess)
        *devPtr = (void *)p;
    return done(e);
}

static cudaError_t untraced_cudaFree(void *devPtr)
{
    cudaError_t e = enter();
    if (e != cudaSuccess || !devPtr)
        return done(e);
    return done(to_runtime(drv.memFree((CUdeviceptr)devPtr)));
}

/* per_thread: the _ptsz entry point, which calls the driver's _ptsz variant. */
static cudaError_t malloc_async(bool per_thread, void **devPtr, size_t size, cudaStream_t stream)
{
    if (!devPtr)
        return done(cudaErrorInvalidValue);
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    CUdeviceptr p;
    e = to_runtime(per_thread ? drv.memAllocAsync_ptsz(&p, size, stream)
                              : drv.memAllocAsync(&p, size, stream));
    if (e == cudaSuccess)
        *devPtr = (void *)p;
    return done(e);
}

static cudaError_t untraced_cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    return malloc_async(false, devPtr, size, hStream);
}

static cudaError_t untraced_cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream)
{
    return malloc_async(true, devPtr, size, hStream);
}

static cudaError_t malloc_from_pool(bool per_thread, void **ptr, size_t size, cudaMemPool_t memPool,
                                    cudaStream_t stream)
{
    if (!ptr)
        return done(cudaErrorInvalidValue);
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    CUdeviceptr p;
    e = to_runtime(per_thread ? drv.memAllocFromPoolAsync_ptsz(&p, size, memPool, stream)
                              : drv.memAllocFromPoolAsync(&p, size, memPool, stream));
    if (e == cudaSuccess)
        *ptr = (void *)p;
    return done(e);
}

static cudaError_t untraced_cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool,
                                                    cudaStream_t stream)
{
    return malloc_from_pool(false, ptr, size, memPool, stream);
}

static cudaError_t untraced_cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size,
                                                         cudaMemPool_t memPool, cudaStream_t stream)
{
    return malloc_from_pool(true, ptr, size, memPool, stream);
}

static cudaError_t free_async(bool per_thread, void *devPtr, cudaStream_t stream)
{
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    CUdeviceptr p = (CUdeviceptr)devPtr;
    return done(
        to_runtime(per_thread ? drv.memFreeAsync_ptsz(p, stream) : drv.memFreeAsync(p, stream)));
}

static cudaError_t untraced_cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    return free_async(false, devPtr, hStream);
}

static cudaError_t untraced_cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream)
{
    return free_async(true, devPtr, hStream);
}

static cudaError_t untraced_cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    if (!devPtr)
        return done(cudaErrorInvalidValue);
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    CUdeviceptr p;
    e = to_runtime(drv.memAllocManaged(&p, size, flags));
    if (e == cudaSuccess)
        *devPtr = (void *)p;
    return done(e);
}

/* Rows of 16-byte elements, the widest the driver accepts. */
static cudaError_t malloc_pitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return e;
    CUdeviceptr p;
    e = to_runtime(drv.memAllocPitch(&p, pitch, width, height, 16));
    if (e == cudaSuccess)
        *devPtr = (void *)p;
    return e;
}

static cudaError_t untraced_cudaMallocPitch(void **devPtr, size_t *pitch, size_t width,
                                            size_t height)
{
    if (!devPtr || !pitch)
        return done(cudaErrorInvalidValue);
    return done(malloc_pitch(devPtr, pitch, width, height));
}

static cudaError_t untraced_cudaMalloc3D(struct cudaPitchedPtr *pitchedDevPtr,
                                         struct cudaExtent extent)
{
    if (!pitchedDevPtr || (extent.depth && extent.height > SIZE_MAX / extent.depth))
        return done(cudaErrorInvalidValue);
    void *p;
    size_t pitch;
    cudaError_t e = malloc_pitch(&p, &pitch, extent.width, extent.height * extent.depth);
    if (e == cudaSuccess)
        *pitchedDevPtr = (struct cudaPitchedPtr){
            .ptr = p, .pitch = pitch, .xsize = extent.width, .ysize = extent.height};
    return done(e);
}

/* Both pinned allocators call cuMemHostAlloc, as NVIDIA's do (it never looks up
 * cuMemAllocHost). The cudaHostAlloc* flags have the values of CU_MEMHOSTALLOC_*. */
static cudaError_t host_alloc(void **pHost, size_t size, unsigned int flags)
{
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    return done(to_runtime(drv.memHostAlloc(pHost, size, flags)));
}

static cudaError_t untraced_cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    return host_alloc(pHost, size, flags);
}

static cudaError_t untraced_cudaMallocHost(void **ptr, size_t size)
{
    return host_alloc(ptr, size, cudaHostAllocDefault);
}

static cudaError_t untraced_cudaFreeHost(void *ptr)
{
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    return done(to_runtime(drv.memFreeHost(ptr)));
}

/* ---- devices, streams, pointers ---- */

cudaError_t cudaGetDeviceCount(int *count)
{
    cudaError_t e = load();
    if (e != cudaSuccess)
        return done(e);
    return done(to_runtime(drv.deviceGetCount(count)));
}

cudaError_t cudaSetDevice(int device)
{
    cudaError_t e = load();
    if (e != cudaSuccess)
        return done(e);
    CUdevice dev;
    CUresult r = device < MAX_DEVICES ? drv.deviceGet(&dev, device) : CUDA_ERROR_INVALID_DEVICE;
    if (r == CUDA_SUCCESS)
        r = make_current(device);
    if (r == CUDA_SUCCESS)
        rt_device = device;
    return done(to_runtime(r));
}

cudaError_t cudaGetDevice(int *device)
{
    if (!device)
        return done(cudaErrorInvalidValue);
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    return done(to_runtime(drv.ctxGetDevice(device)));
}

cudaError_t cudaMemGetInfo(size_t *free, size_t *total)
{
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    return done(to_runtime(drv.memGetInfo(free, total)));
}

cudaError_t cudaDeviceSynchronize(void)
{
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    return done(to_runtime(drv.ctxSynchronize()));
}

cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    return done(to_runtime(drv.streamCreate(pStream, 0)));
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    return done(to_runtime(drv.streamDestroy(stream)));
}

cudaError_t cudaStreamGetDevice(cudaStream_t hStream, int *device)
{
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    return done(to_runtime(drv.streamGetDevice(hStream, device)));
}

cudaError_t cudaStreamGetDevice_ptsz(cudaStream_t hStream, int *device)
{
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    return done(to_runtime(drv.streamGetDevice_ptsz(hStream, device)));
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes, const void *ptr)
{
    if (!attributes)
        return done(cudaErrorInvalidValue);
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    CUdeviceptr p = (CUdeviceptr)ptr;
    unsigned int type, managed;
    int device;
    CUresult r = drv.pointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
    if (r == CUDA_ERROR_INVALID_VALUE) {
        /* Since CUDA 11 memory CUDA does not know is "unregistered", not an error. */
        *attributes = (struct cudaPointerAttributes){.type = cudaMemoryTypeUnregistered,
                                                     .device = cudaInvalidDeviceId,
                                                     .hostPointer = (void *)ptr};
        return cudaSuccess;
    }
    if (r == CUDA_SUCCESS)
        r = drv.pointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p);
    if (r == CUDA_SUCCESS)
        r = drv.pointerGetAttribute(&device, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p);
    if (r != CUDA_SUCCESS)
        return done(to_runtime(r));
    bool host = type == CU_MEMORYTYPE_HOST;
    *attributes =
        (struct cudaPointerAttributes){.type = managed ? cudaMemoryTypeManaged
                                               : host  ? cudaMemoryTypeHost
                                                       : cudaMemoryTypeDevice,
                                       .device = device,
                                       .devicePointer = (void *)ptr,
                                       .hostPointer = managed || host ? (void *)ptr : NULL};
    return cudaSuccess;
}

/* ---- memory pools ---- */

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *memPool, int device)
{
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    return done(to_runtime(drv.deviceGetDefaultMemPool(memPool, device)));
}

cudaError_t cudaMemPoolCreate(cudaMemPool_t *memPool, const struct cudaMemPoolProps *poolProps)
{
    if (!poolProps)
        return done(cudaErrorInvalidValue);
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    /* Same fields, same enumerator values; only the C types differ. */
    CUmemPoolProps props = {
        .allocType = (CUmemAllocationType)poolProps->allocType,
        .handleTypes = (CUmemAllocationHandleType)poolProps->handleTypes,
        .location = {.type = (CUmemLocationType)poolProps->location.type,
                     .id = poolProps->location.id},
        .win32SecurityAttributes = poolProps->win32SecurityAttributes,
        .maxSize = poolProps->maxSize,
        .usage = poolProps->usage,
    };
    return done(to_runtime(drv.memPoolCreate(memPool, &props)));
}

static cudaError_t untraced_cudaMemPoolDestroy(cudaMemPool_t memPool)
{
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    return done(to_runtime(drv.memPoolDestroy(memPool)));
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value)
{
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    return done(to_runtime(drv.memPoolGetAttribute(memPool, (CUmemPool_attribute)attr, value)));
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value)
{
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    return done(to_runtime(drv.memPoolSetAttribute(memPool, (CUmemPool_attribute)attr, value)));
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep)
{
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    return done(to_runtime(drv.memPoolTrimTo(memPool, minBytesToKeep)));
}

/* ---- driver entry points ---- */

/* per_thread: the _ptsz forms, built for per-thread default streams, where "default" means
 * per-thread. */
static cudaError_t entry_point(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                               unsigned long long flags, bool per_thread,
                               enum cudaDriverEntryPointQueryResult *driverStatus)
{
    if (per_thread && flags == cudaEnableDefault)
        flags = cudaEnablePerThreadDefaultStream;
    if (!symbol || !funcPtr || flags > cudaEnablePerThreadDefaultStream)
        return done(cudaErrorInvalidValue);
    cudaError_t e = load();
    if (e != cudaSuccess)
        return done(e);
    /* The cudaEnable* flags and the query results have the driver's values. */
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = drv.getProcAddress(symbol, funcPtr, (int)cudaVersion, flags, &status);
    if (driverStatus)
        *driverStatus = (enum cudaDriverEntryPointQueryResult)status;
    /* A symbol the driver lacks is documented as success with a NULL pointer. */
    if (r == CUDA_ERROR_NOT_FOUND) {
        *funcPtr = NULL;
        return cudaSuccess;
    }
    return done(to_runtime(r));
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr,
                                             unsigned int cudaVersion, unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return entry_point(symbol, funcPtr, cudaVersion, flags, false, driverStatus);
}

cudaError_t
cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                      unsigned long long flags,
                                      enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return entry_point(symbol, funcPtr, cudaVersion, flags, true, driverStatus);
}

cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr, unsigned long long flags,
                                    enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return entry_point(symbol, funcPtr, RUNTIME_VERSION, flags, false, driverStatus);
}

cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr,
                                         unsigned long long flags,
                                         enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return entry_point(symbol, funcPtr, RUNTIME_VERSION, flags, true, driverStatus);
}

/* ---- errors ---- */

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

const char *cudaGetErrorString(cudaError_t error)
{
    switch (error) {
    case cudaSuccess:
        return "no error";
    case cudaErrorInvalidValue:
        return "invalid argument";
    case cudaErrorMemoryAllocation:
        return "out of memory";
    case cudaErrorInitializationError:
        return "initialization error";
    case cudaErrorInsufficientDriver:
        return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice:
        return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice:
        return "invalid device ordinal";
    case cudaErrorDeviceUninitialized:
        return "invalid device context";
    case cudaErrorInvalidResourceHandle:
        return "invalid resource handle";
    case cudaErrorSymbolNotFound:
        return "named symbol not found";
    case cudaErrorNotPermitted:
        return "operation not permitted";
    case cudaErrorNotSupported:
        return "operation not supported";
    case cudaErrorUnknown:
        return "unknown error";
    default:
        return "unrecognized error code";
    }
}

/* ---- the entry points reported to tools: the work is done by untraced_<name> ----
 *
 * The runtime initialises (and so loads the tools CUDA_INJECTION64_PATH names) before it reports
 * a call, as NVIDIA's, which reaches CUPTI through the driver, must. */

static const struct standin_tools_table *tools(void)
{
    return load() == cudaSuccess ? drv.tools : NULL;
}

#define UNPAREN(...) __VA_ARGS__
/* `decl` the parameters, `args` their names, in the order of cbid##_params' members. */
#define RUNTIME_TRACED(name, cbid, decl, args)                                                     \
    cudaError_t name decl                                                                          \
    {                                                                                              \
        cbid##_params params = {UNPAREN args};                                                     \
        const struct standin_tools_table *t = tools();                                             \
        if (t)                                                                                     \
            t->runtime_api(0, CUPTI_RUNTIME_TRACE_CBID_##cbid, #name, &params, NULL);              \
        cudaError_t r = untraced_##name args;                                                      \
        if (t)                                                                                     \
            t->runtime_api(1, CUPTI_RUNTIME_TRACE_CBID_##cbid, #name, &params, &r);                \
        return r;                                                                                  \
    }

RUNTIME_TRACED(cudaMalloc, cudaMalloc_v3020, (void **devPtr, size_t size), (devPtr, size))
RUNTIME_TRACED(cudaMallocPitch, cudaMallocPitch_v3020,
               (void **devPtr, size_t *pitch, size_t width, size_t height),
               (devPtr, pitch, width, height))
RUNTIME_TRACED(cudaMalloc3D, cudaMalloc3D_v3020,
               (struct cudaPitchedPtr * pitchedDevPtr, struct cudaExtent extent),
               (pitchedDevPtr, extent))
RUNTIME_TRACED(cudaMallocManaged, cudaMallocManaged_v6000,
               (void **devPtr, size_t size, unsigned int flags), (devPtr, size, flags))
RUNTIME_TRACED(cudaMallocAsync, cudaMallocAsync_v11020,
               (void **devPtr, size_t size, cudaStream_t hStream), (devPtr, size, hStream))
RUNTIME_TRACED(cudaMallocAsync_ptsz, cudaMallocAsync_ptsz_v11020,
               (void **devPtr, size_t size, cudaStream_t hStream), (devPtr, size, hStream))
RUNTIME_TRACED(cudaMallocFromPoolAsync, cudaMallocFromPoolAsync_v11020,
               (void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream),
               (ptr, size, memPool, stream))
RUNTIME_TRACED(cudaMallocFromPoolAsync_ptsz, cudaMallocFromPoolAsync_ptsz_v11020,
               (void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream),
               (ptr, size, memPool, stream))
RUNTIME_TRACED(cudaMallocHost, cudaMallocHost_v3020, (void **ptr, size_t size), (ptr, size))
RUNTIME_TRACED(cudaHostAlloc, cudaHostAlloc_v3020, (void **pHost, size_t size, unsigned int flags),
               (pHost, size, flags))
RUNTIME_TRACED(cudaFree, cudaFree_v3020, (void *devPtr), (devPtr))
RUNTIME_TRACED(cudaFreeAsync, cudaFreeAsync_v11020, (void *devPtr, cudaStream_t hStream),
               (devPtr, hStream))
RUNTIME_TRACED(cudaFreeAsync_ptsz, cudaFreeAsync_ptsz_v11020, (void *devPtr, cudaStream_t hStream),
               (devPtr, hStream))
RUNTIME_TRACED(cudaFreeHost, cudaFreeHost_v3020, (void *ptr), (ptr))
RUNTIME_TRACED(cudaMemPoolDestroy, cudaMemPoolDestroy_v11020, (cudaMemPool_t memPool), (memPool))
