/* The driver's side of CUPTI's callback API and of injection (trace.c). NVIDIA's driver reports
 * each API call to CUPTI at its entry and its exit, with the call's parameters (the structs of
 * generated_cuda_meta.h) and, at the exit, a pointer to its return value; the stand-in libcupti
 * registers itself here to receive them. */
#ifndef STANDIN_TRACE_H
#define STANDIN_TRACE_H

#include <cuda.h>
#include <stdint.h>

/* What the stand-in libcupti registers: `domain` is CUpti_CallbackDomain's (1 the driver, 2 the
 * runtime), site 0 the entry and 1 the exit (CUpti_ApiCallbackSite), `result` the call's return
 * value (CUresult or cudaError_t), NULL at the entry. */
typedef void (*standin_api_hook)(int domain, int site, uint32_t cbid, const char *name,
                                 const void *params, void *result);

/* The stand-in's private export table (cuGetExportTable with STANDIN_TOOLS_TABLE_ID): how the
 * runtime stand-in reports its calls, as NVIDIA's runtime reaches CUPTI through the driver. */
#define STANDIN_TOOLS_TABLE_ID                                                                     \
    {                                                                                              \
        {                                                                                          \
            'v', 't', '-', 's', 't', 'a', 'n', 'd', 'i', 'n', '-', 't', 'o', 'o', 'l', 's'         \
        }                                                                                          \
    }
struct standin_tools_table {
    size_t size;
    /* site 0 (entry, result NULL) or 1 (exit) of a runtime call */
    void (*runtime_api)(int site, uint32_t cbid, const char *name, const void *params,
                        void *result);
};

__attribute__((visibility("hidden"))) void trace_enter(uint32_t cbid, const char *name,
                                                       const void *params);
__attribute__((visibility("hidden"))) CUresult trace_exit(uint32_t cbid, const char *name,
                                                          const void *params, CUresult result);
/* Loads CUDA_INJECTION64_PATH and calls its InitializeInjection, once per process. */
__attribute__((visibility("hidden"))) void trace_inject(void);

/* The work of the entry points trace.c reports (memory.c, vmm.c). */
__attribute__((visibility("hidden"))) CUresult untraced_cuMemAlloc_v2(CUdeviceptr *dptr,
                                                                      size_t bytesize);
__attribute__((visibility("hidden"))) CUresult
untraced_cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes);
__attribute__((visibility("hidden"))) CUresult
untraced_cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags);
__attribute__((visibility("hidden"))) CUresult untraced_cuMemFree_v2(CUdeviceptr dptr);
__attribute__((visibility("hidden"))) CUresult
untraced_cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
__attribute__((visibility("hidden"))) CUresult
untraced_cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
__attribute__((visibility("hidden"))) CUresult untraced_cuMemAllocFromPoolAsync(CUdeviceptr *dptr,
                                                                                size_t bytesize,
                                                                                CUmemoryPool pool,
                                                                                CUstream hStream);
__attribute__((visibility("hidden"))) CUresult
untraced_cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream);
__attribute__((visibility("hidden"))) CUresult untraced_cuMemFreeAsync(CUdeviceptr dptr,
                                                                       CUstream hStream);
__attribute__((visibility("hidden"))) CUresult untraced_cuMemFreeAsync_ptsz(CUdeviceptr dptr,
                                                                            CUstream hStream);
__attribute__((visibility("hidden"))) CUresult untraced_cuMemPoolDestroy(CUmemoryPool pool);
__attribute__((visibility("hidden"))) CUresult untraced_cuMemHostAlloc(void **pp, size_t bytesize,
                                                                       unsigned int Flags);
__attribute__((visibility("hidden"))) CUresult untraced_cuMemAllocHost_v2(void **pp,
                                                                          size_t bytesize);
__attribute__((visibility("hidden"))) CUresult untraced_cuMemFreeHost(void *p);
__attribute__((visibility("hidden"))) CUresult
untraced_cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags);
__attribute__((visibility("hidden"))) CUresult
untraced_cuMemRelease(CUmemGenericAllocationHandle handle);
__attribute__((visibility("hidden"))) CUresult
untraced_cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr);
__attribute__((visibility("hidden"))) CUresult
untraced_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags);
__attribute__((visibility("hidden"))) CUresult untraced_cuMemUnmap(CUdeviceptr ptr, size_t size);

#endif
