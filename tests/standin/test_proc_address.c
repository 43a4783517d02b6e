/* cuGetProcAddress in both forms, and the runtime's cudaGetDriverEntryPoint*: the newest variant
 * at or below the requested version, _ptsz for flags 2, NVIDIA's answers to bad lookups, and
 * every pointer the driver's own function. */
#include "check.h"

#define CUDA_ENABLE_DEPRECATED /* cudaGetDriverEntryPoint is deprecated, and still used */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#undef cuGetProcAddress
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr,
                                         unsigned long long flags,
                                         enum cudaDriverEntryPointQueryResult *status);

static void *driver;

static const struct {
    const char *symbol;
    int version;
    cuuint64_t flags;
    const char *variant; /* NULL: none at that version */
} cases[] = {
    {"cuMemAlloc", 3020, 0, "cuMemAlloc_v2"},
    {"cuMemAlloc", 13000, 2, "cuMemAlloc_v2"}, /* no _ptsz variant: the plain one */
    {"cuMemAlloc", 3010, 0, NULL},
    {"cuMemGetInfo", 3020, 0, "cuMemGetInfo_v2"},
    {"cuDeviceTotalMem", 3020, 0, "cuDeviceTotalMem_v2"},
    {"cuMemAllocHost", 3020, 0, "cuMemAllocHost_v2"},
    {"cuMemAllocPitch", 12000, 1, "cuMemAllocPitch_v2"},
    {"cuStreamDestroy", 4000, 0, "cuStreamDestroy_v2"},
    {"cuDeviceGetUuid", 9020, 0, "cuDeviceGetUuid"},
    {"cuDeviceGetUuid", 11040, 0, "cuDeviceGetUuid_v2"},
    {"cuDevicePrimaryCtxRelease", 7000, 0, "cuDevicePrimaryCtxRelease"},
    {"cuDevicePrimaryCtxRelease", 11000, 0, "cuDevicePrimaryCtxRelease_v2"},
    {"cuGetProcAddress", 11020, 0, NULL},
    {"cuGetProcAddress", 11030, 0, "cuGetProcAddress"},
    {"cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2"},
    {"cuCtxGetDevice", 12080, 0, "cuCtxGetDevice"},
    {"cuCtxGetDevice", 13000, 0, "cuCtxGetDevice_v2"},
    {"cuCtxSynchronize", 13000, 0, "cuCtxSynchronize_v2"},
    {"cuMemAllocAsync", 11020, 0, "cuMemAllocAsync"},
    {"cuMemAllocAsync", 11020, 1, "cuMemAllocAsync"},
    {"cuMemAllocAsync", 11020, 2, "cuMemAllocAsync_ptsz"},
    {"cuMemAllocAsync", 11010, 2, NULL},
    {"cuMemAllocFromPoolAsync", 12000, 2, "cuMemAllocFromPoolAsync_ptsz"},
    {"cuMemFreeAsync", 13000, 2, "cuMemFreeAsync_ptsz"},
    {"cuStreamGetDevice", 12080, 2, "cuStreamGetDevice_ptsz"},
    {"cuStreamSynchronize", 2000, 2, "cuStreamSynchronize"}, /* _ptsz only from 7000 */
    {"cuStreamSynchronize", 7000, 2, "cuStreamSynchronize_ptsz"},
    {"cuEventSynchronize", 2000, 0, "cuEventSynchronize"},
    {"cuEventRecord", 7000, 2, "cuEventRecord_ptsz"},
    {"cuMemCreate", 10020, 0, "cuMemCreate"},
    {"cuMemRetainAllocationHandle", 11000, 0, "cuMemRetainAllocationHandle"},
};

