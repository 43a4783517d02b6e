#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h>

#include "locks.h"
#include "resolve.h"

typedef void *(*dlsym_fn)(void *, const char *);

static const char *const driver_names[VT_DRV_COUNT] = {
#define VT_DRV_NAME(name) #name,
    VT_DRIVER_FUNCS(VT_DRV_NAME)
#undef VT_DRV_NAME
};

static _Atomic(dlsym_fn) real_dlsym;
VT_HIDDEN atomic_int vt_known_ready;
VT_HIDDEN void *vt_known[VT_DRV_COUNT]; /* libcuda's own address of each function */

/* glibc's dlsym, found by version so that our own dlsym is never found again. */
VT_NO_SANITIZE static dlsym_fn get_real_dlsym(void)
{
    dlsym_fn f = atomic_load_explicit(&real_dlsym, memory_order_acquire);
    if (f)
        return f;
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
    for (size_t i = 0; !f && i < sizeof versions / sizeof versions[0]; i++)
        f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", versions[i]);
    atomic_store_explicit(&real_dlsym, f, memory_order_release);
    return f;
}

void *vt_real_dlsym(void *handle, const char *name)
{
    dlsym_fn f = get_real_dlsym();
    return f ? f(handle, name) : NULL;
}

/* The path of a loaded CUDA runtime, into data (PATH_MAX bytes). */
static int find_cudart(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const char *slash = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    if (!slash || strncmp(slash + 1, "libcudart.so", 12))
        return 0;
    snprintf(data, PATH_MAX, "%s", info->dlpi_name);
    return 1;
}

void *vt_real_next_slow(_Atomic(void *) *cache, const char *name)
{
    void *p = vt_real_dlsym(RTLD_NEXT, name);
    /* A runtime loaded with RTLD_LOCAL (a dlopen'ed library that depends on it, as Python
     * extensions do) is not in the global scope, yet that library's calls bind to these
     * wrappers: the real function is the one of the runtime that is loaded. */
    char path[PATH_MAX] = "";
    if (!p && dl_iterate_phdr(find_cudart, path)) {
        /* Not from inside the iteration: it holds a loader lock that dlopen takes second. */
        void *h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
        p = h ? vt_real_dlsym(h, name) : NULL;
    }
    atomic_store_explicit(cache, p, memory_order_release);
    return p;
}

/* Learn libcuda's addresses once it is loaded. A lookup on its handle searches libcuda and its
 * dependencies only, never the preloaded objects, so these are the real functions. The lookups
 * run unlocked (a thread inside dlopen holds the loader's lock and may be on its way here from
 * a constructor that allocates); the first complete set is published under the lock. */
