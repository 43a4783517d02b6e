/* The driver's copies, host registration and waits, reached by name or through the routes of
 * resolve.c, each with its per-thread default stream variant. A copy made underneath a wrapped
 * runtime copy is the same copy and is not counted again. */
/* Declares every name as libcuda exports it (cuMemcpyHtoD_v2 and cuMemcpyHtoD_v2_ptds, both
 * cuMemcpyBatchAsync forms ...), not the macro-renamed forms an application sees. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include "copies.h"
#include "pinned.h"
#include "resolve.h"

#define REAL(name) ((__typeof__(&name))vt_real_driver(VT_DRV_##name))

/* Without libcuda a wrapper answers as a driver that is not initialised. */
#define HOOK(name, params, args, note)                                                             \
    VT_COPY_HOOK(CUresult, CUDA_SUCCESS, CUDA_ERROR_NOT_INITIALIZED, REAL(name), name, params,     \
                 args, note)

static vt_copy_side dev(CUdeviceptr p)
{
    return (vt_copy_side){VT_END_DEVICE, (uintptr_t)p};
}

static vt_copy_side host(const void *p)
{
    return (vt_copy_side){VT_END_HOST, (uintptr_t)p};
}

static vt_copy_side unified(CUdeviceptr p)
{
    return (vt_copy_side){VT_END_UNIFIED, (uintptr_t)p};
}

/* One end of a 2D or 3D copy: where its first byte is. */
static vt_copy_side end_of(CUmemorytype type, const void *h, CUdeviceptr d, size_t offset)
{
    switch (type) {
    case CU_MEMORYTYPE_HOST:
        return host((const char *)h + offset);
    case CU_MEMORYTYPE_DEVICE:
        return dev(d + offset);
    case CU_MEMORYTYPE_ARRAY:
        return dev(0);
    default:
        return unified(d + offset);
    }
}

static void note_2d(const CUDA_MEMCPY2D *c, uintptr_t how)
{
    vt_copy_note(
        end_of(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstY * c->dstPitch + c->dstXInBytes),
        end_of(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcY * c->srcPitch + c->srcXInBytes),
        (uint64_t)c->WidthInBytes * c->Height, how);
}

/* CUDA_MEMCPY3D and CUDA_MEMCPY3D_PEER name their fields alike. */
#define NOTE_3D(c, how)                                                                            \
    vt_copy_note(                                                                                  \
        end_of((c)->dstMemoryType, (c)->dstHost, (c)->dstDevice,                                   \
               ((c)->dstZ * (c)->dstHeight + (c)->dstY) * (c)->dstPitch + (c)->dstXInBytes),       \
        end_of((c)->srcMemoryType, (c)->srcHost, (c)->srcDevice,                                   \
               ((c)->srcZ * (c)->srcHeight + (c)->srcY) * (c)->srcPitch + (c)->srcXInBytes),       \
        (uint64_t)(c)->WidthInBytes *(c)->Height *(c)->Depth, how)

static void note_3d(const CUDA_MEMCPY3D *c, uintptr_t how)
{
    NOTE_3D(c, how);
}

static void note_3d_peer(const CUDA_MEMCPY3D_PEER *c, uintptr_t how)
{
    NOTE_3D(c, how);
}

static void note_batch(const CUdeviceptr *dsts, const CUdeviceptr *srcs, const size_t *sizes,
                       size_t count, uintptr_t how)
{
    for (size_t i = 0; i < count; i++)
        vt_copy_note(unified(dsts[i]), unified(srcs[i]), sizes[i], how);
}

static vt_copy_side operand(const CUmemcpy3DOperand *o)
{
    return o->type == CU_MEMCPY_OPERAND_TYPE_POINTER ? unified(o->op.ptr.ptr) : dev(0);
}

static void note_3d_batch(const CUDA_MEMCPY3D_BATCH_OP *ops, size_t n, uintptr_t how)
{
    for (size_t i = 0; i < n; i++)
        vt_copy_note(operand(&ops[i].dst), operand(&ops[i].src),
                     (uint64_t)ops[i].extent.width * ops[i].extent.height * ops[i].extent.depth,
                     how);
}

/* Unified addressing: the driver tells host from device by the pointer. An asynchronous form's
 * `pt`: whether it is the per-thread default stream's (_ptsz), where a null stream means that. */
#define UNIFIED(name)                                                                              \
    HOOK(name, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n),                                \
         vt_copy_note(unified(d), unified(s), n, VT_COPY_SYNC))
#define UNIFIED_ASYNC(name, pt)                                                                    \
    HOOK(name, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st),               \
         vt_copy_note(unified(d), unified(s), n, vt_copy_stream(st, pt)))
