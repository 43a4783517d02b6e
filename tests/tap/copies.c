/* Copies by every route, over the stand-in: the runtime by name (with _ptds and _ptsz forms,
 * 2D, 3D, peer, batches, cudaMemcpyDefault), the driver by name, dlsym on a libcuda handle,
 * cuGetProcAddress in both forms, cudaGetDriverEntryPoint; host memory pinned by allocation and
 * by registration (runtime and driver), pageable, and unregistered again. Then three training
 * steps that each upload 10 MiB, PAGEABLE MiB of it from pageable memory and the rest from
 * pinned memory, copy on the device, read one value back synchronously, and start a thread
 * that copies once and ends (its counts outlive it). A worker forked between the two makes one
 * copy of its own; a pageable load of 64 MiB is held throughout. Downloads into pinned memory
 * queued on a stream are waited for when the thread later waits for that stream (by the runtime,
 * the driver, either default stream), an event or the context, and only when that wait
 * succeeds; a worker forked with some queued does not wait for them.
 *
 * The program keeps its own account of what each copy was and prints it, in the snapshot's
 * shape, as one line of JSON: {"copies": {...}, "worker": PID}.
 * usage: tap_copies [PAGEABLE] (MiB, 0 to 10, default 7) */
#define CUDA_ENABLE_DEPRECATED
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "vramtap.h"

#undef cuGetProcAddress
CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);
cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                                 cudaStream_t s);
cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src, size_t spitch,
                                   size_t width, size_t height, enum cudaMemcpyKind kind,
                                   cudaStream_t s);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s);

enum { H2D_PAGEABLE, H2D_PINNED, D2H_PAGEABLE, D2H_PINNED, D2D, H2H, NKINDS };
enum { SETUP, FORWARD, BACKWARD, OPTIMIZER, OTHER, NPHASES };
enum { STEPS = 3, MiB = 1 << 20, LOAD = 64 * MiB };

typedef struct {
    unsigned long long bytes[NKINDS], calls[NKINDS], sync_d2h;
} counts;

static counts total, phase[NPHASES], step[STEPS + 1];
static int now_phase = SETUP, now_step;

/* One copy the program made, as it knows it. */
static void did(int kind, size_t bytes, int waited)
{
    counts *all[] = {&total, &phase[now_phase], &step[now_step]};
    for (int i = 0; i < 3; i++) {
        all[i]->bytes[kind] += bytes;
        all[i]->calls[kind]++;
        all[i]->sync_d2h += (unsigned long long)waited;
    }
}

static void print_pair(const char *name, const counts *c, int pageable, int pinned)
{
    printf("\"%s\": {\"pageable_bytes\": %llu, \"pinned_bytes\": %llu, \"pageable_calls\": %llu, "
           "\"pinned_calls\": %llu}, ",
           name, c->bytes[pageable], c->bytes[pinned], c->calls[pageable], c->calls[pinned]);
}

static void print_counts(const counts *c)
{
    printf("{");
    print_pair("h2d", c, H2D_PAGEABLE, H2D_PINNED);
    print_pair("d2h", c, D2H_PAGEABLE, D2H_PINNED);
    printf("\"d2d\": {\"bytes\": %llu, \"calls\": %llu}, \"h2h\": {\"bytes\": %llu, \"calls\": "
           "%llu}, \"sync_d2h_calls\": %llu}",
           c->bytes[D2D], c->calls[D2D], c->bytes[H2H], c->calls[H2H], c->sync_d2h);
}

static void begin(int p, const char *name)
{
    CHECK_EQ_INT(vramtap_phase_begin(name), VRAMTAP_OK);
    now_phase = p;
}

static void end(const char *name)
{
    CHECK_EQ_INT(vramtap_phase_end(name), VRAMTAP_OK);
    now_phase = OTHER;
    if (!strcmp(name, VRAMTAP_OPTIMIZER))
        now_step++;
}

