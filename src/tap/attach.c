/* vramtap as a CUDA injection library (attach.h). NVIDIA's driver loads the library named by
 * CUDA_INJECTION64_PATH at cuInit and calls its InitializeInjection; from there CUPTI reports
 * every runtime and driver API call, however the program reached the function (a static
 * runtime, a loader that dropped LD_PRELOAD, RTLD_DEEPBIND). libcupti is opened at run time,
 * never linked.
 *
 * Two rules keep an allocation from being recorded twice: a call that an interposed wrapper
 * surrounds (vt_depth > 0 on the calling thread) is the wrapper's to record, and a driver call
 * made inside a runtime call is that runtime call's. So in attach mode (not preloaded) the
 * callbacks record every allocation, and under LD_PRELOAD they only count, and the allocations
 * no wrapper surrounded are the ones interposition missed. */
#include <cupti.h>
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#include "attach.h"
#include "json_out.h"
#include "resolve.h"
#include "snapshot_keys.h"
#include "unwind.h"
#include "table.h"

/* CUDA 11.2's CUPTI (API version 15) is the first to report the pool allocations. */
#define MIN_CUPTI_VERSION 15

typedef CUptiResult (*get_version_fn)(uint32_t *);
typedef CUptiResult (*subscribe_fn)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
typedef CUptiResult (*enable_callback_fn)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                          CUpti_CallbackId);
typedef CUptiResult (*result_string_fn)(CUptiResult, const char **);

VT_HIDDEN _Atomic int vt_attach_role;
static char cupti_path[PATH_MAX];

/* The calls vramtap follows, in CUPTI's two API domains: what each one makes (the API it is
 * recorded under; VT_API_COUNT for the calls that release or map). The runtime's are followed
 * as well as the driver's because CUPTI need not report the driver calls a runtime call makes
 * underneath; when it does, they are that runtime call's and are not recorded again. */
static const struct {
    CUpti_CallbackDomain domain;
    CUpti_CallbackId cbid;
    vt_api api;
    vt_kind kind;
} calls[] = {
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, VT_API_cudaMalloc,
     VT_KIND_DEVICE},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020,
     VT_API_cudaMallocPitch, VT_KIND_DEVICE},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc3D_v3020, VT_API_cudaMalloc3D,
     VT_KIND_DEVICE},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000,
     VT_API_cudaMallocManaged, VT_KIND_MANAGED},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020,
     VT_API_cudaMallocAsync, VT_KIND_POOL},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020,
     VT_API_cudaMallocAsync, VT_KIND_POOL},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020,
     VT_API_cudaMallocFromPoolAsync, VT_KIND_POOL},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020,
     VT_API_cudaMallocFromPoolAsync, VT_KIND_POOL},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020,
     VT_API_cudaMallocHost, VT_KIND_HOST},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020,
     VT_API_cudaHostAlloc, VT_KIND_HOST},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, VT_API_COUNT,
     VT_KIND_DEVICE},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020, VT_API_COUNT,
     VT_KIND_POOL},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020, VT_API_COUNT,
     VT_KIND_POOL},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020, VT_API_COUNT,
     VT_KIND_HOST},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemPoolDestroy_v11020, VT_API_COUNT,
     VT_KIND_POOL},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, VT_API_cuMemAlloc_v2,
     VT_KIND_DEVICE},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
     VT_API_cuMemAllocPitch_v2, VT_KIND_DEVICE},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
     VT_API_cuMemAllocManaged, VT_KIND_MANAGED},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, VT_API_cuMemAllocAsync,
     VT_KIND_POOL},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
     VT_API_cuMemAllocAsync, VT_KIND_POOL},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
     VT_API_cuMemAllocFromPoolAsync, VT_KIND_POOL},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
     VT_API_cuMemAllocFromPoolAsync, VT_KIND_POOL},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemCreate, VT_API_cuMemCreate,
     VT_KIND_VMM},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc, VT_API_cuMemHostAlloc,
     VT_KIND_HOST},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2,
     VT_API_cuMemAllocHost_v2, VT_KIND_HOST},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, VT_API_COUNT,
     VT_KIND_DEVICE},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, VT_API_COUNT,
     VT_KIND_POOL},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz, VT_API_COUNT,
     VT_KIND_POOL},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost, VT_API_COUNT, VT_KIND_HOST},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemRelease, VT_API_COUNT, VT_KIND_VMM},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemMap, VT_API_COUNT, VT_KIND_VMM},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, VT_API_COUNT, VT_KIND_VMM},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemRetainAllocationHandle, VT_API_COUNT,
     VT_KIND_VMM},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemPoolDestroy, VT_API_COUNT,
     VT_KIND_POOL},
};

