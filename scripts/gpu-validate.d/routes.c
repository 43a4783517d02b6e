/* The CUDA C part of scripts/gpu-validate: allocate device memory by every route a program (or a
 * library inside it) can take, keep our own account, and write it as JSON for validate.py to
 * hold vramtap's snapshot to.
 *
 *   routes OUT.json
 *
 * Built twice by validate.py: against the dynamic libcudart.so (vramtap sees the runtime calls
 * by name) and against libcudart_static.a, nvcc's default, where the program's cudaMalloc is its
 * own copy and vramtap can only see the driver calls that copy makes through cuGetProcAddress.
 * Routes: runtime sync, pitch, 3D, managed, stream-ordered (default and created pool); the
 * driver by name (-lcuda), through cuGetProcAddress, cudaGetDriverEntryPoint[ByVersion] and
 * dlsym on a libcuda handle; VMM; pinned host memory (never part of a device peak). Then copies
 * between host and device by direction and host kind, and the downloads the program waits for:
 * synchronous ones, pageable ones, and asynchronous ones into pinned memory ended by a wait for
 * their stream (a created one and the legacy default stream, as PyTorch's .item() waits), an
 * event or the device.
 *
 * The account is exact by construction (sizes as vramtap documents them: pitch x rows for
 * pitched memory, the physical size for VMM). Around every allocation the program also reads
 * cudaMemGetInfo, so the report can show how the driver's own figure moved and by how much it
 * rounded. Plain C11 against the CUDA headers: no nvcc needed. */
#define CUDA_ENABLE_DEPRECATED
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define MAXREC 64
#define MAXERR 32

enum kind { K_DEVICE, K_MANAGED, K_POOL, K_VMM };
static const char *const kind_names[] = {"device", "managed", "pool", "vmm"};

struct rec {
    const char *route;      /* how the program reached the allocator */
    const char *api;        /* the name vramtap records when it sees the call by that name */
    const char *api_static; /* what a static runtime turns it into (the driver's name) */
    enum kind kind;
    uintptr_t addr;
    size_t size;
    long long dfree; /* cudaMemGetInfo's free before minus after; managed memory moves nothing */
    int live, at_peak, transient;
};

static struct rec recs[MAXREC];
static int nrec;
static size_t live_bytes, peak_bytes;
static unsigned long long nallocs, nfrees;
static size_t free_before_alloc, host_bytes;
static char errors[MAXERR][160];
static int nerr;

__attribute__((format(printf, 1, 2))) static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (nerr < MAXERR)
        vsnprintf(errors[nerr++], sizeof errors[0], fmt, ap);
    va_end(ap);
}