/* An asynchronous download into pinned memory: waited for later, by a wait for its stream, an
 * event or the device (waited). */
static void did_queue(size_t bytes)
{
    did(D2H_PINNED, bytes, 0);
}

/* A wait that succeeded and ended downloads queued into pinned memory: one download waited for,
 * however many it ended. Which waits end which downloads is written out by hand at each wait:
 * a wait for a stream ends those queued there (a null stream: the legacy default stream, or in
 * a _ptsz form the thread's own), an event or the device ends all; the library follows 4
 * streams at a time, and those queued on more streams at once only a wait for all ends. */
static void waited(void)
{
    counts *all[] = {&total, &phase[now_phase], &step[now_step]};
    for (int i = 0; i < 3; i++)
        all[i]->sync_d2h++;
}

/* The address the preloaded library exports under `name`: what every route must hand out. */
static void *wrapper(const char *name)
{
    return dlsym(RTLD_DEFAULT, name);
}

static char *pageable, *pinned, *registered, *registered_by_driver;
static char *dev0, *dev1;

static void runtime_routes(void)
{
    CHECK_EQ_INT(cudaMemcpy(dev0, pageable, 1000, cudaMemcpyHostToDevice), cudaSuccess);
    did(H2D_PAGEABLE, 1000, 0);
    CHECK_EQ_INT(cudaMemcpy_ptds(pageable, dev0, 1100, cudaMemcpyDeviceToHost), cudaSuccess);
    did(D2H_PAGEABLE, 1100, 1);
    CHECK_EQ_INT(cudaMemcpyAsync(dev0, pinned + 64, 1200, cudaMemcpyHostToDevice, 0), cudaSuccess);
    did(H2D_PINNED, 1200, 0);
    /* into pinned memory, asynchronous: not waited for yet */
    CHECK_EQ_INT(cudaMemcpyAsync_ptsz(pinned, dev0, 1300, cudaMemcpyDeviceToHost, 0), cudaSuccess);
    did_queue(1300);
    CHECK_EQ_INT(cudaMemcpy(dev0 + 4096, dev0, 1400, cudaMemcpyDeviceToDevice), cudaSuccess);
    did(D2D, 1400, 0);
    CHECK_EQ_INT(cudaMemcpy(pageable + 4096, pinned, 1500, cudaMemcpyHostToHost), cudaSuccess);
    did(H2H, 1500, 0);
    /* Unified addressing: the books know registered memory inside its range, and the start of a
     * device allocation; the driver knows an interior device address. */
    CHECK_EQ_INT(cudaMemcpy(dev0, registered + 100, 1600, cudaMemcpyDefault), cudaSuccess);
    did(H2D_PINNED, 1600, 0);
    CHECK_EQ_INT(cudaMemcpy(pageable, dev0 + 8192, 1700, cudaMemcpyDefault), cudaSuccess);
    did(D2H_PAGEABLE, 1700, 1);

    CHECK_EQ_INT(cudaMemcpy2D(dev0, 256, pageable, 256, 128, 8, cudaMemcpyHostToDevice),
                 cudaSuccess);
    did(H2D_PAGEABLE, 128 * 8, 0);
    CHECK_EQ_INT(cudaMemcpy2DAsync_ptsz(pinned, 64, dev0, 64, 64, 4, cudaMemcpyDeviceToHost, 0),
                 cudaSuccess);
    did_queue(64 * 4);
    struct cudaMemcpy3DParms p3 = {.srcPtr = {.ptr = pinned, .pitch = 64, .xsize = 32, .ysize = 4},
                                   .dstPtr = {.ptr = dev0, .pitch = 64, .xsize = 32, .ysize = 4},
                                   .extent = {.width = 32, .height = 4, .depth = 2},
                                   .kind = cudaMemcpyHostToDevice};
    CHECK_EQ_INT(cudaMemcpy3D(&p3), cudaSuccess);
    did(H2D_PINNED, 32 * 4 * 2, 0);
    p3.srcPtr.ptr = dev0 + 65536;
    p3.kind = cudaMemcpyDeviceToDevice;
    p3.extent = (struct cudaExtent){16, 2, 2};
    CHECK_EQ_INT(cudaMemcpy3DAsync(&p3, 0), cudaSuccess);
    did(D2D, 16 * 2 * 2, 0);

    CHECK_EQ_INT(cudaMemcpyPeer(dev1, 1, dev0, 0, 2000), cudaSuccess);
    did(D2D, 2000, 0);
    CHECK_EQ_INT(cudaMemcpyPeerAsync(dev0, 0, dev1, 1, 2100, 0), cudaSuccess);
    did(D2D, 2100, 0);
    struct cudaMemcpy3DPeerParms pp = {.srcPtr = {.ptr = dev0, .pitch = 8, .xsize = 8, .ysize = 2},
                                       .srcDevice = 0,
                                       .dstPtr = {.ptr = dev1, .pitch = 8, .xsize = 8, .ysize = 2},
                                       .dstDevice = 1,
                                       .extent = {8, 2, 1}};
    CHECK_EQ_INT(cudaMemcpy3DPeer(&pp), cudaSuccess);
    did(D2D, 16, 0);

    void *dsts[] = {dev0, pinned + 4096, dev0 + 4096};
    const void *srcs[] = {pageable, dev0, dev0 + 8192};
    size_t sizes[] = {300, 400, 500};
    struct cudaMemcpyAttributes attr = {.srcAccessOrder = cudaMemcpySrcAccessOrderStream};
    size_t idx = 0;
    CHECK_EQ_INT(cudaMemcpyBatchAsync(dsts, srcs, sizes, 3, &attr, &idx, 1, 0), cudaSuccess);
    did(H2D_PAGEABLE, 300, 0);
    did_queue(400);
    did(D2D, 500, 0);
    struct cudaMemcpy3DBatchOp op = {
        .src = {.type = cudaMemcpyOperandTypePointer, .op.ptr = {.ptr = pinned}},
        .dst = {.type = cudaMemcpyOperandTypePointer, .op.ptr = {.ptr = dev0}},
        .extent = {10, 1, 1},
        .srcAccessOrder = cudaMemcpySrcAccessOrderStream};
    CHECK_EQ_INT(cudaMemcpy3DBatchAsync(1, &op, 0, 0), cudaSuccess);
    did(H2D_PINNED, 10, 0);

    /* refused: not counted */
    CHECK(cudaMemcpy((void *)0x10, pageable, 100, cudaMemcpyHostToDevice) != cudaSuccess);
}