/* ---- the coverage figures: counted outside every lock ---- */

enum side { SIDE_CUPTI, SIDE_INTERPOSED, SIDE_MISSED, SIDES };
static _Atomic uint64_t tally[SIDES][VT_API_COUNT][2]; /* allocations, bytes */

static void count(enum side side, vt_api api, uint64_t size)
{
    atomic_fetch_add_explicit(&tally[side][api][0], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&tally[side][api][1], size, memory_order_relaxed);
}

void vt_coverage_reset_after_fork(void)
{
    for (int s = 0; s < SIDES; s++)
        for (int a = 0; a < VT_API_COUNT; a++)
            for (int k = 0; k < 2; k++)
                atomic_store_explicit(&tally[s][a][k], 0, memory_order_relaxed);
}

/* Interposition recorded an allocation on this thread during the runtime call open on it: a
 * runtime call no wrapper surrounds (a runtime found by dlsym on its own handle) whose driver
 * call underneath a wrapper recorded is not one interposition missed. */
static VT_TLS int interposed_inside;

void vt_coverage_count_interposed(vt_api api, uint64_t size)
{
    if (api < VT_API_COUNT) {
        count(SIDE_INTERPOSED, api, size);
        interposed_inside = 1;
    }
}

/* ---- the callbacks ---- */

/* An allocation a call made (or failed to make), from its parameters and result. */
typedef struct {
    vt_api api;
    vt_kind kind;
    int device;
    uintptr_t addr, pool;
    uint64_t size;
} made;

static int device_of_prop(const CUmemAllocationProp *prop)
{
    return prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : -1;
}

/* The runtime's allocators: the device is asked of the driver only when recording. Every one
 * but the 3D one begins with (void **out, size_t size). */
