/* libcudart.so.13 stand-in: copies, host registration and the waits on a stream. Each runtime copy
 * is one call of a driver copy through the pointers looked up at start-up, the per-thread default
 * stream forms (_ptds, _ptsz) through the lookups made with flags 2, as NVIDIA's runtime looks
 * them up (../shared/reference/cudart13-driver-lookups.txt). */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>

#include "runtime.h"

#include <stdlib.h>

/* [0]: the legacy default stream's, [1]: the per-thread default stream's. */
static struct {
    PFN_cuMemHostRegister_v6050 hostRegister;
    PFN_cuMemHostUnregister_v4000 hostUnregister;
    PFN_cuMemcpy_v4000 memcpy[2];
    PFN_cuMemcpyAsync_v4000 memcpyAsync[2];
    PFN_cuMemcpyPeer_v4000 peer[2];
    PFN_cuMemcpyPeerAsync_v4000 peerAsync[2];
    PFN_cuMemcpyHtoD_v3020 htod[2];
    PFN_cuMemcpyHtoDAsync_v3020 htodAsync[2];
    PFN_cuMemcpyDtoH_v3020 dtoh[2];
    PFN_cuMemcpyDtoHAsync_v3020 dtohAsync[2];
    PFN_cuMemcpyDtoD_v3020 dtod[2];
    PFN_cuMemcpyDtoDAsync_v3020 dtodAsync[2];
    PFN_cuMemcpy2DUnaligned_v3020 copy2d[2];
    PFN_cuMemcpy2DAsync_v3020 copy2dAsync[2];
    PFN_cuMemcpy3D_v3020 copy3d[2];
    PFN_cuMemcpy3DAsync_v3020 copy3dAsync[2];
    PFN_cuMemcpy3DPeer_v4000 peer3d[2];
    PFN_cuMemcpy3DPeerAsync_v4000 peer3dAsync[2];
    PFN_cuMemcpyBatchAsync_v13000 batch[2];
    PFN_cuMemcpy3DBatchAsync_v13000 batch3d[2];
    PFN_cuStreamSynchronize_v2000 streamSynchronize[2];
} cp;

bool copy_lookups(void)
{
    bool ok = true;
#define GET(slot, symbol, version)                                                                 \
    ok &= (cp.slot = (__typeof__(cp.slot))lookup(symbol, version, 0)) != NULL
#define GET2(slot, symbol, version, ptds_version)                                                  \
    GET(slot[0], symbol, version);                                                                 \
    ok &= (cp.slot[1] = (__typeof__(cp.slot[1]))lookup(                                            \
               symbol, ptds_version, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) != NULL
    GET(hostRegister, "cuMemHostRegister", 6050);
    GET(hostUnregister, "cuMemHostUnregister", 4000);
    GET2(memcpy, "cuMemcpy", 4000, 7000);
    GET2(memcpyAsync, "cuMemcpyAsync", 4000, 7000);
    GET2(peer, "cuMemcpyPeer", 4000, 7000);
    GET2(peerAsync, "cuMemcpyPeerAsync", 4000, 7000);
    GET2(htod, "cuMemcpyHtoD", 3020, 7000);
    GET2(htodAsync, "cuMemcpyHtoDAsync", 3020, 7000);
    GET2(dtoh, "cuMemcpyDtoH", 3020, 7000);
    GET2(dtohAsync, "cuMemcpyDtoHAsync", 3020, 7000);
    GET2(dtod, "cuMemcpyDtoD", 3020, 7000);
    GET2(dtodAsync, "cuMemcpyDtoDAsync", 3020, 7000);
    GET2(copy2d, "cuMemcpy2DUnaligned", 3020, 7000);
    GET2(copy2dAsync, "cuMemcpy2DAsync", 3020, 7000);
    GET2(copy3d, "cuMemcpy3D", 3020, 7000);
    GET2(copy3dAsync, "cuMemcpy3DAsync", 3020, 7000);
    GET2(peer3d, "cuMemcpy3DPeer", 4000, 7000);
    GET2(peer3dAsync, "cuMemcpy3DPeerAsync", 4000, 7000);
    GET2(batch, "cuMemcpyBatchAsync", 13000, 13000);
    GET2(batch3d, "cuMemcpy3DBatchAsync", 13000, 13000);
    GET2(streamSynchronize, "cuStreamSynchronize", 2000, 7000);
#undef GET
#undef GET2
    return ok;
}

/* ---- host registration ---- */

cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    /* the cudaHostRegister* flags have the values of CU_MEMHOSTREGISTER_* */
    return done(to_runtime(cp.hostRegister(ptr, size, flags)));
}