typedef CUresult (*htod_fn)(CUdeviceptr, const void *, size_t);
typedef CUresult (*dtoh_fn)(void *, CUdeviceptr, size_t);
typedef CUresult (*htod_async_fn)(CUdeviceptr, const void *, size_t, CUstream);
typedef CUresult (*dtod_fn)(CUdeviceptr, CUdeviceptr, size_t);
typedef CUresult (*batch_v1_fn)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t,
                                CUmemcpyAttributes *, size_t *, size_t, size_t *, CUstream);

static void driver_routes(void)
{
    CUdeviceptr d0 = (CUdeviceptr)dev0;
    CHECK_EQ_INT(cuMemcpyHtoD(d0, pinned, 2200), CUDA_SUCCESS);
    did(H2D_PINNED, 2200, 0);
    /* asynchronous into pageable memory: the driver returns once it is done */
    CHECK_EQ_INT(cuMemcpyDtoHAsync(pageable, d0, 2300, 0), CUDA_SUCCESS);
    did(D2H_PAGEABLE, 2300, 1);
    CHECK_EQ_INT(cuMemcpyDtoD(d0 + 4096, d0, 2400), CUDA_SUCCESS);
    did(D2D, 2400, 0);
    CHECK_EQ_INT(cuMemcpy(d0, (CUdeviceptr)pageable, 2500), CUDA_SUCCESS);
    did(H2D_PAGEABLE, 2500, 0);
    CUDA_MEMCPY2D c2 = {.srcMemoryType = CU_MEMORYTYPE_DEVICE,
                        .srcDevice = d0,
                        .srcPitch = 64,
                        .dstMemoryType = CU_MEMORYTYPE_HOST,
                        .dstHost = pinned,
                        .dstPitch = 64,
                        .WidthInBytes = 50,
                        .Height = 2};
    CHECK_EQ_INT(cuMemcpy2D(&c2), CUDA_SUCCESS);
    did(D2H_PINNED, 100, 1);
    CUDA_MEMCPY3D c3 = {.srcMemoryType = CU_MEMORYTYPE_HOST,
                        .srcHost = pageable,
                        .srcPitch = 4,
                        .srcHeight = 4,
                        .dstMemoryType = CU_MEMORYTYPE_DEVICE,
                        .dstDevice = d0,
                        .dstPitch = 4,
                        .dstHeight = 4,
                        .WidthInBytes = 4,
                        .Height = 4,
                        .Depth = 4};
    CHECK_EQ_INT(cuMemcpy3D(&c3), CUDA_SUCCESS);
    did(H2D_PAGEABLE, 64, 0);
    CUdeviceptr bd[] = {d0}, bs[] = {(CUdeviceptr)pinned};
    size_t bn[] = {600}, idx = 0;
    CUmemcpyAttributes attr = {.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM};
    CHECK_EQ_INT(cuMemcpyBatchAsync(bd, bs, bn, 1, &attr, &idx, 1, 0), CUDA_SUCCESS);
    did(H2D_PINNED, 600, 0);

    /* dlsym on a libcuda handle */
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    CHECK(h != NULL);
    htod_fn htod = (htod_fn)dlsym(h, "cuMemcpyHtoD_v2");
    CHECK(htod == (htod_fn)wrapper("cuMemcpyHtoD_v2"));
    CHECK_EQ_INT(htod(d0, pageable, 2600), CUDA_SUCCESS);
    did(H2D_PAGEABLE, 2600, 0);

    /* cuGetProcAddress, both forms, with flags 2 for the per-thread default stream's */
    void *fn = NULL;
    CHECK_EQ_INT(cuGetProcAddress_v2("cuMemcpyDtoH", &fn, 3020, 0, NULL), CUDA_SUCCESS);
    CHECK(fn == wrapper("cuMemcpyDtoH_v2"));
    CHECK_EQ_INT(((dtoh_fn)fn)(pinned, d0, 2700), CUDA_SUCCESS);
    did(D2H_PINNED, 2700, 1);
    CHECK_EQ_INT(cuGetProcAddress_v2("cuMemcpyHtoDAsync", &fn, 7000,
                                     CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL),
                 CUDA_SUCCESS);
    CHECK(fn == wrapper("cuMemcpyHtoDAsync_v2_ptsz"));
    CHECK_EQ_INT(((htod_async_fn)fn)(d0, pageable, 2800, 0), CUDA_SUCCESS);
    did(H2D_PAGEABLE, 2800, 0);
    CHECK_EQ_INT(cuGetProcAddress("cuMemcpyBatchAsync", &fn, 12080, 0), CUDA_SUCCESS);
    CHECK(fn == wrapper("cuMemcpyBatchAsync"));
    size_t fail = 0;
    bn[0] = 700;
    CHECK_EQ_INT(((batch_v1_fn)fn)(bd, bs, bn, 1, &attr, &idx, 1, &fail, 0), CUDA_SUCCESS);
    did(H2D_PINNED, 700, 0);

    /* the runtime's driver entry points */
    enum cudaDriverEntryPointQueryResult q;
    CHECK_EQ_INT(cudaGetDriverEntryPoint("cuMemcpyDtoD", &fn, cudaEnableDefault, &q), cudaSuccess);
    CHECK(fn == wrapper("cuMemcpyDtoD_v2"));
    CHECK_EQ_INT(((dtod_fn)fn)(d0 + 4096, d0, 2900), CUDA_SUCCESS);
    did(D2D, 2900, 0);
}