static void decode_runtime(CUpti_CallbackId cbid, const void *params, int ok, int ask, made *m)
{
    const cudaMalloc_v3020_params *p = params;
    m->addr = ok && p->devPtr ? (uintptr_t)*p->devPtr : 0;
    m->size = p->size;
    switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020: {
        const cudaMallocPitch_v3020_params *q = params;
        m->size = ok && q->pitch ? (uint64_t)*q->pitch * q->height : (uint64_t)q->width * q->height;
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc3D_v3020: {
        const cudaMalloc3D_v3020_params *q = params;
        uint64_t rows = (uint64_t)q->extent.height * q->extent.depth;
        m->addr = ok && q->pitchedDevPtr ? (uintptr_t)q->pitchedDevPtr->ptr : 0;
        m->size = ok && q->pitchedDevPtr ? (uint64_t)q->pitchedDevPtr->pitch * rows
                                         : (uint64_t)q->extent.width * rows;
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020:
        if (ask)
            m->device = vt_device_of_stream(
                (uintptr_t)((const cudaMallocAsync_v11020_params *)params)->hStream, 0, m->addr);
        return;
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020:
        m->pool = (uintptr_t)((const cudaMallocFromPoolAsync_v11020_params *)params)->memPool;
        if (ask)
            m->device = vt_device_of_pointer(m->addr);
        return;
    default:
        break;
    }
    if (ask && m->kind != VT_KIND_HOST)
        m->device = vt_device_current();
}

/* The driver's: cuMemAlloc_v2, cuMemAllocManaged, the host allocators and the stream-ordered
 * ones begin with (out, size_t size). */
static void decode_driver(CUpti_CallbackId cbid, const void *params, int ok, int ask, made *m)
{
    const cuMemAlloc_v2_params *p = params;
    m->addr = ok && p->dptr ? *p->dptr : 0;
    m->size = p->bytesize;
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
        const cuMemAllocPitch_v2_params *q = params;
        m->size = ok && q->pPitch ? (uint64_t)*q->pPitch * q->Height
                                  : (uint64_t)q->WidthInBytes * q->Height;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
        const cuMemAllocFromPoolAsync_params *q = params;
        m->pool = (uintptr_t)q->pool;
        if (ask)
            m->device = vt_device_of_stream(
                (uintptr_t)q->hStream, cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
                m->addr);
        return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz:
        if (ask)
            m->device =
                vt_device_of_stream((uintptr_t)((const cuMemAllocAsync_params *)params)->hStream,
                                    cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz, m->addr);
        return;
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
        const cuMemCreate_params *q = params;
        m->addr = ok && q->handle ? (uintptr_t)*q->handle : 0;
        m->size = q->size;
        m->device = device_of_prop(q->prop);
        if (m->device < 0 && ask && !ok)
            m->device = vt_device_current();
        return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2: {
        const cuMemAllocHost_v2_params *q = params;
        m->addr = ok && q->pp ? (uintptr_t)*q->pp : 0;
        return;
    }
    default:
        break;
    }
    if (ask)
        m->device = vt_device_current();
}

static void record(const made *m, int ok, int error, int is_oom)
{
    if (!ok)
        vt_note_fail(m->api, m->kind == VT_KIND_HOST ? -1 : m->device, m->size, error,
                     m->kind != VT_KIND_HOST && is_oom);
    else if (m->kind == VT_KIND_HOST && m->addr)
        vt_note_host_alloc(m->api, m->addr, m->size);
    else if (m->kind == VT_KIND_VMM && m->addr && m->device >= 0)
        vt_note_vmm_create(m->addr, m->device, m->size);
    else if (m->kind != VT_KIND_VMM && m->addr) {
        if (m->pool)
            vt_note_pool(m->device, m->pool);
        vt_note_alloc(m->api, m->kind, m->device, m->addr, m->size);
    }
}

/* Releases are recorded before the call acts, as the wrappers do: once it has, another thread
 * may be handed the same address. Each free's parameters begin with the pointer. */
static void released(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, vt_kind kind,
                     const void *params)
{
    int runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
    uintptr_t first = runtime ? (uintptr_t)((const cudaFree_v3020_params *)params)->devPtr
                              : (uintptr_t)((const cuMemFree_v2_params *)params)->dptr;
    if (runtime ? cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemPoolDestroy_v11020
                : cbid == CUPTI_DRIVER_TRACE_CBID_cuMemPoolDestroy)
        vt_note_pool_destroy(first);
    else if (!runtime && cbid == CUPTI_DRIVER_TRACE_CBID_cuMemRelease)
        vt_note_vmm_release((uintptr_t)((const cuMemRelease_params *)params)->handle);
    else if (!runtime && cbid == CUPTI_DRIVER_TRACE_CBID_cuMemUnmap)
        vt_note_vmm_unmap(first, ((const cuMemUnmap_params *)params)->size);
    else if (kind == VT_KIND_HOST && first)
        vt_note_host_free(first);
    else if (kind != VT_KIND_VMM && first)
        vt_note_free(first);
}

