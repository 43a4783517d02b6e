/* libcuda.so.1 stand-in: what the driver does for tools. At cuInit it loads the library named by
 * CUDA_INJECTION64_PATH and calls its InitializeInjection (once per process, as NVIDIA's driver
 * does); the API calls CUPTI subscribes to are reported at their entry and exit to the hook the
 * stand-in libcupti registers through standin_trace_register, the driver's own and, through the
 * export table cuGetExportTable hands the runtime, the runtime's. */
#include "driver.h"
#include "log.h"

#include <cupti_driver_cbid.h>
#include <generated_cuda_meta.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Atomic(standin_api_hook) hook;

/* Private to the stand-ins (NVIDIA's CUPTI reaches the driver through an export table). */
__attribute__((visibility("default"))) void standin_trace_register(standin_api_hook fn)
{
    atomic_store(&hook, fn);
}

enum { DOMAIN_DRIVER = 1, DOMAIN_RUNTIME = 2 };

static void report(int domain, int site, uint32_t cbid, const char *name, const void *params,
                   void *result)
{
    standin_api_hook fn = atomic_load(&hook);
    if (fn)
        fn(domain, site, cbid, name, params, result);
}

void trace_enter(uint32_t cbid, const char *name, const void *params)
{
    report(DOMAIN_DRIVER, 0, cbid, name, params, NULL);
}

CUresult trace_exit(uint32_t cbid, const char *name, const void *params, CUresult result)
{
    report(DOMAIN_DRIVER, 1, cbid, name, params, &result);
    return result;
}

static void runtime_api(int site, uint32_t cbid, const char *name, const void *params, void *result)
{
    report(DOMAIN_RUNTIME, site, cbid, name, params, result);
}

/* NVIDIA's runtime asks for private tables by UUID; the stand-in knows only its own. */
CUresult cuGetExportTable(const void **table, const CUuuid *id)
{
    static const struct standin_tools_table tools = {sizeof tools, runtime_api};
    static const CUuuid tools_id = STANDIN_TOOLS_TABLE_ID;
    if (!table || !id || memcmp(id, &tools_id, sizeof tools_id))
        return CUDA_ERROR_NOT_SUPPORTED;
    *table = &tools;
    return CUDA_SUCCESS;
}

static void inject(void)
{
    const char *path = getenv("CUDA_INJECTION64_PATH");
    if (!path || !*path)
        return;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    standin_log("[inject] %s -> %p", path, h);
    if (!h) {
        fprintf(stderr, "stand-in: CUDA_INJECTION64_PATH: %s\n", dlerror());
        return;
    }
    int (*init)(void) = (int (*)(void))dlsym(h, "InitializeInjection");
    if (init)
        standin_log("[inject] InitializeInjection -> %d", init());
}

void trace_inject(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, inject);
}

/* ---- the entry points CUPTI reports: the work is done by untraced_<name> ---- */

#define UNPAREN(...) __VA_ARGS__
/* `decl` the parameters, `args` their names, in the order of name##_params' members. */
#define TRACED(name, decl, args)                                                                   \
    CUresult name decl                                                                             \
    {                                                                                              \
        name##_params params = {UNPAREN args};                                                     \
        trace_enter(CUPTI_DRIVER_TRACE_CBID_##name, #name, &params);                               \
        return trace_exit(CUPTI_DRIVER_TRACE_CBID_##name, #name, &params, untraced_##name args);   \
    }

TRACED(cuMemAlloc_v2, (CUdeviceptr * dptr, size_t bytesize), (dptr, bytesize))
TRACED(cuMemAllocPitch_v2,
       (CUdeviceptr * dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
        unsigned int ElementSizeBytes),
       (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes))
TRACED(cuMemAllocManaged, (CUdeviceptr * dptr, size_t bytesize, unsigned int flags),
       (dptr, bytesize, flags))
TRACED(cuMemFree_v2, (CUdeviceptr dptr), (dptr))
TRACED(cuMemAllocAsync, (CUdeviceptr * dptr, size_t bytesize, CUstream hStream),
       (dptr, bytesize, hStream))
TRACED(cuMemAllocAsync_ptsz, (CUdeviceptr * dptr, size_t bytesize, CUstream hStream),
       (dptr, bytesize, hStream))
TRACED(cuMemAllocFromPoolAsync,
       (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),
       (dptr, bytesize, pool, hStream))
TRACED(cuMemAllocFromPoolAsync_ptsz,
       (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),
       (dptr, bytesize, pool, hStream))
TRACED(cuMemFreeAsync, (CUdeviceptr dptr, CUstream hStream), (dptr, hStream))
TRACED(cuMemFreeAsync_ptsz, (CUdeviceptr dptr, CUstream hStream), (dptr, hStream))
TRACED(cuMemPoolDestroy, (CUmemoryPool pool), (pool))
TRACED(cuMemHostAlloc, (void **pp, size_t bytesize, unsigned int Flags), (pp, bytesize, Flags))
TRACED(cuMemAllocHost_v2, (void **pp, size_t bytesize), (pp, bytesize))
TRACED(cuMemFreeHost, (void *p), (p))
TRACED(cuMemCreate,
       (CUmemGenericAllocationHandle * handle, size_t size, const CUmemAllocationProp *prop,
        unsigned long long flags),
       (handle, size, prop, flags))
TRACED(cuMemRelease, (CUmemGenericAllocationHandle handle), (handle))
TRACED(cuMemRetainAllocationHandle, (CUmemGenericAllocationHandle * handle, void *addr),
       (handle, addr))
TRACED(cuMemMap,
       (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
        unsigned long long flags),
       (ptr, size, offset, handle, flags))
TRACED(cuMemUnmap, (CUdeviceptr ptr, size_t size), (ptr, size))
