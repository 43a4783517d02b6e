/* libcuda.so.1 stand-in: knobs, devices, contexts, streams and error strings. */
#include "driver.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static struct books books_ = {.lock = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP};
static pthread_once_t books_once = PTHREAD_ONCE_INIT;

/* A knob that cannot be read is reported and ignored rather than guessed at. */
static void read_knob(const char *name, unsigned long long lo, unsigned long long hi,
                      unsigned long long *value)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || s[0] == '-' || v < lo || v > hi) {
        fprintf(stderr, "stand-in: ignoring %s=%s (want %llu..%llu)\n", name, s, lo, hi);
        return;
    }
    *value = v;
}

static void fork_prepare(void)
{
    pthread_mutex_lock(&books_.lock);
}
static void fork_release(void)
{
    pthread_mutex_unlock(&books_.lock);
}

static void setup(void)
{
    struct books *b = &books_;
    unsigned long long ndev = 2, capacity = 16ull << 30, context = 0, no_default = 0,
                       host_backed = 0;
    read_knob("STANDIN_DEVICES", 0, MAX_DEVICES, &ndev);
    /* At most a quarter of a device's address span: the rest is headroom for fragmentation, so
     * addresses do not run out before capacity does. */
    read_knob("STANDIN_CAPACITY", 1, DEVICE_HEAP_SPAN / 4, &capacity);
    read_knob("STANDIN_CONTEXT_BYTES", 0, capacity, &context);
    read_knob("STANDIN_NO_DEFAULT_CTX", 0, 1, &no_default);
    read_knob("STANDIN_HOST_BACKED", 0, 1, &host_backed);
    b->ndev = (int)ndev;
    b->capacity = capacity;
    b->context_bytes = context;
    b->no_default_ctx = no_default;
    b->host_backed = host_backed;
    bool ok = arena_init(&b->managed, MANAGED_BASE, REGION_SPAN) &&
              arena_init(&b->va, VA_BASE, REGION_SPAN);
    for (int d = 0; d < b->ndev && ok; d++) {
        struct device *dev = &b->dev[d];
        dev->ctx.device = d;
        dev->default_pool = dev->current_pool = pool_new(b, d, true);
        ok = dev->default_pool &&
             arena_init(&dev->heap, DEVICE_HEAP_BASE + (uintptr_t)d * DEVICE_HEAP_SPAN,
                        DEVICE_HEAP_SPAN);
        /* Host-backed: device memory a program can read and write (tests that wrap it in
         * framework tensors). Addresses are first-fit, so they stay within a few capacities of
         * the heap's base; pages are touched only when used. */
        if (ok && host_backed)
            ok = mmap((void *)(DEVICE_HEAP_BASE + (uintptr_t)d * DEVICE_HEAP_SPAN), 4 * capacity,
                      PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1,
                      0) != MAP_FAILED;
    }
    if (!ok) {
        fputs("stand-in: out of host memory at start-up\n", stderr);
        abort();
    }
    /* Handles look like real ones: large, never 0, unrelated to addresses. */
    b->next_handle = 0x5a00000000000001ull;
    pthread_atfork(fork_prepare, fork_release, fork_release);
}

struct books *books(void)
{
    pthread_once(&books_once, setup);
    return &books_;
}

struct books *lock_books(void)
{
    struct books *b = books();
    pthread_mutex_lock(&b->lock);
    return b;
}

void unlock_books(struct books *b)
{
    pthread_mutex_unlock(&b->lock);
}

static _Thread_local struct CUctx_st *tls_ctx;
static _Thread_local bool tls_ctx_chosen;

struct CUctx_st *current_ctx(struct books *b)
{
    if (!tls_ctx_chosen) {
        tls_ctx_chosen = true;
        tls_ctx = b->no_default_ctx || b->ndev == 0 ? NULL : &b->dev[0].ctx;
    }
    return tls_ctx;
}

bool valid_device(const struct books *b, CUdevice d)
{
    return d >= 0 && d < b->ndev;
}

bool valid_ctx(const struct books *b, CUcontext c)
{
    for (int d = 0; d < b->ndev; d++)
        if (c == &b->dev[d].ctx)
            return true;
    return false;
}