cudaError_t cudaHostUnregister(void *ptr)
{
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    return done(to_runtime(cp.hostUnregister(ptr)));
}

/* ---- waiting for a stream ---- */

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    return done(to_runtime(cp.streamSynchronize[0](stream)));
}

cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    return done(to_runtime(cp.streamSynchronize[1](stream)));
}

/* ---- copies ---- */

static bool kind_ok(enum cudaMemcpyKind kind)
{
    return kind >= cudaMemcpyHostToHost && kind <= cudaMemcpyDefault;
}

/* A linear copy: the direction-named driver copy for a direction, cuMemcpy for unified
 * addressing and host to host. pt: the per-thread default stream's forms. */
static cudaError_t linear(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                          cudaStream_t s, bool async, int pt)
{
    if (!kind_ok(kind))
        return done(cudaErrorInvalidMemcpyDirection);
    cudaError_t e = enter();
    if (e != cudaSuccess || !n)
        return done(e);
    CUdeviceptr d = (CUdeviceptr)dst, sp = (CUdeviceptr)src;
    CUresult r;
    switch (kind) {
    case cudaMemcpyHostToDevice:
        r = async ? cp.htodAsync[pt](d, src, n, s) : cp.htod[pt](d, src, n);
        break;
    case cudaMemcpyDeviceToHost:
        r = async ? cp.dtohAsync[pt](dst, sp, n, s) : cp.dtoh[pt](dst, sp, n);
        break;
    case cudaMemcpyDeviceToDevice:
        r = async ? cp.dtodAsync[pt](d, sp, n, s) : cp.dtod[pt](d, sp, n);
        break;
    default:
        r = async ? cp.memcpyAsync[pt](d, sp, n, s) : cp.memcpy[pt](d, sp, n);
    }
    return done(to_runtime(r));
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    return linear(dst, src, count, kind, NULL, false, 0);
}

cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    return linear(dst, src, count, kind, NULL, false, 1);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    return linear(dst, src, count, kind, stream, true, 0);
}

cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                 cudaStream_t stream)
{
    return linear(dst, src, count, kind, stream, true, 1);
}

/* The driver's memory type of one end of a copy of this kind. */
static CUmemorytype memtype(enum cudaMemcpyKind kind, bool is_dst)
{
    switch (kind) {
    case cudaMemcpyHostToHost:
        return CU_MEMORYTYPE_HOST;
    case cudaMemcpyHostToDevice:
        return is_dst ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    case cudaMemcpyDeviceToHost:
        return is_dst ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    case cudaMemcpyDeviceToDevice:
        return CU_MEMORYTYPE_DEVICE;
    default:
        return CU_MEMORYTYPE_UNIFIED;
    }
}

static cudaError_t copy_2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                           size_t height, enum cudaMemcpyKind kind, cudaStream_t s, bool async,
                           int pt)
{
    if (!kind_ok(kind))
        return done(cudaErrorInvalidMemcpyDirection);
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    CUDA_MEMCPY2D c = {.srcMemoryType = memtype(kind, false),
                       .srcHost = src,
                       .srcDevice = (CUdeviceptr)src,
                       .srcPitch = spitch,
                       .dstMemoryType = memtype(kind, true),
                       .dstHost = dst,
                       .dstDevice = (CUdeviceptr)dst,
                       .dstPitch = dpitch,
                       .WidthInBytes = width,
                       .Height = height};
    return done(to_runtime(async ? cp.copy2dAsync[pt](&c, s) : cp.copy2d[pt](&c)));
}

cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                         size_t height, enum cudaMemcpyKind kind)
{
    return copy_2d(dst, dpitch, src, spitch, width, height, kind, NULL, false, 0);
}

cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind)
{
    return copy_2d(dst, dpitch, src, spitch, width, height, kind, NULL, false, 1);
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind,
                              cudaStream_t stream)
{
    return copy_2d(dst, dpitch, src, spitch, width, height, kind, stream, true, 0);
}

cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src, size_t spitch,
                                   size_t width, size_t height, enum cudaMemcpyKind kind,
                                   cudaStream_t stream)
{
    return copy_2d(dst, dpitch, src, spitch, width, height, kind, stream, true, 1);
}

/* The fields CUDA_MEMCPY3D and CUDA_MEMCPY3D_PEER share, from a runtime copy's (which has
 * them alike in cudaMemcpy3DParms and cudaMemcpy3DPeerParms); the stand-in has no arrays. */