/* What a successful map or retain tells the VMM books. */
static void completed(CUpti_CallbackId cbid, const void *params)
{
    if (cbid == CUPTI_DRIVER_TRACE_CBID_cuMemMap) {
        const cuMemMap_params *p = params;
        vt_note_vmm_map((uintptr_t)p->ptr, p->size, (uintptr_t)p->handle);
    } else if (cbid == CUPTI_DRIVER_TRACE_CBID_cuMemRetainAllocationHandle) {
        const cuMemRetainAllocationHandle_params *p = params;
        if (p->handle)
            vt_note_vmm_retain((uintptr_t)*p->handle);
    }
}

/* 1 for a call vramtap follows, with what it makes (VT_API_COUNT: it releases or maps). */
static int followed(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, made *m)
{
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        if (calls[i].domain == domain && calls[i].cbid == cbid) {
            m->api = calls[i].api;
            m->kind = calls[i].kind;
            return 1;
        }
    }
    return 0;
}

/* Per thread: calls vramtap makes from a callback (the driver's device queries) are not
 * followed; runtime calls open on this thread, whose driver calls are theirs. */
static VT_TLS int in_callback;
static VT_TLS int runtime_open;

/* One callback of a followed call that no runtime call on its thread holds: recorded when
 * attached and no wrapper surrounds it, counted beside interposition otherwise. */
static void outermost(int r, int surrounded, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                      const CUpti_CallbackData *d, made *m)
{
    int records = r == VT_ATTACH_RECORD && !surrounded;
    if (d->callbackSite == CUPTI_API_ENTER) {
        if (records && m->api == VT_API_COUNT)
            released(domain, cbid, m->kind, d->functionParams);
        return;
    }
    if (!d->functionReturnValue)
        return;
    int error = *(const int *)d->functionReturnValue; /* CUresult or cudaError_t */
    int ok = error == 0, is_oom = domain == CUPTI_CB_DOMAIN_RUNTIME_API
                                      ? error == cudaErrorMemoryAllocation
                                      : error == CUDA_ERROR_OUT_OF_MEMORY;
    if (m->api == VT_API_COUNT) {
        if (records && ok && domain == CUPTI_CB_DOMAIN_DRIVER_API)
            completed(cbid, d->functionParams);
        return;
    }
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
        decode_runtime(cbid, d->functionParams, ok, records, m);
    else
        decode_driver(cbid, d->functionParams, ok, records, m);
    if (records)
        record(m, ok, error, is_oom);
    /* Physical memory elsewhere than on a device is not what interposition counts. */
    if (r == VT_ATTACH_COUNT && ok && m->addr && (m->kind != VT_KIND_VMM || m->device >= 0)) {
        count(SIDE_CUPTI, m->api, m->size);
        if (!surrounded)
            count(SIDE_MISSED, m->api, m->size);
    }
}

static void CUPTIAPI on_call(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                             const void *cbdata)
{
    (void)userdata;
    const CUpti_CallbackData *d = cbdata;
    int r = atomic_load_explicit(&vt_attach_role, memory_order_relaxed);
    made m = {.device = -1};
    if (!d || !d->functionParams || in_callback || vt_cfg.disabled || !followed(domain, cbid, &m))
        return;
    int enter = d->callbackSite == CUPTI_API_ENTER;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && !enter) {
        /* an exit without its entry (the call began before CUPTI was there) is left to the
         * driver's callbacks underneath */
        if (!runtime_open)
            return;
        runtime_open--;
    }
    int surrounded = vt_depth > 0 || (domain == CUPTI_CB_DOMAIN_RUNTIME_API && interposed_inside);
    in_callback = 1;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API || !runtime_open)
        outermost(r, surrounded, domain, cbid, d, &m);
    in_callback = 0;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && enter) {
        runtime_open++;
        interposed_inside = 0;
    }
}

/* ---- finding and starting CUPTI ---- */

/* An already loaded CUPTI first (a framework's own), then VRAMTAP_CUPTI, the loader's search,
 * and the toolkit's folders: CUDA 13 installs it beside the runtime (targets/<arch>/lib, which
 * lib64 links to); older toolkits under extras/CUPTI/lib64. */