UNIFIED(cuMemcpy)
UNIFIED(cuMemcpy_ptds)
UNIFIED_ASYNC(cuMemcpyAsync, 0)
UNIFIED_ASYNC(cuMemcpyAsync_ptsz, 1)

#define PEER(name)                                                                                 \
    HOOK(name, (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n),               \
         (d, dc, s, sc, n), vt_copy_note(dev(d), dev(s), n, VT_COPY_SYNC))
#define PEER_ASYNC(name, pt)                                                                       \
    HOOK(name, (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream st),  \
         (d, dc, s, sc, n, st), vt_copy_note(dev(d), dev(s), n, vt_copy_stream(st, pt)))
PEER(cuMemcpyPeer)
PEER(cuMemcpyPeer_ptds)
PEER_ASYNC(cuMemcpyPeerAsync, 0)
PEER_ASYNC(cuMemcpyPeerAsync_ptsz, 1)

#define HTOD(name)                                                                                 \
    HOOK(name, (CUdeviceptr d, const void *h, size_t n), (d, h, n),                                \
         vt_copy_note(dev(d), host(h), n, VT_COPY_SYNC))
#define HTOD_ASYNC(name, pt)                                                                       \
    HOOK(name, (CUdeviceptr d, const void *h, size_t n, CUstream st), (d, h, n, st),               \
         vt_copy_note(dev(d), host(h), n, vt_copy_stream(st, pt)))
#define DTOH(name)                                                                                 \
    HOOK(name, (void *h, CUdeviceptr s, size_t n), (h, s, n),                                      \
         vt_copy_note(host(h), dev(s), n, VT_COPY_SYNC))
#define DTOH_ASYNC(name, pt)                                                                       \
    HOOK(name, (void *h, CUdeviceptr s, size_t n, CUstream st), (h, s, n, st),                     \
         vt_copy_note(host(h), dev(s), n, vt_copy_stream(st, pt)))
#define DTOD(name)                                                                                 \
    HOOK(name, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n),                                \
         vt_copy_note(dev(d), dev(s), n, VT_COPY_SYNC))
#define DTOD_ASYNC(name, pt)                                                                       \
    HOOK(name, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st),               \
         vt_copy_note(dev(d), dev(s), n, vt_copy_stream(st, pt)))
HTOD(cuMemcpyHtoD_v2)
HTOD(cuMemcpyHtoD_v2_ptds)
HTOD_ASYNC(cuMemcpyHtoDAsync_v2, 0)
HTOD_ASYNC(cuMemcpyHtoDAsync_v2_ptsz, 1)
DTOH(cuMemcpyDtoH_v2)
DTOH(cuMemcpyDtoH_v2_ptds)
DTOH_ASYNC(cuMemcpyDtoHAsync_v2, 0)
DTOH_ASYNC(cuMemcpyDtoHAsync_v2_ptsz, 1)
DTOD(cuMemcpyDtoD_v2)
DTOD(cuMemcpyDtoD_v2_ptds)
DTOD_ASYNC(cuMemcpyDtoDAsync_v2, 0)
DTOD_ASYNC(cuMemcpyDtoDAsync_v2_ptsz, 1)

#define COPY_2D(name) HOOK(name, (const CUDA_MEMCPY2D *c), (c), note_2d(c, VT_COPY_SYNC))
#define COPY_2D_ASYNC(name, pt)                                                                    \
    HOOK(name, (const CUDA_MEMCPY2D *c, CUstream st), (c, st), note_2d(c, vt_copy_stream(st, pt)))
COPY_2D(cuMemcpy2D_v2)
COPY_2D(cuMemcpy2D_v2_ptds)
COPY_2D(cuMemcpy2DUnaligned_v2)
COPY_2D(cuMemcpy2DUnaligned_v2_ptds)
COPY_2D_ASYNC(cuMemcpy2DAsync_v2, 0)
COPY_2D_ASYNC(cuMemcpy2DAsync_v2_ptsz, 1)

#define COPY_3D(name, type, note) HOOK(name, (const type *c), (c), note(c, VT_COPY_SYNC))
#define COPY_3D_ASYNC(name, type, note, pt)                                                        \
    HOOK(name, (const type *c, CUstream st), (c, st), note(c, vt_copy_stream(st, pt)))