static int known_init(void)
{
    if (atomic_load_explicit(&vt_known_ready, memory_order_acquire))
        return 1;
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        h = dlopen("libcuda.so", RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return 0;
    void *found[VT_DRV_COUNT];
    for (int i = 0; i < VT_DRV_COUNT; i++)
        found[i] = vt_real_dlsym(h, driver_names[i]);
    vt_lock_take(VT_LOCK_DRIVER);
    if (!atomic_load_explicit(&vt_known_ready, memory_order_relaxed)) {
        memcpy(vt_known, found, sizeof vt_known);
        atomic_store_explicit(&vt_known_ready, 1, memory_order_release);
    }
    vt_lock_give(VT_LOCK_DRIVER);
    return 1;
}

void *vt_real_driver_slow(vt_drv which)
{
    return known_init() ? vt_known[which] : NULL;
}

void vt_route_swap(void **pfn, const char *route, const char *symbol, int version,
                   unsigned long long flags)
{
    if (!pfn || !*pfn || vt_cfg.disabled || !known_init())
        return;
    for (int i = 0; i < VT_DRV_COUNT; i++) {
        void *w = vt_driver_wrapper((vt_drv)i);
        if (w && vt_known[i] == *pfn) {
            vt_debug("%s %s ver=%d flags=%llu -> vramtap %s", route, symbol ? symbol : "(null)",
                     version, flags, driver_names[i]);
            *pfn = w;
            return;
        }
    }
}

static int caller_is_libcuda(void *caller)
{
    Dl_info info;
    if (!dladdr(caller, &info) || !info.dli_fname)
        return 0;
    const char *slash = strrchr(info.dli_fname, '/');
    const char *base = slash ? slash + 1 : info.dli_fname;
    return !strncmp(base, "libcuda.so", 10);
}

static void *dlsym_redirect(void *handle, const char *name)
{
    void *p = vt_real_dlsym(handle, name);
    vt_route_swap(&p, "dlsym", name, 0, 0);
    return p;
}

static void *dlsym_unavailable(void *handle, const char *name)
{
    (void)handle;
    (void)name;
    return NULL;
}

/* Called by the dlsym entry stub (dlsym_stub.S) with the caller's return address; returns the
 * function the stub jumps to with the caller's own arguments and return address. glibc
 * resolves RTLD_NEXT (and the namespace of RTLD_DEFAULT) relative to the return address it
 * sees, so everything that is not redirected must reach it by a jump, not a call. */
VT_HIDDEN VT_NO_SANITIZE void *vt_dlsym_target(void *handle, const char *name, void *caller)
{
    dlsym_fn real = get_real_dlsym();
    if (!real)
        return (void *)dlsym_unavailable;
    if (handle == RTLD_NEXT || handle == RTLD_DEFAULT || !name || name[0] != 'c' ||
        name[1] != 'u' || vt_cfg.disabled || caller_is_libcuda(caller))
        return (void *)real;
    return (void *)dlsym_redirect;
}

int vt_device_current(void)
{
    CUresult (*get)(CUdevice *) = (CUresult(*)(CUdevice *))vt_real_driver(VT_DRV_cuCtxGetDevice);
    CUdevice d;
    return get && get(&d) == CUDA_SUCCESS ? d : -1;
}

int vt_device_of_pointer(uintptr_t p)
{
    CUresult (*attr)(void *, CUpointer_attribute, CUdeviceptr) = (CUresult(*)(
        void *, CUpointer_attribute, CUdeviceptr))vt_real_driver(VT_DRV_cuPointerGetAttribute);
    int ordinal;
    if (p && attr &&
        attr(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)p) == CUDA_SUCCESS)
        return ordinal;
    return vt_device_current();
}

int vt_device_of_created_stream(uintptr_t stream, int ptsz, uintptr_t p)
{
    CUstream s = (CUstream)stream;
    CUresult (*get)(CUstream, CUdevice *) = (CUresult(*)(CUstream, CUdevice *))vt_real_driver(
        ptsz ? VT_DRV_cuStreamGetDevice_ptsz : VT_DRV_cuStreamGetDevice);
    CUdevice d;
    if (get && get(s, &d) == CUDA_SUCCESS)
        return d;
    return vt_device_of_pointer(p);
}

int vt_query_meminfo(int64_t *free_bytes, int64_t *total_bytes)
{
    CUresult (*get)(size_t *, size_t *) =
        (CUresult(*)(size_t *, size_t *))vt_real_driver(VT_DRV_cuMemGetInfo_v2);
    size_t f, t;
    if (!get || get(&f, &t) != CUDA_SUCCESS)
        return -1;
    *free_bytes = (int64_t)f;
    *total_bytes = (int64_t)t;
    return 0;
}

typedef CUresult (*exchange_fn)(CUstreamCaptureMode *);

int vt_capture_relax(void)
{
    exchange_fn exchange = (exchange_fn)vt_real_driver(VT_DRV_cuThreadExchangeStreamCaptureMode);
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (!exchange || exchange(&mode) != CUDA_SUCCESS)
        return -1;
    return (int)mode;
}

void vt_capture_restore(int mode)
{
    exchange_fn exchange = (exchange_fn)vt_real_driver(VT_DRV_cuThreadExchangeStreamCaptureMode);
    CUstreamCaptureMode m = (CUstreamCaptureMode)mode;
    if (exchange && mode >= 0)
        exchange(&m);
}