/* Pinned by registration until unregistered: then the same memory is pageable again. */
static void registration(void)
{
    CHECK_EQ_INT(cudaHostUnregister(registered), cudaSuccess);
    CHECK_EQ_INT(cudaMemcpy(dev0, registered, 3000, cudaMemcpyHostToDevice), cudaSuccess);
    did(H2D_PAGEABLE, 3000, 0);
    CHECK_EQ_INT(cuMemcpyHtoD((CUdeviceptr)dev0, registered_by_driver + 8, 3100), CUDA_SUCCESS);
    did(H2D_PINNED, 3100, 0);
    CHECK_EQ_INT(cuMemHostUnregister(registered_by_driver), CUDA_SUCCESS);
    /* many pinned ranges at once (the ranges' table grows), one copied from inside */
    enum { MANY = 150 };
    void *many[MANY];
    for (int i = 0; i < MANY; i++)
        CHECK_EQ_INT(cudaHostAlloc(&many[i], 4096, cudaHostAllocDefault), cudaSuccess);
    CHECK_EQ_INT(cudaMemcpy(dev0, (char *)many[MANY / 2] + 100, 3200, cudaMemcpyHostToDevice),
                 cudaSuccess);
    did(H2D_PINNED, 3200, 0);
    for (int i = 0; i < MANY; i++)
        CHECK_EQ_INT(cudaFreeHost(many[i]), cudaSuccess);
}