#define CK_RT(call)                                                                                \
    ((rc_rt = (call)) == cudaSuccess ? 1 : (fail("%s: cudaError %d", #call, (int)rc_rt), 0))
#define CK_DRV(call)                                                                               \
    ((rc_drv = (call)) == CUDA_SUCCESS ? 1 : (fail("%s: CUresult %d", #call, (int)rc_drv), 0))
static cudaError_t rc_rt;
static CUresult rc_drv;

static size_t free_now(void)
{
    size_t f = 0, t = 0;
    if (cudaMemGetInfo(&f, &t) != cudaSuccess)
        return 0;
    return f;
}

/* Called right before each allocation, so that its own effect on free memory is isolated. */
static void before(void)
{
    free_before_alloc = free_now();
}

/* The peak is the first moment the live bytes reach their maximum, as vramtap defines it: a later
 * moment with the same bytes does not move it. */
static int add(const char *route, const char *api, const char *api_static, enum kind k,
               uintptr_t addr, size_t size)
{
    if (nrec == MAXREC) {
        fail("too many allocations for the account");
        return -1;
    }
    struct rec *r = &recs[nrec];
    *r = (struct rec){route, api, api_static, k, addr, size, 0, 1, 0, 0};
    r->dfree = (long long)free_before_alloc - (long long)free_now();
    nallocs++;
    live_bytes += size;
    if (live_bytes > peak_bytes) {
        peak_bytes = live_bytes;
        for (int i = 0; i <= nrec; i++)
            recs[i].at_peak = recs[i].live;
    }
    return nrec++;
}

static void gone(int i)
{
    if (i < 0 || !recs[i].live)
        return;
    recs[i].live = 0;
    live_bytes -= recs[i].size;
    nfrees++;
}

static uint64_t pool_attr(cudaMemPool_t pool, enum cudaMemPoolAttr attr)
{
    uint64_t v = 0;
    if (pool && cudaMemPoolGetAttribute(pool, attr, &v) != cudaSuccess)
        return 0;
    return v;
}

/* Copies as the snapshot counts them (docs/host-memory.md), in its shape. */
enum { H2D_PAGEABLE, H2D_PINNED, D2H_PAGEABLE, D2H_PINNED, D2D, NCOPY };
static unsigned long long copy_bytes[NCOPY], copy_calls[NCOPY], sync_d2h;

static void copied(int kind, size_t bytes, int waited)
{
    copy_bytes[kind] += bytes;
    copy_calls[kind]++;
    sync_d2h += (unsigned long long)waited;
}

/* The copies, between device memory `dev` (64 KiB at least), pinned memory `pinned` and pageable
 * memory `pageable` (4 KiB at least each). Each asynchronous download into pinned memory is
 * waited for at once, in one of four ways: each such wait counts once. */
static void copies(char *dev, char *pinned, char *pageable, cudaStream_t s)
{
    if (CK_RT(cudaMemcpy(dev, pageable, 4096, cudaMemcpyHostToDevice)))
        copied(H2D_PAGEABLE, 4096, 0);
    if (CK_RT(cudaMemcpyAsync(dev + 8192, pinned, 2048, cudaMemcpyHostToDevice, s)))
        copied(H2D_PINNED, 2048, 0);
    if (CK_RT(cudaMemcpy(pageable, dev, 1000, cudaMemcpyDeviceToHost)))
        copied(D2H_PAGEABLE, 1000, 1);
    /* into pageable memory the driver has finished it when the call returns */
    if (CK_RT(cudaMemcpyAsync(pageable, dev, 1100, cudaMemcpyDeviceToHost, s)))
        copied(D2H_PAGEABLE, 1100, 1);
    if (CK_RT(cudaMemcpyAsync(pinned, dev, 4, cudaMemcpyDeviceToHost, s))) {
        copied(D2H_PINNED, 4, 0);
        if (CK_RT(cudaStreamSynchronize(s)))
            sync_d2h++;
    }
    if (CK_RT(cudaMemcpyAsync(pinned + 64, dev, 4, cudaMemcpyDeviceToHost, 0))) {
        copied(D2H_PINNED, 4, 0);
        if (CK_RT(cudaStreamSynchronize(0)))
            sync_d2h++;
    }
    CUevent e = NULL;
    if (CK_DRV(cuEventCreate(&e, CU_EVENT_DEFAULT)) &&
        CK_RT(cudaMemcpyAsync(pinned + 128, dev, 8, cudaMemcpyDeviceToHost, s))) {
        copied(D2H_PINNED, 8, 0);
        if (CK_DRV(cuEventRecord(e, (CUstream)s)) && CK_DRV(cuEventSynchronize(e)))
            sync_d2h++;
    }
    if (e)
        CK_DRV(cuEventDestroy(e));
    if (CK_DRV(cuMemcpyDtoHAsync(pinned + 256, (CUdeviceptr)dev, 16, (CUstream)s))) {
        copied(D2H_PINNED, 16, 0);
        if (CK_RT(cudaDeviceSynchronize()))
            sync_d2h++;
    }
    if (CK_RT(cudaMemcpy(dev + 16384, dev, 2048, cudaMemcpyDeviceToDevice)))
        copied(D2D, 2048, 0);
}

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*alloc_async_fn)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*free_fn)(CUdeviceptr);

int main(int argc, char **argv)
{
    FILE *out = argc > 1 ? fopen(argv[1], "w") : stdout;
    if (!out) {
        perror(argv[1]);
        return 2;
    }
    void *p = NULL;
    CUdeviceptr dp = 0;
    size_t pitch = 0;
    int idx[MAXREC];
    int ni = 0;

    /* Context first: its memory is not ours, so free memory is measured from here on. */
    CK_RT(cudaSetDevice(0));
    CK_RT(cudaFree(0));
    CK_DRV(cuInit(0));
    CUdevice dev = 0;
    CK_DRV(cuDeviceGet(&dev, 0));
    int driver_version = 0;
    CK_DRV(cuDriverGetVersion(&driver_version));
    char name[256] = "";
    CK_DRV(cuDeviceGetName(name, sizeof name, dev));
    size_t total = 0;
    CK_DRV(cuDeviceTotalMem(&total, dev));
    cudaStream_t s = NULL;
    CK_RT(cudaStreamCreate(&s));
    cudaMemPool_t default_pool = NULL, own_pool = NULL;
    CK_RT(cudaDeviceGetDefaultMemPool(&default_pool, 0));
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    CK_RT(cudaMemPoolCreate(&own_pool, &props));
    CUmemAllocationProp vprop;
    memset(&vprop, 0, sizeof vprop);
    vprop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    vprop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    vprop.location.id = dev;
    size_t gran_rec = 0, gran_min = 0;
    CK_DRV(cuMemGetAllocationGranularity(&gran_rec, &vprop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    CK_DRV(cuMemGetAllocationGranularity(&gran_min, &vprop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CK_RT(cudaDeviceSynchronize());
    size_t free_start = free_now();

    /* Transient: born and freed before the peak, so never in the live set at the peak. */
    before();
    if (CK_RT(cudaMalloc(&p, 3 * MiB))) {
        int i = add("runtime sync (transient)", "cudaMalloc", "cuMemAlloc_v2", K_DEVICE,
                    (uintptr_t)p, 3 * MiB);
        recs[i].transient = 1;
        if (CK_RT(cudaFree(p)))
            gone(i);
    }
    before();
    if (CK_DRV(cuMemAlloc(&dp, 1 * MiB))) {
        int i = add("driver by name (transient)", "cuMemAlloc_v2", "cuMemAlloc_v2", K_DEVICE, dp,
                    1 * MiB);
        recs[i].transient = 1;
        if (CK_DRV(cuMemFree(dp)))
            gone(i);
    }

    /* Runtime, synchronous; odd sizes show the driver's rounding. */
    static const size_t sync_sizes[] = {1 * MiB, 4 * MiB + 123, 64 * MiB};
    int big = -1;
    for (size_t k = 0; k < sizeof sync_sizes / sizeof sync_sizes[0]; k++) {
        before();
        if (CK_RT(cudaMalloc(&p, sync_sizes[k]))) {
            idx[ni] = add("runtime sync", "cudaMalloc", "cuMemAlloc_v2", K_DEVICE, (uintptr_t)p,
                          sync_sizes[k]);
            if (sync_sizes[k] == 64 * MiB)
                big = idx[ni];
            ni++;
        }
    }
    before();
    if (CK_RT(cudaMallocPitch(&p, &pitch, 1000, 300)))
        idx[ni++] = add("runtime pitch", "cudaMallocPitch", "cuMemAllocPitch_v2", K_DEVICE,
                        (uintptr_t)p, pitch * 300);
    struct cudaPitchedPtr pp;
    memset(&pp, 0, sizeof pp);
    struct cudaExtent ext = {.width = 500, .height = 100, .depth = 4};
    before();
    if (CK_RT(cudaMalloc3D(&pp, ext)))
        idx[ni++] = add("runtime 3D", "cudaMalloc3D", "cuMemAllocPitch_v2", K_DEVICE,
                        (uintptr_t)pp.ptr, pp.pitch * ext.height * ext.depth);
    before();
    if (CK_RT(cudaMallocManaged(&p, 8 * MiB, cudaMemAttachGlobal)))
        idx[ni++] = add("runtime managed", "cudaMallocManaged", "cuMemAllocManaged", K_MANAGED,
                        (uintptr_t)p, 8 * MiB);

    /* Runtime, stream-ordered: the default pool and one of our own. */
    static const size_t async_sizes[] = {16 * MiB, 3 * MiB + 5};
    for (size_t k = 0; k < 2; k++) {
        before();
        if (CK_RT(cudaMallocAsync(&p, async_sizes[k], s)))
            idx[ni++] = add("runtime async", "cudaMallocAsync", "cuMemAllocAsync", K_POOL,
                            (uintptr_t)p, async_sizes[k]);
        CK_RT(cudaDeviceSynchronize());
    }
    before();
    if (CK_RT(cudaMallocFromPoolAsync(&p, 5 * MiB, own_pool, s)))
        idx[ni++] = add("runtime async, created pool", "cudaMallocFromPoolAsync",
                        "cuMemAllocFromPoolAsync", K_POOL, (uintptr_t)p, 5 * MiB);
    CK_RT(cudaDeviceSynchronize());

    /* The driver by name (linked with -lcuda). */
    before();
    if (CK_DRV(cuMemAlloc(&dp, 2 * MiB)))
        idx[ni++] = add("driver by name", "cuMemAlloc_v2", "cuMemAlloc_v2", K_DEVICE, dp, 2 * MiB);
    before();
    if (CK_DRV(cuMemAllocPitch(&dp, &pitch, 700, 50, 4)))
        idx[ni++] = add("driver by name, pitch", "cuMemAllocPitch_v2", "cuMemAllocPitch_v2",
                        K_DEVICE, dp, pitch * 50);
    before();
    if (CK_DRV(cuMemAllocManaged(&dp, 4 * MiB, CU_MEM_ATTACH_GLOBAL)))
        idx[ni++] = add("driver by name, managed", "cuMemAllocManaged", "cuMemAllocManaged",
                        K_MANAGED, dp, 4 * MiB);
    before();
    if (CK_DRV(cuMemAllocAsync(&dp, 7 * MiB, (CUstream)s)))
        idx[ni++] =
            add("driver by name, async", "cuMemAllocAsync", "cuMemAllocAsync", K_POOL, dp, 7 * MiB);
    CK_RT(cudaDeviceSynchronize());

    /* cuGetProcAddress: how CUDA 12+ libraries find the driver. */
    alloc_fn gpa_alloc = NULL;
    alloc_async_fn gpa_async = NULL;
    CUdriverProcAddressQueryResult qr;
    if (CK_DRV(cuGetProcAddress("cuMemAlloc", (void **)&gpa_alloc, 12000,
                                CU_GET_PROC_ADDRESS_DEFAULT, &qr)) &&
        gpa_alloc) {
        before();
        if (CK_DRV(gpa_alloc(&dp, 6 * MiB)))
            idx[ni++] =
                add("cuGetProcAddress", "cuMemAlloc_v2", "cuMemAlloc_v2", K_DEVICE, dp, 6 * MiB);
    }
    if (CK_DRV(cuGetProcAddress("cuMemAllocAsync", (void **)&gpa_async, 12000,
                                CU_GET_PROC_ADDRESS_DEFAULT, &qr)) &&
        gpa_async) {
        before();
        if (CK_DRV(gpa_async(&dp, 1 * MiB + 7, (CUstream)s)))
            idx[ni++] = add("cuGetProcAddress, async", "cuMemAllocAsync", "cuMemAllocAsync", K_POOL,
                            dp, 1 * MiB + 7);
        CK_RT(cudaDeviceSynchronize());
    }

    /* The runtime's own door to the driver. */
    alloc_fn ep_alloc = NULL;
    enum cudaDriverEntryPointQueryResult eq;
    if (CK_RT(cudaGetDriverEntryPoint("cuMemAlloc", (void **)&ep_alloc, cudaEnableDefault, &eq)) &&
        ep_alloc) {
        before();
        if (CK_DRV(ep_alloc(&dp, 9 * MiB)))
            idx[ni++] = add("cudaGetDriverEntryPoint", "cuMemAlloc_v2", "cuMemAlloc_v2", K_DEVICE,
                            dp, 9 * MiB);
    }
    ep_alloc = NULL;
    if (CK_RT(cudaGetDriverEntryPointByVersion("cuMemAlloc", (void **)&ep_alloc, 12000,
                                               cudaEnableDefault, &eq)) &&
        ep_alloc) {
        before();
        if (CK_DRV(ep_alloc(&dp, 10 * MiB)))
            idx[ni++] = add("cudaGetDriverEntryPointByVersion", "cuMemAlloc_v2", "cuMemAlloc_v2",
                            K_DEVICE, dp, 10 * MiB);
    }

    /* dlsym on a libcuda handle: a lookup on a handle never searches LD_PRELOAD objects. */
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    alloc_fn dl_alloc = h ? (alloc_fn)dlsym(h, "cuMemAlloc_v2") : NULL;
    if (!dl_alloc)
        fail("dlsym(libcuda.so.1, cuMemAlloc_v2): %s", dlerror());
    else {
        before();
        if (CK_DRV(dl_alloc(&dp, 11 * MiB)))
            idx[ni++] =
                add("dlsym on libcuda", "cuMemAlloc_v2", "cuMemAlloc_v2", K_DEVICE, dp, 11 * MiB);
    }

    /* VMM: physical memory counts from cuMemCreate to release; the address comes with cuMemMap. */
    size_t vsize = 2 * (gran_rec ? gran_rec : 2 * MiB);
    CUdeviceptr va = 0;
    CUmemGenericAllocationHandle vh = 0;
    int vmm_rec = -1, vmm_mapped = 0, vmm_created = 0, va_reserved = 0;
    if (CK_DRV(cuMemAddressReserve(&va, vsize, 0, 0, 0))) {
        va_reserved = 1;
        before();
        if (CK_DRV(cuMemCreate(&vh, vsize, &vprop, 0))) {
            vmm_created = 1;
            if (CK_DRV(cuMemMap(va, vsize, 0, vh, 0))) {
                vmm_mapped = 1;
                CUmemAccessDesc acc;
                memset(&acc, 0, sizeof acc);
                acc.location = vprop.location;
                acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
                CK_DRV(cuMemSetAccess(va, vsize, &acc, 1));
            }
            vmm_rec = idx[ni++] = add("VMM", "cuMemCreate", "cuMemCreate", K_VMM, va, vsize);
        }
    }

    /* Pinned host memory: tracked apart, never in a device peak. */
    void *host = NULL;
    if (CK_RT(cudaMallocHost(&host, 1 * MiB)))
        host_bytes = 1 * MiB;
    char *pageable = malloc(64 * KiB);
    if (host && pageable && ni > 0)
        copies((char *)recs[idx[0]].addr, host, pageable, s);
    free(pageable);

    /* The peak is here. Free memory and the pools' reservations now, for the driver's view. */
    CK_RT(cudaDeviceSynchronize());
    size_t free_at_peak = free_now();
    uint64_t default_reserved = pool_attr(default_pool, cudaMemPoolAttrReservedMemCurrent);
    uint64_t own_reserved = pool_attr(own_pool, cudaMemPoolAttrReservedMemCurrent);

    /* After the peak: the same bytes again must not move the first peak moment. */
    if (big >= 0) {
        if (CK_RT(cudaFree((void *)recs[big].addr)))
            gone(big);
        before();
        if (CK_RT(cudaMalloc(&p, 64 * MiB))) {
            int i = add("runtime sync (after the peak)", "cudaMalloc", "cuMemAlloc_v2", K_DEVICE,
                        (uintptr_t)p, 64 * MiB);
            if (CK_RT(cudaFree(p)))
                gone(i);
        }
    }

    /* Free everything, each by the matching route. */
    for (int k = 0; k < ni; k++) {
        struct rec *r = &recs[idx[k]];
        if (!r->live)
            continue;
        int ok = 0;
        if (idx[k] == vmm_rec) {
            ok = (!vmm_mapped || CK_DRV(cuMemUnmap(va, vsize))) && CK_DRV(cuMemRelease(vh));
            vmm_created = 0;
        } else if (r->kind == K_POOL) {
            ok = CK_RT(cudaFreeAsync((void *)r->addr, s));
        } else if (r->api[0] == 'c' && r->api[1] == 'u') {
            ok = CK_DRV(cuMemFree((CUdeviceptr)r->addr));
        } else {
            ok = CK_RT(cudaFree((void *)r->addr));
        }
        if (ok)
            gone(idx[k]);
    }
    if (vmm_created)
        CK_DRV(cuMemRelease(vh));
    if (va_reserved)
        CK_DRV(cuMemAddressFree(va, vsize));
    if (host)
        CK_RT(cudaFreeHost(host));
    CK_RT(cudaDeviceSynchronize());
    if (own_pool)
        CK_RT(cudaMemPoolDestroy(own_pool));
    if (s)
        CK_RT(cudaStreamDestroy(s));

    fprintf(out,
            "{\n \"program\": \"routes\",\n \"device_name\": \"%s\",\n \"driver_version\": %d,\n"
            " \"runtime_header_version\": %d,\n \"total_bytes\": %zu,\n"
            " \"granularity_recommended\": %zu,\n \"granularity_minimum\": %zu,\n"
            " \"peak_bytes\": %zu,\n \"live_bytes_at_end\": %zu,\n \"host_bytes\": %zu,\n"
            " \"allocs\": %llu,\n \"frees\": %llu,\n \"free_start\": %zu,\n"
            " \"free_at_peak\": %zu,\n \"default_pool_reserved_at_peak\": %" PRIu64 ",\n"
            " \"own_pool_reserved_at_peak\": %" PRIu64 ",\n",
            name, driver_version, CUDART_VERSION, total, gran_rec, gran_min, peak_bytes, live_bytes,
            host_bytes, nallocs, nfrees, free_start, free_at_peak, default_reserved, own_reserved);
    fprintf(out,
            " \"copies\": {\"h2d\": {\"pageable_bytes\": %llu, \"pinned_bytes\": %llu, "
            "\"pageable_calls\": %llu, \"pinned_calls\": %llu}, \"d2h\": {\"pageable_bytes\": "
            "%llu, \"pinned_bytes\": %llu, \"pageable_calls\": %llu, \"pinned_calls\": %llu}, "
            "\"d2d\": {\"bytes\": %llu, \"calls\": %llu}, \"h2h\": {\"bytes\": 0, \"calls\": 0}, "
            "\"sync_d2h_calls\": %llu},\n \"allocations\": [",
            copy_bytes[H2D_PAGEABLE], copy_bytes[H2D_PINNED], copy_calls[H2D_PAGEABLE],
            copy_calls[H2D_PINNED], copy_bytes[D2H_PAGEABLE], copy_bytes[D2H_PINNED],
            copy_calls[D2H_PAGEABLE], copy_calls[D2H_PINNED], copy_bytes[D2D], copy_calls[D2D],
            sync_d2h);
    for (int i = 0; i < nrec; i++) {
        const struct rec *r = &recs[i];
        fprintf(out,
                "%s\n  {\"route\": \"%s\", \"api\": \"%s\", \"api_static\": \"%s\", "
                "\"kind\": \"%s\", \"address\": \"0x%" PRIxPTR "\", \"size\": %zu, "
                "\"dfree\": %lld, \"at_peak\": %s, \"transient\": %s}",
                i ? "," : "", r->route, r->api, r->api_static, kind_names[r->kind], r->addr,
                r->size, r->dfree, r->at_peak ? "true" : "false", r->transient ? "true" : "false");
    }
    fprintf(out, "\n ],\n \"errors\": [");
    for (int i = 0; i < nerr; i++) {
        fputs(i ? ", \"" : "\"", out);
        for (const char *c = errors[i]; *c; c++)
            fprintf(out, *c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
        fputc('"', out);
    }
    fprintf(out, "]\n}\n");
    if (out != stdout)
        fclose(out);
    if (nerr)
        fprintf(stderr, "routes: %d CUDA call(s) failed; first: %s\n", nerr, errors[0]);
    return nerr ? 1 : 0;
}