#define FILL_3D(c, p, kind)                                                                        \
    do {                                                                                           \
        (c).srcXInBytes = (p)->srcPos.x;                                                           \
        (c).srcY = (p)->srcPos.y;                                                                  \
        (c).srcZ = (p)->srcPos.z;                                                                  \
        (c).srcMemoryType = memtype(kind, false);                                                  \
        (c).srcHost = (p)->srcPtr.ptr;                                                             \
        (c).srcDevice = (CUdeviceptr)(p)->srcPtr.ptr;                                              \
        (c).srcPitch = (p)->srcPtr.pitch;                                                          \
        (c).srcHeight = (p)->srcPtr.ysize;                                                         \
        (c).dstXInBytes = (p)->dstPos.x;                                                           \
        (c).dstY = (p)->dstPos.y;                                                                  \
        (c).dstZ = (p)->dstPos.z;                                                                  \
        (c).dstMemoryType = memtype(kind, true);                                                   \
        (c).dstHost = (p)->dstPtr.ptr;                                                             \
        (c).dstDevice = (CUdeviceptr)(p)->dstPtr.ptr;                                              \
        (c).dstPitch = (p)->dstPtr.pitch;                                                          \
        (c).dstHeight = (p)->dstPtr.ysize;                                                         \
        (c).WidthInBytes = (p)->extent.width;                                                      \
        (c).Height = (p)->extent.height;                                                           \
        (c).Depth = (p)->extent.depth;                                                             \
    } while (0)

static cudaError_t copy_3d(const struct cudaMemcpy3DParms *p, cudaStream_t s, bool async, int pt)
{
    if (!p)
        return done(cudaErrorInvalidValue);
    if (p->srcArray || p->dstArray)
        return done(cudaErrorNotSupported);
    if (!kind_ok(p->kind))
        return done(cudaErrorInvalidMemcpyDirection);
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    CUDA_MEMCPY3D c = {0};
    FILL_3D(c, p, p->kind);
    return done(to_runtime(async ? cp.copy3dAsync[pt](&c, s) : cp.copy3d[pt](&c)));
}

cudaError_t cudaMemcpy3D(const struct cudaMemcpy3DParms *p)
{
    return copy_3d(p, NULL, false, 0);
}

cudaError_t cudaMemcpy3D_ptds(const struct cudaMemcpy3DParms *p)
{
    return copy_3d(p, NULL, false, 1);
}

cudaError_t cudaMemcpy3DAsync(const struct cudaMemcpy3DParms *p, cudaStream_t stream)
{
    return copy_3d(p, stream, true, 0);
}

cudaError_t cudaMemcpy3DAsync_ptsz(const struct cudaMemcpy3DParms *p, cudaStream_t stream)
{
    return copy_3d(p, stream, true, 1);
}

static cudaError_t peer_3d(const struct cudaMemcpy3DPeerParms *p, cudaStream_t s, bool async,
                           int pt)
{
    if (!p)
        return done(cudaErrorInvalidValue);
    if (p->srcArray || p->dstArray)
        return done(cudaErrorNotSupported);
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    CUDA_MEMCPY3D_PEER c = {0};
    FILL_3D(c, p, cudaMemcpyDeviceToDevice);
    CUresult r = primary_ctx(p->srcDevice, &c.srcContext);
    if (r == CUDA_SUCCESS)
        r = primary_ctx(p->dstDevice, &c.dstContext);
    if (r == CUDA_SUCCESS)
        r = async ? cp.peer3dAsync[pt](&c, s) : cp.peer3d[pt](&c);
    return done(to_runtime(r));
}

cudaError_t cudaMemcpy3DPeer(const struct cudaMemcpy3DPeerParms *p)
{
    return peer_3d(p, NULL, false, 0);
}

cudaError_t cudaMemcpy3DPeer_ptds(const struct cudaMemcpy3DPeerParms *p)
{
    return peer_3d(p, NULL, false, 1);
}

cudaError_t cudaMemcpy3DPeerAsync(const struct cudaMemcpy3DPeerParms *p, cudaStream_t stream)
{
    return peer_3d(p, stream, true, 0);
}

cudaError_t cudaMemcpy3DPeerAsync_ptsz(const struct cudaMemcpy3DPeerParms *p, cudaStream_t stream)
{
    return peer_3d(p, stream, true, 1);
}