/* Into a forward phase, or out of it: each wait below is counted at a moment of its own, apart
 * from the downloads it waits for and from the wait before. */
static void flip(void)
{
    if (now_phase == FORWARD)
        end(VRAMTAP_FORWARD);
    else
        begin(FORWARD, VRAMTAP_FORWARD);
}

/* Waits for downloads queued into pinned memory: PyTorch's .item() since 2.x (cudaMemcpyAsync
 * into a pinned buffer, then cudaStreamSynchronize), a wait for another stream, the default
 * streams, the context (runtime and driver, both versions), an event, a wait that fails, and
 * more streams at once than are followed. */
static void waits(void)
{
    cudaStream_t s[6];
    for (int i = 0; i < 6; i++)
        CHECK_EQ_INT(cudaStreamCreate(&s[i]), cudaSuccess);
    CUdeviceptr d0 = (CUdeviceptr)dev0;

    CHECK_EQ_INT(cudaMemcpyAsync(pinned, dev0, 4, cudaMemcpyDeviceToHost, s[0]), cudaSuccess);
    did_queue(4);
    flip();
    CHECK_EQ_INT(cudaStreamSynchronize(s[0]), cudaSuccess);
    waited();

    CHECK_EQ_INT(cuMemcpyDtoHAsync(pinned, d0, 8, s[0]), CUDA_SUCCESS);
    did_queue(8);
    /* nothing queued on s[1]: not a wait for a download */
    flip();
    CHECK_EQ_INT(cudaStreamSynchronize(s[1]), cudaSuccess);
    /* runtime_routes' two on the per-thread default stream */
    flip();
    CHECK_EQ_INT(cuStreamSynchronize(CU_STREAM_PER_THREAD), CUDA_SUCCESS);
    waited();
    CHECK_EQ_INT(cudaMemcpyAsync_ptsz(pinned, dev0, 12, cudaMemcpyDeviceToHost, 0), cudaSuccess);
    did_queue(12);
    /* the batch of runtime_routes on the legacy stream */
    flip();
    CHECK_EQ_INT(cudaStreamSynchronize(0), cudaSuccess);
    waited();
    /* the 12 bytes just queued */
    flip();
    CHECK_EQ_INT(cudaStreamSynchronize_ptsz(0), cudaSuccess);
    waited();
    /* the 8 bytes on s[0] */
    flip();
    CHECK_EQ_INT(cudaDeviceSynchronize(), cudaSuccess);
    waited();

    CUevent e;
    CHECK_EQ_INT(cuEventCreate(&e, 0), CUDA_SUCCESS);
    CHECK_EQ_INT(cuMemcpyDtoHAsync(pinned, d0, 16, s[1]), CUDA_SUCCESS);
    did_queue(16);
    CHECK_EQ_INT(cuEventRecord(e, s[1]), CUDA_SUCCESS);
    flip();
    CHECK_EQ_INT(cuEventSynchronize(e), CUDA_SUCCESS);
    waited();
    CHECK_EQ_INT(cuEventDestroy(e), CUDA_SUCCESS);

    /* refused: nothing waited for */
    CHECK_EQ_INT(cuMemcpyDtoHAsync(pinned, d0, 20, s[1]), CUDA_SUCCESS);
    did_queue(20);
    flip();
    CHECK(cuStreamSynchronize((CUstream)(uintptr_t)0x7e57) != CUDA_SUCCESS);
    flip();
    CHECK_EQ_INT(cuCtxSynchronize_v2(NULL), CUDA_SUCCESS);
    waited();

    /* six streams at once: the library follows s[0] to s[3]; s[4] and s[5] are ended only by a
     * wait for all */
    for (int i = 0; i < 6; i++) {
        CHECK_EQ_INT(cudaMemcpyAsync(pinned, dev0, 24, cudaMemcpyDeviceToHost, s[i]), cudaSuccess);
        did_queue(24);
    }
    flip();
    CHECK_EQ_INT(cuStreamSynchronize(s[0]), CUDA_SUCCESS);
    waited();
    flip();
    CHECK_EQ_INT(cuStreamSynchronize(s[5]), CUDA_SUCCESS);
    /* s[1] to s[5]: one wait */
    flip();
    CHECK_EQ_INT(cuCtxSynchronize(), CUDA_SUCCESS);
    waited();

    for (int i = 0; i < 6; i++)
        CHECK_EQ_INT(cudaStreamDestroy(s[i]), cudaSuccess);
    if (now_phase == FORWARD)
        end(VRAMTAP_FORWARD);
    /* left queued for the worker forked next, which does not wait for it */
    CHECK_EQ_INT(cuMemcpyDtoHAsync(pinned, d0, 28, 0), CUDA_SUCCESS);
    did_queue(28);
}