static void *open_cupti(void)
{
    static const char *const names[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};
    void *h = NULL;
    for (size_t i = 0; !h && i < sizeof names / sizeof names[0]; i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
    const char *env = getenv("VRAMTAP_CUPTI");
    if (!h && env && *env)
        h = dlopen(env, RTLD_NOW);
    for (size_t i = 0; !h && i < sizeof names / sizeof names[0]; i++)
        h = dlopen(names[i], RTLD_NOW);
    const char *homes[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
    for (size_t i = 0; !h && i < sizeof homes / sizeof homes[0]; i++) {
        static const char *const dirs[] = {"lib64", "extras/CUPTI/lib64"};
        for (size_t j = 0; !h && homes[i] && *homes[i] && j < sizeof dirs / sizeof dirs[0]; j++) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/%s/libcupti.so", homes[i], dirs[j]);
            h = dlopen(path, RTLD_NOW);
        }
    }
    return h;
}

/* Says why once, and returns 0. */
static int unavailable(const char *why, const char *detail)
{
    if (vt_cfg.preloaded)
        vt_log("the coverage check cannot run: %s%s; interposition records as usual", why, detail);
    else
        vt_log("attached through CUDA_INJECTION64_PATH, but %s%s: vramtap records nothing in "
               "this process (VRAMTAP_CUPTI names libcupti.so; LD_PRELOAD=libvramtap.so needs no "
               "CUPTI)",
               why, detail);
    return 0;
}

static int start(void)
{
    void *h = open_cupti();
    if (!h)
        return unavailable("CUPTI (libcupti.so) was not found", "");
    get_version_fn get_version = (get_version_fn)dlsym(h, "cuptiGetVersion");
    subscribe_fn subscribe = (subscribe_fn)dlsym(h, "cuptiSubscribe");
    enable_callback_fn enable = (enable_callback_fn)dlsym(h, "cuptiEnableCallback");
    result_string_fn result_string = (result_string_fn)dlsym(h, "cuptiGetResultString");
    struct link_map *map;
    if (dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map->l_name && !realpath(map->l_name, cupti_path))
        snprintf(cupti_path, sizeof cupti_path, "%s", map->l_name);
    uint32_t version = 0;
    if (!get_version || !subscribe || !enable || get_version(&version) != CUPTI_SUCCESS ||
        version < MIN_CUPTI_VERSION) {
        char detail[PATH_MAX + 64];
        snprintf(detail, sizeof detail, " (%s: API version %u, %d needed)", cupti_path, version,
                 MIN_CUPTI_VERSION);
        return unavailable("CUPTI is too old", detail);
    }
    CUpti_SubscriberHandle subscriber;
    CUptiResult rc = subscribe(&subscriber, on_call, NULL);
    for (size_t i = 0; rc == CUPTI_SUCCESS && i < sizeof calls / sizeof calls[0]; i++)
        rc = enable(1, subscriber, calls[i].domain, calls[i].cbid);
    if (rc != CUPTI_SUCCESS) {
        const char *s = NULL;
        if (!result_string || result_string(rc, &s) != CUPTI_SUCCESS || !s)
            s = "an unknown error";
        char detail[PATH_MAX + 128];
        snprintf(detail, sizeof detail, ": %s (another tool may hold CUPTI's one subscription)", s);
        return unavailable("CUPTI refused the subscription", detail);
    }
    vt_debug("CUPTI %s (API version %u): %s", cupti_path, version,
             vt_cfg.preloaded ? "counting beside interposition" : "recording");
    return 1;
}

VT_EXPORT int InitializeInjection(void)
{
    static atomic_int once;
    if (atomic_exchange(&once, 1) || vt_cfg.disabled)
        return 1;
    if (!start()) {
        if (!vt_cfg.preloaded)
            vt_cfg.disabled = 1; /* nothing to record: no snapshot either */
        return 1;
    }
    if (!vt_cfg.preloaded)
        vt_unwind_skip_cuda();
    atomic_store(&vt_attach_role, vt_cfg.preloaded ? VT_ATTACH_COUNT : VT_ATTACH_RECORD);
    return 1;
}

/* ---- the figures ---- */

typedef struct {
    uint64_t tally[SIDES][VT_API_COUNT][2];
} figures;

static int read_figures(figures *c)
{
    if (atomic_load(&vt_attach_role) != VT_ATTACH_COUNT)
        return 0;
    for (int s = 0; s < SIDES; s++)
        for (int a = 0; a < VT_API_COUNT; a++)
            for (int k = 0; k < 2; k++)
                c->tally[s][a][k] = atomic_load_explicit(&tally[s][a][k], memory_order_relaxed);
    return 1;
}

static void totals(const figures *c, enum side s, uint64_t *allocs, uint64_t *bytes)
{
    *allocs = *bytes = 0;
    for (int a = 0; a < VT_API_COUNT; a++) {
        *allocs += c->tally[s][a][0];
        *bytes += c->tally[s][a][1];
    }
}

static void write_side(FILE *f, const figures *c, enum side s, const char *name)
{
    uint64_t allocs, bytes;
    totals(c, s, &allocs, &bytes);
    fprintf(f, "\"%s\": {\"allocations\": %llu, \"bytes\": %llu, \"by_api\": {", name,
            (unsigned long long)allocs, (unsigned long long)bytes);
    const char *sep = "";
    for (int a = 0; a < VT_API_COUNT; a++) {
        if (!c->tally[s][a][0])
            continue;
        fprintf(f, "%s\"%s\": {\"allocations\": %llu, \"bytes\": %llu}", sep,
                vt_api_name((vt_api)a), (unsigned long long)c->tally[s][a][0],
                (unsigned long long)c->tally[s][a][1]);
        sep = ", ";
    }
    fputs("}}", f);
}

void vt_attach_write(FILE *f)
{
    fprintf(f, VT_JSON_KEY(VT_K_ATTACH) "\"%s\",\n", vt_cfg.preloaded ? "preload" : "cupti");
    figures c;
    if (!read_figures(&c))
        return;
    fputs(VT_JSON_KEY(VT_K_COVERAGE) "{\"source\": \"cupti\", \"libcupti\": ", f);
    vt_json_str(f, cupti_path);
    fputs(", ", f);
    write_side(f, &c, SIDE_CUPTI, "cupti");
    fputs(", ", f);
    write_side(f, &c, SIDE_INTERPOSED, "interposition");
    fputs(", ", f);
    write_side(f, &c, SIDE_MISSED, "missed");
    fputs("},\n", f);
}

void vt_coverage_exit(void)
{
    figures c;
    if (!read_figures(&c))
        return;
    uint64_t seen, seen_bytes, missed, missed_bytes;
    totals(&c, SIDE_CUPTI, &seen, &seen_bytes);
    totals(&c, SIDE_MISSED, &missed, &missed_bytes);
    if (!missed)
        return;
    char apis[512] = "";
    for (int a = 0; a < VT_API_COUNT; a++)
        if (c.tally[SIDE_MISSED][a][0])
            snprintf(apis + strlen(apis), sizeof apis - strlen(apis), "%s%s %llu",
                     *apis ? ", " : "", vt_api_name((vt_api)a),
                     (unsigned long long)c.tally[SIDE_MISSED][a][0]);
    vt_log("WARNING: interposition missed %llu of the %llu allocations CUPTI saw (%llu of %llu "
           "bytes): %s; 'vramtap run --attach cupti' records them",
           (unsigned long long)missed, (unsigned long long)seen, (unsigned long long)missed_bytes,
           (unsigned long long)seen_bytes, apis);
}
