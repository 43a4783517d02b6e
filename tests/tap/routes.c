/* Every route to the allocation functions, over the stand-in: runtime by name (with _ptsz
 * forms), driver by name, dlsym on a libcuda handle, cuGetProcAddress in both forms (and a
 * lookup of cuGetProcAddress itself), cudaGetDriverEntryPoint[ByVersion]. Also devices for each
 * kind of allocation, pinned host memory, VMM, an unknown free and an out-of-memory failure.
 * The program keeps its own account and prints what vramtap must have recorded. */
#define CUDA_ENABLE_DEPRECATED
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "check.h"

#undef cuGetProcAddress
CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);
cudaError_t cudaMallocAsync_ptsz(void **p, size_t size, cudaStream_t s);

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*alloc_async_fn)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*gpa4_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*gpa5_fn)(const char *, void **, int, cuuint64_t,
                            CUdriverProcAddressQueryResult *);

static unsigned long long live[2], allocs[2];

static void kept(int dev, uintptr_t addr, size_t size, const char *api)
{
    printf("EXPECT at_peak %d 0x%lx %zu %s\n", dev, (unsigned long)addr, size, api);
    live[dev] += size;
    allocs[dev]++;
}

/* The address the preloaded library exports under `name`: what every route must hand out. */
static void *wrapper(const char *name)
{
    return dlsym(RTLD_DEFAULT, name);
}