/* A thread that copies once on the device and ends, in the phase its starter is in. */
static void *copy_and_end(void *arg)
{
    (void)arg;
    int rc = cudaMemcpy(dev0 + 30 * MiB, dev0, 512, cudaMemcpyDeviceToDevice);
    return (void *)(intptr_t)rc;
}

/* A data-loader-like worker that makes one copy of its own: its snapshot holds only that. */
static pid_t fork_worker(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        void *d;
        int ok = cudaMalloc(&d, MiB) == cudaSuccess &&
                 cudaMemcpy(d, pageable, MiB, cudaMemcpyHostToDevice) == cudaSuccess &&
                 cudaDeviceSynchronize() == cudaSuccess;
        exit(ok ? 0 : 3);
    }
    return pid;
}

int main(int argc, char **argv)
{
    size_t from_pageable = (argc > 1 ? (size_t)atoi(argv[1]) : 7) * MiB;
    if (from_pageable > 10 * MiB)
        return 2;
    pageable = malloc(LOAD);
    CHECK(pageable != NULL);
    if (!pageable)
        return CHECK_DONE();
    memset(pageable, 1, LOAD);
    registered = malloc(MiB);
    registered_by_driver = malloc(MiB);
    CHECK_EQ_INT(cudaMallocHost((void **)&pinned, 10 * MiB), cudaSuccess);
    CHECK_EQ_INT(cudaHostRegister(registered, MiB, cudaHostRegisterDefault), cudaSuccess);
    CHECK_EQ_INT(cuMemHostRegister(registered_by_driver, MiB, 0), CUDA_SUCCESS);
    CHECK_EQ_INT(cudaMalloc((void **)&dev0, 32 * MiB), cudaSuccess);
    CHECK_EQ_INT(cudaSetDevice(1), cudaSuccess);
    CHECK_EQ_INT(cudaMalloc((void **)&dev1, MiB), cudaSuccess);
    CHECK_EQ_INT(cudaSetDevice(0), cudaSuccess);

    runtime_routes();
    driver_routes();
    registration();
    waits();
    pid_t worker = fork_worker();
    CHECK(worker > 0);
    CHECK_EQ_INT(cudaStreamSynchronize(0), cudaSuccess);
    waited();

    for (int s = 0; s < STEPS; s++) {
        /* the batch: 10 MiB, from pageable and pinned memory */
        CHECK_EQ_INT(cudaMemcpy(dev0, pageable, from_pageable, cudaMemcpyHostToDevice),
                     cudaSuccess);
        if (from_pageable)
            did(H2D_PAGEABLE, from_pageable, 0);
        CHECK_EQ_INT(cudaMemcpyAsync(dev0 + 10 * MiB, pinned, 10 * MiB - from_pageable,
                                     cudaMemcpyHostToDevice, 0),
                     cudaSuccess);
        if (from_pageable < 10 * MiB)
            did(H2D_PINNED, 10 * MiB - from_pageable, 0);
        begin(FORWARD, VRAMTAP_FORWARD);
        CHECK_EQ_INT(cudaMemcpyAsync(dev0 + 24 * MiB, dev0, MiB, cudaMemcpyDeviceToDevice, 0),
                     cudaSuccess);
        did(D2D, MiB, 0);
        end(VRAMTAP_FORWARD);
        begin(BACKWARD, VRAMTAP_BACKWARD);
        pthread_t t;
        void *rc = (void *)1;
        CHECK_EQ_INT(pthread_create(&t, NULL, copy_and_end, NULL), 0);
        CHECK_EQ_INT(pthread_join(t, &rc), 0);
        CHECK(rc == (void *)0);
        did(D2D, 512, 0);
        end(VRAMTAP_BACKWARD);
        begin(OPTIMIZER, VRAMTAP_OPTIMIZER);
        /* loss.item(): a synchronous read of one value */
        float loss;
        CHECK_EQ_INT(cudaMemcpy(&loss, dev0, sizeof loss, cudaMemcpyDeviceToHost), cudaSuccess);
        did(D2H_PAGEABLE, sizeof loss, 1);
        end(VRAMTAP_OPTIMIZER);
    }
    int status = -1;
    CHECK_EQ_INT(waitpid(worker, &status, 0), worker);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    printf("{\"worker\": %d, \"load\": %d, \"copies\": {\"total\": ", (int)worker, LOAD);
    print_counts(&total);
    printf(", \"phases\": {");
    static const char *const names[] = {"setup", "forward", "backward", "optimizer", "other"};
    for (int p = 0; p < NPHASES; p++) {
        printf("%s\"%s\": ", p ? ", " : "", names[p]);
        print_counts(&phase[p]);
    }
    printf("}, \"steps\": [");
    for (int s = 0; s < STEPS; s++) {
        printf("%s{\"step\": %d, \"copies\": ", s ? ", " : "", s);
        print_counts(&step[s]);
        printf("}");
    }
    printf("]}}\n");
    CHECK_EQ_INT(cudaFreeHost(pinned), cudaSuccess);
    free(registered);
    free(registered_by_driver);
    free(pageable);
    return CHECK_DONE();
}
