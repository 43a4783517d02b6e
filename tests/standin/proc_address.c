/* libcuda.so.1 stand-in: cuGetProcAddress, the route by which NVIDIA's runtime (and most
 * frameworks) reach the driver.
 *
 * A lookup names a base symbol, a CUDA version and flags; the answer is the newest variant
 * introduced at or before that version, the per-thread-default-stream (_ptsz) one when flags ask
 * for it and one exists. Every pointer handed out is this library's own function (the library is
 * linked -Bsymbolic), never an interposer's. */
#include "driver.h"
#include "log.h"

#include <string.h>

typedef void (*entry_fn)(void);

static const struct entry {
    const char *name;
    int version; /* the CUDA version that introduced this variant */
    bool ptsz;
    entry_fn fn;
} entries[] = {
#define E(name, version, fn)                                                                       \
    {                                                                                              \
        name, version, false, (entry_fn)fn                                                         \
    }
#define PTSZ(name, version, fn)                                                                    \
    {                                                                                              \
        name, version, true, (entry_fn)fn                                                          \
    }
    E("cuInit", 2000, cuInit),
    E("cuDriverGetVersion", 2020, cuDriverGetVersion),
    E("cuGetProcAddress", 11030, cuGetProcAddress),
    E("cuGetProcAddress", 12000, cuGetProcAddress_v2),
    E("cuGetErrorString", 6000, cuGetErrorString),
    E("cuGetErrorName", 6000, cuGetErrorName),
    E("cuDeviceGet", 2000, cuDeviceGet),
    E("cuDeviceGetCount", 2000, cuDeviceGetCount),
    E("cuDeviceGetName", 2000, cuDeviceGetName),
    E("cuDeviceTotalMem", 3020, cuDeviceTotalMem_v2),
    E("cuDeviceGetUuid", 9020, cuDeviceGetUuid),
    E("cuDeviceGetUuid", 11040, cuDeviceGetUuid_v2),
    E("cuDeviceGetPCIBusId", 4010, cuDeviceGetPCIBusId),
    E("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
    E("cuDeviceGetDefaultMemPool", 11020, cuDeviceGetDefaultMemPool),
    E("cuDeviceGetMemPool", 11020, cuDeviceGetMemPool),
    E("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
    E("cuDevicePrimaryCtxRelease", 7000, cuDevicePrimaryCtxRelease),
    E("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2),
    E("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
    E("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
    E("cuCtxGetDevice", 2000, cuCtxGetDevice),
    E("cuCtxGetDevice", 13000, cuCtxGetDevice_v2),
    E("cuCtxSynchronize", 2000, cuCtxSynchronize),
    E("cuCtxSynchronize", 13000, cuCtxSynchronize_v2),
    E("cuMemGetInfo", 3020, cuMemGetInfo_v2),
    E("cuMemAlloc", 3020, cuMemAlloc_v2),
    E("cuMemAllocPitch", 3020, cuMemAllocPitch_v2),
    E("cuMemAllocManaged", 6000, cuMemAllocManaged),
    E("cuMemFree", 3020, cuMemFree_v2),
    E("cuMemGetAddressRange", 3020, cuMemGetAddressRange_v2),
    E("cuMemAllocHost", 3020, cuMemAllocHost_v2),
    E("cuMemHostAlloc", 2020, cuMemHostAlloc),
    E("cuMemFreeHost", 2000, cuMemFreeHost),
    E("cuPointerGetAttribute", 4000, cuPointerGetAttribute),
    E("cuMemAllocAsync", 11020, cuMemAllocAsync),
    PTSZ("cuMemAllocAsync", 11020, cuMemAllocAsync_ptsz),
    E("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync),
    PTSZ("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync_ptsz),
    E("cuMemFreeAsync", 11020, cuMemFreeAsync),
    PTSZ("cuMemFreeAsync", 11020, cuMemFreeAsync_ptsz),
    E("cuMemPoolCreate", 11020, cuMemPoolCreate),
    E("cuMemPoolDestroy", 11020, cuMemPoolDestroy),
    E("cuMemPoolGetAttribute", 11020, cuMemPoolGetAttribute),
    E("cuMemPoolSetAttribute", 11020, cuMemPoolSetAttribute),
    E("cuMemPoolTrimTo", 11020, cuMemPoolTrimTo),
    E("cuStreamCreate", 2000, cuStreamCreate),
    E("cuStreamDestroy", 4000, cuStreamDestroy_v2),
    E("cuStreamGetDevice", 12080, cuStreamGetDevice),
    PTSZ("cuStreamGetDevice", 12080, cuStreamGetDevice_ptsz),
    E("cuStreamSynchronize", 2000, cuStreamSynchronize),
    E("cuMemGetAllocationGranularity", 10020, cuMemGetAllocationGranularity),
    E("cuMemCreate", 10020, cuMemCreate),
    E("cuMemRelease", 10020, cuMemRelease),
    E("cuMemAddressReserve", 10020, cuMemAddressReserve),
    E("cuMemAddressFree", 10020, cuMemAddressFree),
    E("cuMemMap", 10020, cuMemMap),
    E("cuMemUnmap", 10020, cuMemUnmap),
    E("cuMemSetAccess", 10020, cuMemSetAccess),
    E("cuMemRetainAllocationHandle", 11000, cuMemRetainAllocationHandle),
#undef E
#undef PTSZ
};

/* The rest of what NVIDIA's libcudart.so.13 looks up at start-up
 * (../shared/reference/cudart13-driver-lookups.txt), with the oldest version it asks for. They
 * resolve, as on a real driver, so the real runtime gets through its start-up, and every one of
 * them fails when called: its cudaMalloc then reports an error instead of crashing. */
static const struct {
    const char *name;
    int version;
} unsupported[] = {
    {"cuDeviceGetP2PAttribute", 8000},
    {"cuDeviceGetHostAtomicCapabilities", 13000},
    {"cuDeviceGetP2PAtomicCapabilities", 13000},
    {"cuDeviceGetByPCIBusId", 4010},
    {"cuDeviceGetPCIBusId", 4010},
    {"cuDeviceGetTexture1DLinearMaxWidth", 11010},
    {"cuDeviceSetMemPool", 11020},
    {"cuFlushGPUDirectRDMAWrites", 11030},
    {"cuDevicePrimaryCtxSetFlags", 11000},
    {"cuDevicePrimaryCtxGetState", 7000},
    {"cuDevicePrimaryCtxReset", 7000},
    {"cuCtxCreate", 3020},
    {"cuCtxGetFlags", 7000},
    {"cuCtxDetach", 2000},
    {"cuCtxGetApiVersion", 3020},
    {"cuCtxGetLimit", 3010},
    {"cuCtxSetLimit", 3010},
    {"cuCtxGetCacheConfig", 3020},
    {"cuCtxSetCacheConfig", 3020},
    {"cuCtxGetSharedMemConfig", 4020},
    {"cuCtxGetStreamPriorityRange", 5050},
    {"cuCtxSetSharedMemConfig", 4020},
    {"cuCtxResetPersistingL2Cache", 11000},
    {"cuCtxPopCurrent", 4000},
    {"cuCtxPushCurrent", 4000},
    {"cuModuleLoad", 2000},
    {"cuModuleLoadData", 2000},
    {"cuModuleLoadFatBinary", 2000},
    {"cuModuleUnload", 2000},
    {"cuModuleGetFunction", 2000},
    {"cuModuleGetGlobal", 3020},
    {"cuModuleGetTexRef", 2000},
    {"cuModuleGetSurfRef", 3000},
    {"cuModuleGetLoadingMode", 11070},
    {"cuLibraryLoadData", 12000},
    {"cuLibraryLoadFromFile", 12000},
    {"cuLibraryUnload", 12000},
    {"cuLibraryGetKernel", 12000},
    {"cuLibraryGetModule", 12000},
    {"cuKernelGetFunction", 12000},
    {"cuLibraryGetGlobal", 12000},
    {"cuLibraryGetManaged", 12000},
    {"cuLibraryGetUnifiedFunction", 12000},
    {"cuLibraryGetKernelCount", 12040},
    {"cuLibraryEnumerateKernels", 12040},
    {"cuKernelGetAttribute", 12000},
    {"cuKernelSetAttribute", 12000},
    {"cuKernelSetCacheConfig", 12000},
    {"cuKernelGetName", 12030},
    {"cuKernelGetParamInfo", 12040},
    {"cuLinkCreate", 5050},
    {"cuLinkAddData", 5050},
    {"cuLinkAddFile", 5050},
    {"cuLinkComplete", 5050},
    {"cuLinkDestroy", 5050},
    {"cuMemHostGetDevicePointer", 3020},
    {"cuMemHostGetFlags", 2030},
    {"cuMemHostRegister", 6050},
    {"cuMemHostUnregister", 4000},
    {"cuPointerGetAttributes", 7000},
    {"cuMemPoolSetAccess", 11020},
    {"cuMemPoolGetAccess", 11020},
    {"cuMemPoolExportToShareableHandle", 11020},
    {"cuMemPoolImportFromShareableHandle", 11020},
    {"cuMemPoolExportPointer", 11020},
    {"cuMemPoolImportPointer", 11020},
    {"cuMemGetDefaultMemPool", 13000},
    {"cuMemGetMemPool", 13000},
    {"cuMemSetMemPool", 13000},
    {"cuMemcpy", 4000},
    {"cuMemcpyAsync", 4000},
    {"cuMemcpyPeer", 4000},
    {"cuMemcpyPeerAsync", 4000},
    {"cuMemcpyHtoD", 3020},
    {"cuMemcpyHtoDAsync", 3020},
    {"cuMemcpyDtoH", 3020},
    {"cuMemcpyDtoHAsync", 3020},
    {"cuMemcpyDtoD", 3020},
    {"cuMemcpyDtoDAsync", 3020},
    {"cuMemcpy2DUnaligned", 3020},
    {"cuMemcpy2DAsync", 3020},
    {"cuMemcpy3D", 3020},
    {"cuMemcpy3DAsync", 3020},
    {"cuMemcpy3DPeer", 4000},
    {"cuMemcpy3DPeerAsync", 4000},
    {"cuMemcpyBatchAsync", 12080},
    {"cuMemcpy3DBatchAsync", 12080},
    {"cuMemsetD8", 3020},
    {"cuMemsetD8Async", 3020},
    {"cuMemsetD2D8", 3020},
    {"cuMemsetD2D8Async", 3020},
    {"cuFuncSetCacheConfig", 3000},
    {"cuFuncSetSharedMemConfig", 4020},
    {"cuFuncGetAttribute", 2020},
    {"cuFuncSetAttribute", 9000},
    {"cuFuncGetName", 12030},
    {"cuFuncGetParamInfo", 12040},
    {"cuArrayCreate", 3020},
    {"cuArrayGetDescriptor", 3020},
    {"cuArrayGetSparseProperties", 11010},
    {"cuArrayGetPlane", 11020},
    {"cuArray3DCreate", 3020},
    {"cuArray3DGetDescriptor", 3020},
    {"cuArrayDestroy", 2000},
    {"cuMipmappedArrayCreate", 5000},
    {"cuMipmappedArrayGetLevel", 5000},
    {"cuMipmappedArrayGetSparseProperties", 11010},
    {"cuMipmappedArrayDestroy", 5000},
    {"cuArrayGetMemoryRequirements", 11060},
    {"cuMipmappedArrayGetMemoryRequirements", 11060},
    {"cuTexObjectCreate", 5000},
    {"cuTexObjectDestroy", 5000},
    {"cuTexObjectGetResourceDesc", 5000},
    {"cuTexObjectGetTextureDesc", 5000},
    {"cuTexObjectGetResourceViewDesc", 5000},
    {"cuSurfObjectCreate", 5000},
    {"cuSurfObjectDestroy", 5000},
    {"cuSurfObjectGetResourceDesc", 5000},
    {"cuImportExternalMemory", 10000},
    {"cuExternalMemoryGetMappedBuffer", 10000},
    {"cuExternalMemoryGetMappedMipmappedArray", 10000},
    {"cuDestroyExternalMemory", 10000},
    {"cuImportExternalSemaphore", 10000},
    {"cuSignalExternalSemaphoresAsync", 10000},
    {"cuWaitExternalSemaphoresAsync", 10000},
    {"cuDestroyExternalSemaphore", 10000},
    {"cuDeviceGetNvSciSyncAttributes", 10020},
    {"cuLaunchKernel", 4000},
    {"cuLaunchCooperativeKernel", 9000},
    {"cuLaunchHostFunc", 10000},
    {"cuLaunchKernelEx", 11060},
    {"cuEventCreate", 2000},
    {"cuEventRecord", 2000},
    {"cuEventRecordWithFlags", 11010},
    {"cuEventQuery", 2000},
    {"cuEventSynchronize", 2000},
    {"cuEventDestroy", 4000},
    {"cuEventElapsedTime", 2000},
    {"cuStreamWaitValue32", 8000},
    {"cuStreamWriteValue32", 8000},
    {"cuStreamWaitValue64", 9000},
    {"cuStreamWriteValue64", 9000},
    {"cuStreamBatchMemOp", 8000},
    {"cuStreamCreateWithPriority", 5050},
    {"cuStreamGetPriority", 5050},
    {"cuStreamGetFlags", 5050},
    {"cuStreamGetCtx", 9020},
    {"cuStreamGetId", 12000},
    {"cuStreamWaitEvent", 3020},
    {"cuStreamAddCallback", 5000},
    {"cuStreamQuery", 2000},
    {"cuStreamAttachMemAsync", 6000},
    {"cuStreamCopyAttributes", 11000},
    {"cuStreamGetAttribute", 11000},
    {"cuStreamSetAttribute", 11000},
    {"cuDeviceCanAccessPeer", 4000},
    {"cuCtxEnablePeerAccess", 4000},
    {"cuCtxDisablePeerAccess", 4000},
    {"cuIpcGetEventHandle", 4010},
    {"cuIpcOpenEventHandle", 4010},
    {"cuIpcGetMemHandle", 4010},
    {"cuIpcOpenMemHandle", 4010},
    {"cuIpcCloseMemHandle", 4010},
    {"cuGLCtxCreate", 3020},
    {"cuGLInit", 2000},
    {"cuGLGetDevices", 4010},
    {"cuGLRegisterBufferObject", 2000},
    {"cuGLMapBufferObject", 3020},
    {"cuGLMapBufferObjectAsync", 3020},
    {"cuGLUnmapBufferObject", 2000},
    {"cuGLUnmapBufferObjectAsync", 2030},
    {"cuGLUnregisterBufferObject", 2000},
    {"cuGLSetBufferObjectMapFlags", 2030},
    {"cuGraphicsGLRegisterImage", 3000},
    {"cuGraphicsGLRegisterBuffer", 3000},
    {"cuGraphicsEGLRegisterImage", 7000},
    {"cuEGLStreamConsumerConnect", 7000},
    {"cuEGLStreamConsumerDisconnect", 7000},
    {"cuEGLStreamConsumerAcquireFrame", 7000},
    {"cuEGLStreamConsumerReleaseFrame", 7000},
    {"cuEGLStreamProducerConnect", 7000},
    {"cuEGLStreamProducerDisconnect", 7000},
    {"cuEGLStreamProducerPresentFrame", 7000},
    {"cuEGLStreamProducerReturnFrame", 7000},
    {"cuGraphicsResourceGetMappedEglFrame", 7000},
    {"cuEGLStreamConsumerConnectWithFlags", 8000},
    {"cuGraphicsUnregisterResource", 3000},
    {"cuGraphicsMapResources", 3000},
    {"cuGraphicsUnmapResources", 3000},
    {"cuGraphicsResourceSetMapFlags", 6050},
    {"cuGraphicsSubResourceGetMappedArray", 3000},
    {"cuGraphicsResourceGetMappedMipmappedArray", 5000},
    {"cuGraphicsResourceGetMappedPointer", 3020},
    {"cuProfilerInitialize", 4000},
    {"cuProfilerStart", 4000},
    {"cuProfilerStop", 4000},
    {"cuVDPAUGetDevice", 3010},
    {"cuVDPAUCtxCreate", 3020},
    {"cuGraphicsVDPAURegisterVideoSurface", 3010},
    {"cuGraphicsVDPAURegisterOutputSurface", 3010},
    {"cuGetExportTable", 3000},
    {"cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", 7000},
    {"cuOccupancyAvailableDynamicSMemPerBlock", 10020},
    {"cuOccupancyMaxPotentialClusterSize", 11070},
    {"cuOccupancyMaxActiveClusters", 11070},
    {"cuMemAdvise", 8000},
    {"cuMemPrefetchAsync", 8000},
    {"cuMemPrefetchBatchAsync", 13000},
    {"cuMemDiscardBatchAsync", 13000},
    {"cuMemDiscardAndPrefetchBatchAsync", 13000},
    {"cuMemRangeGetAttribute", 8000},
    {"cuMemRangeGetAttributes", 8000},
    {"cuGraphCreate", 10000},
    {"cuGraphAddKernelNode", 12000},
    {"cuGraphKernelNodeGetParams", 12000},
    {"cuGraphKernelNodeSetParams", 12000},
    {"cuGraphAddMemcpyNode", 10000},
    {"cuGraphMemcpyNodeGetParams", 10000},
    {"cuGraphMemcpyNodeSetParams", 10000},
    {"cuGraphAddMemsetNode", 10000},
    {"cuGraphMemsetNodeGetParams", 10000},
    {"cuGraphMemsetNodeSetParams", 10000},
    {"cuGraphAddHostNode", 10000},
    {"cuGraphHostNodeGetParams", 10000},
    {"cuGraphHostNodeSetParams", 10000},
    {"cuGraphAddChildGraphNode", 10000},
    {"cuGraphChildGraphNodeGetGraph", 10000},
    {"cuGraphAddEmptyNode", 10000},
    {"cuGraphAddEventRecordNode", 11010},
    {"cuGraphEventRecordNodeGetEvent", 11010},
    {"cuGraphEventRecordNodeSetEvent", 11010},
    {"cuGraphAddEventWaitNode", 11010},
    {"cuGraphEventWaitNodeGetEvent", 11010},
    {"cuGraphEventWaitNodeSetEvent", 11010},
    {"cuGraphAddExternalSemaphoresSignalNode", 11020},
    {"cuGraphExternalSemaphoresSignalNodeGetParams", 11020},
    {"cuGraphExternalSemaphoresSignalNodeSetParams", 11020},
    {"cuGraphAddExternalSemaphoresWaitNode", 11020},
    {"cuGraphExternalSemaphoresWaitNodeGetParams", 11020},
    {"cuGraphExternalSemaphoresWaitNodeSetParams", 11020},
    {"cuGraphExecExternalSemaphoresSignalNodeSetParams", 11020},
    {"cuGraphExecExternalSemaphoresWaitNodeSetParams", 11020},
    {"cuGraphAddMemAllocNode", 11040},
    {"cuGraphMemAllocNodeGetParams", 11040},
    {"cuGraphAddMemFreeNode", 11040},
    {"cuGraphMemFreeNodeGetParams", 11040},
    {"cuDeviceGraphMemTrim", 11040},
    {"cuDeviceGetGraphMemAttribute", 11040},
    {"cuDeviceSetGraphMemAttribute", 11040},
    {"cuGraphClone", 10000},
    {"cuGraphNodeFindInClone", 10000},
    {"cuGraphNodeGetType", 10000},
    {"cuGraphGetNodes", 10000},
    {"cuGraphGetRootNodes", 10000},
    {"cuGraphGetEdges", 10000},
    {"cuGraphNodeGetDependencies", 10000},
    {"cuGraphNodeGetDependentNodes", 10000},
    {"cuGraphAddDependencies", 10000},
    {"cuGraphRemoveDependencies", 10000},
    {"cuGraphDestroyNode", 10000},
    {"cuGraphInstantiate", 10000},
    {"cuGraphInstantiateWithFlags", 11040},
    {"cuGraphUpload", 11010},
    {"cuGraphLaunch", 10000},
    {"cuGraphExecDestroy", 10000},
    {"cuGraphDestroy", 10000},
    {"cuStreamBeginCapture", 10000},
    {"cuStreamBeginCaptureToGraph", 12030},
    {"cuStreamEndCapture", 10000},
    {"cuStreamIsCapturing", 10000},
    {"cuStreamGetCaptureInfo", 10010},
    {"cuStreamUpdateCaptureDependencies", 11030},
    {"cuGraphExecKernelNodeSetParams", 12000},
    {"cuGraphExecMemcpyNodeSetParams", 10020},
    {"cuGraphExecMemsetNodeSetParams", 10020},
    {"cuGraphExecHostNodeSetParams", 10020},
    {"cuGraphExecChildGraphNodeSetParams", 11010},
    {"cuGraphExecEventRecordNodeSetEvent", 11010},
    {"cuGraphExecEventWaitNodeSetEvent", 11010},
    {"cuThreadExchangeStreamCaptureMode", 10010},
    {"cuGraphExecUpdate", 12000},
    {"cuGraphKernelNodeCopyAttributes", 11000},
    {"cuGraphKernelNodeGetAttribute", 11000},
    {"cuGraphKernelNodeSetAttribute", 11000},
    {"cuGraphDebugDotPrint", 11030},
    {"cuUserObjectCreate", 11030},
    {"cuUserObjectRetain", 11030},
    {"cuUserObjectRelease", 11030},
    {"cuGraphRetainUserObject", 11030},
    {"cuGraphReleaseUserObject", 11030},
    {"cuGraphNodeSetEnabled", 11060},
    {"cuGraphNodeGetEnabled", 11060},
    {"cuGraphInstantiateWithParams", 12000},
    {"cuGraphExecGetFlags", 12000},
    {"cuGraphAddNode", 12020},
    {"cuGraphNodeSetParams", 12020},
    {"cuGraphExecNodeSetParams", 12020},
    {"cuGraphConditionalHandleCreate", 12030},
    {"cuDeviceRegisterAsyncNotification", 12040},
    {"cuDeviceUnregisterAsyncNotification", 12040},
    {"cuLogsRegisterCallback", 12090},
    {"cuLogsUnregisterCallback", 12090},
    {"cuLogsCurrent", 12090},
    {"cuLogsDumpToFile", 12090},
    {"cuLogsDumpToMemory", 12090},
};

static CUresult not_supported(void)
{
    return CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult resolve(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                        CUdriverProcAddressQueryResult *symbolStatus)
{
    standin_log("[gpa] %s ver=%d flags=%llu", symbol ? symbol : "(null)", cudaVersion,
                (unsigned long long)flags);
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    /* As documented: asking for a version newer than the driver is an error, not a miss. */
    if (cudaVersion > DRIVER_VERSION ||
        (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                               CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)))
        return CUDA_ERROR_INVALID_VALUE;
    bool per_thread = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    bool known = false;
    const struct entry *best = NULL;
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        const struct entry *e = &entries[i];
        if (strcmp(e->name, symbol))
            continue;
        known = true;
        if (e->version > cudaVersion || (e->ptsz && !per_thread))
            continue;
        if (!best || e->version > best->version || (e->version == best->version && e->ptsz))
            best = e;
    }
    entry_fn fn = best ? best->fn : NULL;
    for (size_t i = 0; !known && i < sizeof unsupported / sizeof unsupported[0]; i++) {
        if (strcmp(unsupported[i].name, symbol))
            continue;
        known = true;
        if (unsupported[i].version <= cudaVersion)
            fn = (entry_fn)not_supported;
    }
    *pfn = (void *)fn;
    if (symbolStatus)
        *symbolStatus = fn      ? CU_GET_PROC_ADDRESS_SUCCESS
                        : known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return fn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus)
{
    return resolve(symbol, pfn, cudaVersion, flags, symbolStatus);
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return resolve(symbol, pfn, cudaVersion, flags, NULL);
}