COPY_3D(cuMemcpy3D_v2, CUDA_MEMCPY3D, note_3d)
COPY_3D(cuMemcpy3D_v2_ptds, CUDA_MEMCPY3D, note_3d)
COPY_3D_ASYNC(cuMemcpy3DAsync_v2, CUDA_MEMCPY3D, note_3d, 0)
COPY_3D_ASYNC(cuMemcpy3DAsync_v2_ptsz, CUDA_MEMCPY3D, note_3d, 1)
COPY_3D(cuMemcpy3DPeer, CUDA_MEMCPY3D_PEER, note_3d_peer)
COPY_3D(cuMemcpy3DPeer_ptds, CUDA_MEMCPY3D_PEER, note_3d_peer)
COPY_3D_ASYNC(cuMemcpy3DPeerAsync, CUDA_MEMCPY3D_PEER, note_3d_peer, 0)
COPY_3D_ASYNC(cuMemcpy3DPeerAsync_ptsz, CUDA_MEMCPY3D_PEER, note_3d_peer, 1)

/* Batches: 12.8's with the index of a failed copy, 13.0's (_v2) without. */
#define BATCH_PARAMS                                                                               \
    CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t count, CUmemcpyAttributes *attrs,            \
        size_t *idxs, size_t nattrs
#define BATCH(name, pt)                                                                            \
    HOOK(name, (BATCH_PARAMS, size_t * fail, CUstream st),                                         \
         (d, s, n, count, attrs, idxs, nattrs, fail, st),                                          \
         note_batch(d, s, n, count, vt_copy_stream(st, pt)))
#define BATCH_V2(name, pt)                                                                         \
    HOOK(name, (BATCH_PARAMS, CUstream st), (d, s, n, count, attrs, idxs, nattrs, st),             \
         note_batch(d, s, n, count, vt_copy_stream(st, pt)))
#define BATCH_3D(name, pt)                                                                         \
    HOOK(name,                                                                                     \
         (size_t nops, CUDA_MEMCPY3D_BATCH_OP * ops, size_t * fail, unsigned long long flags,      \
          CUstream st),                                                                            \
         (nops, ops, fail, flags, st), note_3d_batch(ops, nops, vt_copy_stream(st, pt)))
#define BATCH_3D_V2(name, pt)                                                                      \
    HOOK(name, (size_t nops, CUDA_MEMCPY3D_BATCH_OP * ops, unsigned long long flags, CUstream st), \
         (nops, ops, flags, st), note_3d_batch(ops, nops, vt_copy_stream(st, pt)))
BATCH(cuMemcpyBatchAsync, 0)
BATCH(cuMemcpyBatchAsync_ptsz, 1)
BATCH_V2(cuMemcpyBatchAsync_v2, 0)
BATCH_V2(cuMemcpyBatchAsync_v2_ptsz, 1)
BATCH_3D(cuMemcpy3DBatchAsync, 0)
BATCH_3D(cuMemcpy3DBatchAsync_ptsz, 1)
BATCH_3D_V2(cuMemcpy3DBatchAsync_v2, 0)
BATCH_3D_V2(cuMemcpy3DBatchAsync_v2_ptsz, 1)

/* Waits: the downloads into pinned memory the thread queued there are done once they return.
 * A context and an event stand for every stream (which stream an event was recorded on is not
 * followed). */
HOOK(cuStreamSynchronize, (CUstream st), (st), vt_copy_waited(vt_copy_stream(st, 0)))
HOOK(cuStreamSynchronize_ptsz, (CUstream st), (st), vt_copy_waited(vt_copy_stream(st, 1)))
HOOK(cuEventSynchronize, (CUevent e), (e), vt_copy_waited(VT_COPY_EVERY_STREAM))
HOOK(cuCtxSynchronize, (void), (), vt_copy_waited(VT_COPY_EVERY_STREAM))
HOOK(cuCtxSynchronize_v2, (CUcontext c), (c), vt_copy_waited(VT_COPY_EVERY_STREAM))

/* Registered host memory is pinned: copies from it are counted as such. Removed before the
 * real unregister, after which the range may be anything. */
HOOK(cuMemHostRegister_v2, (void *p, size_t size, unsigned int flags), (p, size, flags),
     vt_pinned_add((uintptr_t)p, size))

VT_EXPORT CUresult cuMemHostUnregister(void *p)
{
    __typeof__(&cuMemHostUnregister) real = REAL(cuMemHostUnregister);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    int outer = vt_guard_enter();
    if (outer)
        vt_pinned_remove((uintptr_t)p);
    CUresult rc = real(p);
    vt_guard_leave();
    return rc;
}

void *vt_copy_wrapper(vt_drv which)
{
    static void *const wrappers[VT_DRV_COUNT] = {
#define VT_DRV_WRAPPER(name) [VT_DRV_##name] = (void *)name,
        VT_DRIVER_COPIES(VT_DRV_WRAPPER) VT_DRIVER_WAITS(VT_DRV_WRAPPER)
#undef VT_DRV_WRAPPER
    };
    return (unsigned)which < VT_DRV_COUNT ? wrappers[which] : NULL;
}