int main(void)
{
    CHECK_EQ_INT(cuInit(0), CUDA_SUCCESS);
    driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    CHECK(driver != NULL);

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        void *fn = &fn, *fn4 = &fn;
        CUdriverProcAddressQueryResult status = -1;
        CUresult r =
            cuGetProcAddress_v2(cases[i].symbol, &fn, cases[i].version, cases[i].flags, &status);
        CUresult r4 = cuGetProcAddress(cases[i].symbol, &fn4, cases[i].version, cases[i].flags);
        void *want = cases[i].variant ? dlsym(driver, cases[i].variant) : NULL;
        if (cases[i].variant && !want)
            fprintf(stderr, "%s: not exported\n", cases[i].variant);
        if (fn != want || fn4 != want)
            fprintf(stderr, "case %zu: %s ver=%d flags=%d\n", i, cases[i].symbol, cases[i].version,
                    (int)cases[i].flags);
        CHECK(fn == want);
        CHECK(fn4 == want);
        CHECK_EQ_INT(r, want ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND);
        CHECK_EQ_INT(r4, r);
        CHECK_EQ_INT(status, want ? CU_GET_PROC_ADDRESS_SUCCESS
                                  : CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    }

    /* The runtime's first probe, unknown names, and bad arguments. */
    void *fn = &fn;
    CUdriverProcAddressQueryResult status = -1;
    CHECK_EQ_INT(cuGetProcAddress_v2("", &fn, 0, 0, &status), CUDA_ERROR_NOT_FOUND);
    CHECK(fn == NULL);
    CHECK_EQ_INT(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    fn = &fn;
    CHECK_EQ_INT(cuGetProcAddress_v2("cuNoSuchThing", &fn, 13000, 0, &status),
                 CUDA_ERROR_NOT_FOUND);
    CHECK(fn == NULL);
    CHECK_EQ_INT(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    CHECK_EQ_INT(cuGetProcAddress_v2("cuMemAlloc", &fn, 13000, 0, NULL), CUDA_SUCCESS);
    CHECK_EQ_INT(cuGetProcAddress_v2(NULL, &fn, 13000, 0, &status), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ_INT(cuGetProcAddress_v2("cuMemAlloc", NULL, 13000, 0, &status),
                 CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ_INT(cuGetProcAddress_v2("cuMemAlloc", &fn, 13010, 0, &status),
                 CUDA_ERROR_INVALID_VALUE); /* newer than the driver */
    CHECK_EQ_INT(cuGetProcAddress_v2("cuMemAlloc", &fn, 13000, 4, &status),
                 CUDA_ERROR_INVALID_VALUE);

    /* The rest of what NVIDIA's runtime looks up resolves to a function that fails. */
    CHECK_EQ_INT(cuGetProcAddress_v2("cuGetExportTable", &fn, 3000, 0, &status), CUDA_SUCCESS);
    CHECK_EQ_INT(((CUresult(*)(const void **, const CUuuid *))fn)(NULL, NULL),
                 CUDA_ERROR_NOT_SUPPORTED);
    CHECK_EQ_INT(cuGetProcAddress_v2("cuGetExportTable", &fn, 2000, 0, &status),
                 CUDA_ERROR_NOT_FOUND);
    CHECK_EQ_INT(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    CHECK_EQ_INT(cuGetProcAddress_v2("cuLaunchKernel", &fn, 7000, 2, &status), CUDA_SUCCESS);

    /* The runtime: cudaVersion 13000, cudaEnable* flags, misses reported as success + NULL. */
    enum cudaDriverEntryPointQueryResult qr = -1;
    CHECK_EQ_INT(cudaGetDriverEntryPoint("cuMemAlloc", &fn, cudaEnableDefault, &qr), cudaSuccess);
    CHECK(fn == dlsym(driver, "cuMemAlloc_v2"));
    CHECK_EQ_INT(qr, cudaDriverEntryPointSuccess);
    CHECK_EQ_INT(cudaGetDriverEntryPoint("cuCtxGetDevice", &fn, cudaEnableDefault, NULL),
                 cudaSuccess);
    CHECK(fn == dlsym(driver, "cuCtxGetDevice_v2"));
    CHECK_EQ_INT(cudaGetDriverEntryPoint("cuMemAllocAsync", &fn, cudaEnableDefault, NULL),
                 cudaSuccess);
    CHECK(fn == dlsym(driver, "cuMemAllocAsync"));
    CHECK_EQ_INT(cudaGetDriverEntryPoint_ptsz("cuMemAllocAsync", &fn, cudaEnableDefault, NULL),
                 cudaSuccess);
    CHECK(fn == dlsym(driver, "cuMemAllocAsync_ptsz"));
    CHECK_EQ_INT(cudaGetDriverEntryPoint_ptsz("cuMemAllocAsync", &fn, cudaEnableLegacyStream, NULL),
                 cudaSuccess);
    CHECK(fn == dlsym(driver, "cuMemAllocAsync"));
    CHECK_EQ_INT(cudaGetDriverEntryPointByVersion("cuMemFreeAsync", &fn, 12000,
                                                  cudaEnablePerThreadDefaultStream, &qr),
                 cudaSuccess);
    CHECK(fn == dlsym(driver, "cuMemFreeAsync_ptsz"));
    CHECK_EQ_INT(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 2000, 0, &qr), cudaSuccess);
    CHECK(fn == NULL);
    CHECK_EQ_INT(qr, cudaDriverEntryPointVersionNotSufficent);
    CHECK_EQ_INT(cudaGetDriverEntryPoint("cuNoSuchThing", &fn, cudaEnableDefault, &qr),
                 cudaSuccess);
    CHECK(fn == NULL);
    CHECK_EQ_INT(qr, cudaDriverEntryPointSymbolNotFound);
    CHECK_EQ_INT(cudaGetDriverEntryPoint(NULL, &fn, cudaEnableDefault, &qr), cudaErrorInvalidValue);
    CHECK_EQ_INT(cudaGetDriverEntryPoint("cuMemAlloc", &fn, 3, &qr), cudaErrorInvalidValue);
    return CHECK_DONE();
}