CUresult stream_device(struct books *b, CUstream s, int *device)
{
    if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) {
        struct CUctx_st *c = current_ctx(b);
        if (!c)
            return CUDA_ERROR_INVALID_CONTEXT;
        *device = c->device;
        return CUDA_SUCCESS;
    }
    uintptr_t key = (uintptr_t)s;
    struct CUstream_st *found;
    HASH_FIND(hh, b->streams, &key, sizeof key, found);
    if (!found)
        return CUDA_ERROR_INVALID_HANDLE;
    *device = found->device;
    return CUDA_SUCCESS;
}

/* ---- initialisation and devices ---- */

static int device_count(void)
{
    return books()->ndev;
}

/* Other entry points work without cuInit, so simple test programs need not call it. Tools
 * named by CUDA_INJECTION64_PATH are loaded here, as by NVIDIA's driver. */
CUresult cuInit(unsigned int flags)
{
    if (flags)
        return CUDA_ERROR_INVALID_VALUE;
    if (!device_count())
        return CUDA_ERROR_NO_DEVICE;
    trace_inject();
    return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *version)
{
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = DRIVER_VERSION;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = device_count();
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "Stand-in GPU %d", dev);
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    struct books *b = books();
    if (!valid_device(b, dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = b->capacity;
    return CUDA_SUCCESS;
}

/* Deterministic, so snapshots from two runs on one host name the same GPU, and distinct across
 * hosts, as physical GPUs are: "stand-in-gpu", three bytes of the host name's FNV-1a hash (low
 * byte first), the ordinal. GPU-7374616e-642d-696e-2d67-7075hhhhhh<dd>. */
static CUresult device_uuid(CUuuid *uuid, CUdevice dev)
{
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    uint32_t h = 2166136261u;
    for (const char *p = host; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    memcpy(uuid->bytes, "stand-in-gpu", 12);
    for (int i = 0; i < 3; i++)
        uuid->bytes[12 + i] = (char)(h >> (8 * i));
    uuid->bytes[15] = (char)dev;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    return device_uuid(uuid, dev);
}

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    return device_uuid(uuid, dev);
}

/* Bus dev + 1, as CU_DEVICE_ATTRIBUTE_PCI_BUS_ID says; truncated to len like the real one. */
CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    if (!pciBusId || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(pciBusId, (size_t)len, "0000:%02x:00.0", dev + 1);
    return CUDA_SUCCESS;
}

/* Figures of an H100-class part, for programs that size their work from them. */
CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    int v;
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        v = 1024;
        break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
        v = 49152;
        break;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY:
        v = 65536;
        break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
        v = 32;
        break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
        v = 1980000;
        break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT:
        v = (int)BLOCK_ALIGN;
        break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
        v = 132;
        break;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED:
        v = 0;
        break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
        v = 1;
        break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
        v = dev + 1;
        break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
        v = 0;
        break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
        v = 0;
        break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
        v = 2619000;
        break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
        v = 5120;
        break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
        v = 50 << 20;
        break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
        v = 1;
        break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT:
        v = 32;
        break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
        v = 9;
        break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
        v = 0;
        break;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
        v = 1;
        break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
        v = 1;
        break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
        v = 1;
        break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
        v = 1;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    *pi = v;
    return CUDA_SUCCESS;
}

/* ---- contexts: one primary context per device ---- */

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    struct books *b = lock_books();
    CUresult r = CUDA_ERROR_INVALID_DEVICE;
    if (valid_device(b, dev)) {
        b->dev[dev].ctx.refs++;
        *pctx = &b->dev[dev].ctx;
        r = CUDA_SUCCESS;
    }
    unlock_books(b);
    return r;
}

static CUresult primary_release(CUdevice dev)
{
    struct books *b = lock_books();
    CUresult r = CUDA_ERROR_INVALID_DEVICE;
    if (valid_device(b, dev)) {
        r = b->dev[dev].ctx.refs > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
        if (r == CUDA_SUCCESS)
            b->dev[dev].ctx.refs--;
    }
    unlock_books(b);
    return r;
}

/* The 7000 entry point, which NVIDIA's runtime still asks for, has the contract of _v2. */
CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return primary_release(dev);
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    return primary_release(dev);
}