static cudaError_t peer(void *dst, int ddev, const void *src, int sdev, size_t n, cudaStream_t s,
                        bool async)
{
    cudaError_t e = enter();
    if (e != cudaSuccess || !n)
        return done(e);
    CUcontext dctx, sctx;
    CUresult r = primary_ctx(ddev, &dctx);
    if (r == CUDA_SUCCESS)
        r = primary_ctx(sdev, &sctx);
    if (r == CUDA_SUCCESS)
        r = async ? cp.peerAsync[0]((CUdeviceptr)dst, dctx, (CUdeviceptr)src, sctx, n, s)
                  : cp.peer[0]((CUdeviceptr)dst, dctx, (CUdeviceptr)src, sctx, n);
    return done(to_runtime(r));
}

cudaError_t cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice, size_t count)
{
    return peer(dst, dstDevice, src, srcDevice, count, NULL, false);
}

cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice,
                                size_t count, cudaStream_t stream)
{
    return peer(dst, dstDevice, src, srcDevice, count, stream, true);
}

/* cudaMemcpyAttributes has CUmemcpyAttributes' layout, cudaMemLocation CUmemLocation's. */
static cudaError_t batch(void *const *dsts, const void *const *srcs, const size_t *sizes,
                         size_t count, struct cudaMemcpyAttributes *attrs, size_t *idxs,
                         size_t nattrs, cudaStream_t s, int pt)
{
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    return done(to_runtime(cp.batch[pt]((CUdeviceptr *)dsts, (CUdeviceptr *)srcs, (size_t *)sizes,
                                        count, (CUmemcpyAttributes *)attrs, idxs, nattrs, s)));
}

cudaError_t cudaMemcpyBatchAsync(void *const *dsts, const void *const *srcs, const size_t *sizes,
                                 size_t count, struct cudaMemcpyAttributes *attrs,
                                 size_t *attrsIdxs, size_t numAttrs, cudaStream_t stream)
{
    return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream, 0);
}

cudaError_t cudaMemcpyBatchAsync_ptsz(void *const *dsts, const void *const *srcs,
                                      const size_t *sizes, size_t count,
                                      struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs,
                                      size_t numAttrs, cudaStream_t stream)
{
    return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream, 1);
}

static CUmemcpy3DOperand operand(const struct cudaMemcpy3DOperand *o)
{
    CUmemcpy3DOperand d = {.type = (CUmemcpy3DOperandType)o->type};
    if (o->type == cudaMemcpyOperandTypePointer) {
        d.op.ptr.ptr = (CUdeviceptr)o->op.ptr.ptr;
        d.op.ptr.rowLength = o->op.ptr.rowLength;
        d.op.ptr.layerHeight = o->op.ptr.layerHeight;
        d.op.ptr.locHint =
            (CUmemLocation){(CUmemLocationType)o->op.ptr.locHint.type, o->op.ptr.locHint.id};
    }
    return d;
}

static cudaError_t batch_3d(size_t nops, struct cudaMemcpy3DBatchOp *ops, unsigned long long flags,
                            cudaStream_t s, int pt)
{
    if (!nops || !ops)
        return done(cudaErrorInvalidValue);
    cudaError_t e = enter();
    if (e != cudaSuccess)
        return done(e);
    CUDA_MEMCPY3D_BATCH_OP *d = calloc(nops, sizeof *d);
    if (!d)
        return done(cudaErrorMemoryAllocation);
    for (size_t i = 0; i < nops; i++)
        d[i] = (CUDA_MEMCPY3D_BATCH_OP){
            .src = operand(&ops[i].src),
            .dst = operand(&ops[i].dst),
            .extent = {ops[i].extent.width, ops[i].extent.height, ops[i].extent.depth},
            .srcAccessOrder = (CUmemcpySrcAccessOrder)ops[i].srcAccessOrder,
            .flags = ops[i].flags};
    CUresult r = cp.batch3d[pt](nops, d, flags, s);
    free(d);
    return done(to_runtime(r));
}

cudaError_t cudaMemcpy3DBatchAsync(size_t numOps, struct cudaMemcpy3DBatchOp *opList,
                                   unsigned long long flags, cudaStream_t stream)
{
    return batch_3d(numOps, opList, flags, stream, 0);
}

cudaError_t cudaMemcpy3DBatchAsync_ptsz(size_t numOps, struct cudaMemcpy3DBatchOp *opList,
                                        unsigned long long flags, cudaStream_t stream)
{
    return batch_3d(numOps, opList, flags, stream, 1);
}