int main(void)
{
    void *p;
    CUdeviceptr dp;
    size_t pitch;

    /* Transient allocations first, so that the kept ones end at the peak. */
    CHECK_EQ_INT(cudaMalloc(&p, 500), cudaSuccess);
    CHECK_EQ_INT(cudaFree(p), cudaSuccess);
    CHECK_EQ_INT(cuMemAlloc_v2(&dp, 600), CUDA_SUCCESS);
    CHECK_EQ_INT(cuMemFree_v2(dp), CUDA_SUCCESS);
    allocs[0] += 2;

    /* The runtime by name. */
    CHECK_EQ_INT(cudaMalloc(&p, 1000), cudaSuccess);
    kept(0, (uintptr_t)p, 1000, "cudaMalloc");
    CHECK_EQ_INT(cudaMallocAsync(&p, 2000, 0), cudaSuccess);
    kept(0, (uintptr_t)p, 2000, "cudaMallocAsync");
    CHECK_EQ_INT(cudaMallocAsync_ptsz(&p, 3000, 0), cudaSuccess);
    kept(0, (uintptr_t)p, 3000, "cudaMallocAsync");
    CHECK_EQ_INT(cudaMallocManaged(&p, 4000, cudaMemAttachGlobal), cudaSuccess);
    kept(0, (uintptr_t)p, 4000, "cudaMallocManaged");
    CHECK_EQ_INT(cudaMallocPitch(&p, &pitch, 100, 10), cudaSuccess);
    kept(0, (uintptr_t)p, pitch * 10, "cudaMallocPitch");
    struct cudaPitchedPtr pp;
    struct cudaExtent ext = {.width = 64, .height = 4, .depth = 3};
    CHECK_EQ_INT(cudaMalloc3D(&pp, ext), cudaSuccess);
    kept(0, (uintptr_t)pp.ptr, pp.pitch * 12, "cudaMalloc3D");

    /* The driver by name. */
    CHECK_EQ_INT(cuMemAlloc_v2(&dp, 5000), CUDA_SUCCESS);
    kept(0, dp, 5000, "cuMemAlloc_v2");
    CHECK_EQ_INT(cuMemAllocPitch_v2(&dp, &pitch, 200, 5, 4), CUDA_SUCCESS);
    kept(0, dp, pitch * 5, "cuMemAllocPitch_v2");

    /* dlsym on a libcuda handle. */
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    CHECK(h != NULL);
    alloc_fn by_dlsym = (alloc_fn)dlsym(h, "cuMemAlloc_v2");
    CHECK(by_dlsym == (alloc_fn)wrapper("cuMemAlloc_v2"));
    CHECK_EQ_INT(by_dlsym(&dp, 6000), CUDA_SUCCESS);
    kept(0, dp, 6000, "cuMemAlloc_v2");
    CHECK(dlsym(h, "cuDeviceGetCount") != NULL); /* not wrapped: passes through */

    /* cuGetProcAddress_v2, and the lookups of cuGetProcAddress itself. */
    void *fn = NULL;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CHECK_EQ_INT(cuGetProcAddress_v2("cuMemAlloc", &fn, 12000, 0, &st), CUDA_SUCCESS);
    CHECK_EQ_INT(st, CU_GET_PROC_ADDRESS_SUCCESS);
    CHECK(fn == wrapper("cuMemAlloc_v2"));
    CHECK_EQ_INT(((alloc_fn)fn)(&dp, 7000), CUDA_SUCCESS);
    kept(0, dp, 7000, "cuMemAlloc_v2");
    CHECK_EQ_INT(cuGetProcAddress_v2("cuGetProcAddress", &fn, 11030, 0, NULL), CUDA_SUCCESS);
    CHECK(fn == wrapper("cuGetProcAddress"));
    gpa4_fn gpa4 = (gpa4_fn)fn;
    CHECK_EQ_INT(cuGetProcAddress_v2("cuGetProcAddress", &fn, 12000, 0, NULL), CUDA_SUCCESS);
    CHECK(fn == wrapper("cuGetProcAddress_v2"));
    gpa5_fn gpa5 = (gpa5_fn)fn;

    /* The 4-argument form, flags 2: the _ptsz variant. */
    CHECK_EQ_INT(gpa4("cuMemAllocAsync", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
                 CUDA_SUCCESS);
    CHECK(fn == wrapper("cuMemAllocAsync_ptsz"));
    CHECK_EQ_INT(((alloc_async_fn)fn)(&dp, 8000, 0), CUDA_SUCCESS);
    kept(0, dp, 8000, "cuMemAllocAsync");
    CHECK_EQ_INT(gpa5("cuMemAllocAsync", &fn, 12000, 0, &st), CUDA_SUCCESS);
    CHECK(fn == wrapper("cuMemAllocAsync"));
    CHECK_EQ_INT(cuGetProcAddress("cuMemFreeAsync", &fn, 11020, 2), CUDA_SUCCESS);
    CHECK(fn == wrapper("cuMemFreeAsync_ptsz"));

    /* What the driver says about bad lookups reaches the caller unchanged. */
    fn = (void *)&st;
    CHECK_EQ_INT(cuGetProcAddress_v2("", &fn, 0, 0, &st), CUDA_ERROR_NOT_FOUND);
    CHECK(fn == NULL);
    CHECK_EQ_INT(cuGetProcAddress_v2("cuMemAlloc", NULL, 12000, 0, &st), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ_INT(cuGetProcAddress_v2("cuNoSuchFunction", &fn, 12000, 0, NULL),
                 CUDA_ERROR_NOT_FOUND);

    /* The runtime's entry points. */
    enum cudaDriverEntryPointQueryResult qr;
    CHECK_EQ_INT(cudaGetDriverEntryPoint("cuMemAlloc", &fn, cudaEnableDefault, &qr), cudaSuccess);
    CHECK(fn == wrapper("cuMemAlloc_v2"));
    CHECK_EQ_INT(((alloc_fn)fn)(&dp, 9000), CUDA_SUCCESS);
    kept(0, dp, 9000, "cuMemAlloc_v2");
    CHECK_EQ_INT(cudaGetDriverEntryPointByVersion("cuMemAllocFromPoolAsync", &fn, 12000,
                                                  cudaEnablePerThreadDefaultStream, &qr),
                 cudaSuccess);
    CHECK(fn == wrapper("cuMemAllocFromPoolAsync_ptsz"));

    /* Pinned host memory: never on a device. */
    void *host1, *host2;
    CHECK_EQ_INT(cudaMallocHost(&host1, 10000), cudaSuccess);
    CHECK_EQ_INT(cuMemHostAlloc(&host2, 11000, 0), CUDA_SUCCESS);
    CHECK_EQ_INT(cudaFreeHost(host1), cudaSuccess);
    CHECK_EQ_INT(cuMemFreeHost(host2), CUDA_SUCCESS);
    printf("EXPECT host_peak 21000\n");
    printf("EXPECT counter host_allocs 2\nEXPECT counter host_frees 2\n");

    /* Device 1: stream-ordered on a stream of device 1 while device 0 is current, then sync. */
    cudaStream_t s1;
    CHECK_EQ_INT(cudaSetDevice(1), cudaSuccess);
    CHECK_EQ_INT(cudaStreamCreate(&s1), cudaSuccess);
    CHECK_EQ_INT(cudaSetDevice(0), cudaSuccess);
    CHECK_EQ_INT(cudaMallocAsync(&p, 12000, s1), cudaSuccess);
    kept(1, (uintptr_t)p, 12000, "cudaMallocAsync");
    CHECK_EQ_INT(cudaSetDevice(1), cudaSuccess);
    CHECK_EQ_INT(cudaMalloc(&p, 13000), cudaSuccess);
    kept(1, (uintptr_t)p, 13000, "cudaMalloc");
    CHECK_EQ_INT(cudaSetDevice(0), cudaSuccess);

    /* VMM on device 1: a handle released while mapped is freed at unmap; a retained handle
     * needs its own release. Physical bytes count from cuMemCreate. */
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 1}};
    size_t gran = 0;
    CHECK_EQ_INT(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                 CUDA_SUCCESS);
    CUdeviceptr va;
    CHECK_EQ_INT(cuMemAddressReserve(&va, 4 * gran, 0, 0, 0), CUDA_SUCCESS);
    CUmemGenericAllocationHandle gone, retained, stays;
    CHECK_EQ_INT(cuMemCreate(&gone, gran, &prop, 0), CUDA_SUCCESS);
    CHECK_EQ_INT(cuMemMap(va, gran, 0, gone, 0), CUDA_SUCCESS);
    CHECK_EQ_INT(cuMemRelease(gone), CUDA_SUCCESS);
    CHECK_EQ_INT(cuMemRetainAllocationHandle(&retained, (void *)va), CUDA_SUCCESS);
    CHECK_EQ_INT(cuMemUnmap(va, gran), CUDA_SUCCESS);
    CHECK_EQ_INT(cuMemRelease(retained), CUDA_SUCCESS);
    allocs[1]++;
    CHECK_EQ_INT(cuMemCreate(&stays, 2 * gran, &prop, 0), CUDA_SUCCESS);
    CHECK_EQ_INT(cuMemMap(va + gran, 2 * gran, 0, stays, 0), CUDA_SUCCESS);
    kept(1, va + gran, 2 * gran, "cuMemCreate");
    printf("EXPECT counter vmm_creates 2\nEXPECT counter vmm_releases 2\n");
    printf("EXPECT counter vmm_maps 2\nEXPECT counter vmm_unmaps 1\n");

    /* A free of a pointer nobody allocated, and an out-of-memory failure: counted, no bytes. */
    CHECK(cudaFree((void *)0x1234) != cudaSuccess);
    CHECK_EQ_INT(cudaMalloc(&p, (size_t)1 << 40), cudaErrorMemoryAllocation);
    printf("EXPECT counter unknown_frees 1\n");
    printf("EXPECT counter failed_calls 1\nEXPECT counter oom_calls 1\nEXPECT oom_files 1\n");

    for (int d = 0; d < 2; d++) {
        printf("EXPECT peak %d %llu\nEXPECT live_at_end %d %llu\nEXPECT allocs %d %llu\n", d,
               live[d], d, live[d], d, allocs[d]);
    }
    printf("EXPECT devices 2\n");
    printf("EXPECT counter allocs %llu\n", allocs[0] + allocs[1]);
    printf("EXPECT counter frees 3\n");
    printf("EXPECT counter dropped 0\n");
    return CHECK_DONE();
}