/* Contexts are per thread and their devices fixed: no lock. */
CUresult cuCtxSetCurrent(CUcontext ctx)
{
    if (ctx && !valid_ctx(books(), ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    tls_ctx = ctx;
    tls_ctx_chosen = true;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = current_ctx(books());
    return CUDA_SUCCESS;
}

static atomic_ulong device_queries;

void count_device_query(void)
{
    atomic_store_explicit(&device_queries,
                          atomic_load_explicit(&device_queries, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

__attribute__((visibility("default"))) unsigned long standin_device_queries(void)
{
    return atomic_load_explicit(&device_queries, memory_order_relaxed);
}

/* ctx NULL: the current context. */
static CUresult ctx_device(CUdevice *device, CUcontext ctx)
{
    count_device_query();
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    struct books *b = books();
    CUcontext c = ctx ? ctx : current_ctx(b);
    if (!c || !valid_ctx(b, c))
        return CUDA_ERROR_INVALID_CONTEXT;
    *device = c->device;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device)
{
    return ctx_device(device, NULL);
}

CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    return ctx_device(device, ctx);
}

/* Nothing runs, so synchronising only checks there is a context to synchronise. */
CUresult cuCtxSynchronize(void)
{
    CUdevice unused;
    return ctx_device(&unused, NULL);
}

CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    CUdevice unused;
    return ctx_device(&unused, ctx);
}

/* ---- streams: nothing runs, so a stream only remembers its device ---- */

CUresult cuStreamCreate(CUstream *phStream, unsigned int flags)
{
    if (!phStream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    struct books *b = lock_books();
    struct CUctx_st *c = current_ctx(b);
    CUresult r = CUDA_ERROR_INVALID_CONTEXT;
    if (c) {
        struct CUstream_st *s = malloc(sizeof *s);
        r = CUDA_ERROR_OUT_OF_MEMORY;
        if (s) {
            s->key = (uintptr_t)s;
            s->device = c->device;
            HASH_ADD(hh, b->streams, key, sizeof s->key, s);
            *phStream = s;
            r = CUDA_SUCCESS;
        }
    }
    unlock_books(b);
    return r;
}

CUresult cuStreamDestroy_v2(CUstream hStream)
{
    struct books *b = lock_books();
    uintptr_t key = (uintptr_t)hStream;
    struct CUstream_st *s;
    HASH_FIND(hh, b->streams, &key, sizeof key, s);
    if (s)
        HASH_DEL(b->streams, s);
    unlock_books(b);
    free(s);
    return s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult locked_stream_device(CUstream hStream, CUdevice *device)
{
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    struct books *b = lock_books();
    CUresult r = stream_device(b, hStream, device);
    unlock_books(b);
    return r;
}

CUresult cuStreamGetDevice(CUstream hStream, CUdevice *device)
{
    return locked_stream_device(hStream, device);
}

CUresult cuStreamGetDevice_ptsz(CUstream hStream, CUdevice *device)
{
    return locked_stream_device(hStream, device);
}

CUresult cuStreamSynchronize(CUstream hStream)
{
    CUdevice unused;
    return locked_stream_device(hStream, &unused);
}

CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
    return cuStreamSynchronize(hStream);
}

/* ---- events: nothing runs, so an event is complete as soon as it is recorded ---- */

#define EVENT_MAGIC 0x45564e54u

struct CUevent_st {
    unsigned magic;
};

CUresult cuEventCreate(CUevent *phEvent, unsigned int flags)
{
    (void)flags;
    if (!phEvent)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUevent_st *e = malloc(sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->magic = EVENT_MAGIC;
    *phEvent = e;
    return CUDA_SUCCESS;
}

static bool event_ok(CUevent hEvent)
{
    return hEvent && hEvent->magic == EVENT_MAGIC;
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    CUdevice unused;
    return event_ok(hEvent) ? locked_stream_device(hStream, &unused) : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
    return cuEventRecord(hEvent, hStream);
}

CUresult cuEventSynchronize(CUevent hEvent)
{
    return event_ok(hEvent) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuEventDestroy_v2(CUevent hEvent)
{
    if (!event_ok(hEvent))
        return CUDA_ERROR_INVALID_HANDLE;
    hEvent->magic = 0;
    free(hEvent);
    return CUDA_SUCCESS;
}

/* ---- errors ---- */

static const struct {
    CUresult code;
    const char *name, *text;
} errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static CUresult describe(CUresult error, const char **out, bool name)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
        if (errors[i].code == error) {
            *out = name ? errors[i].name : errors[i].text;
            return CUDA_SUCCESS;
        }
    }
    *out = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    return describe(error, pStr, false);
}

CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    return describe(error, pStr, true);
}
