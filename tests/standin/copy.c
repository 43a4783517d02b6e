/* libcuda.so.1 stand-in: copies and host registration.
 *
 * Device memory is only numbers here (unless STANDIN_HOST_BACKED=1), so a copy moves bytes only
 * between host buffers; a copy to the host from device memory writes zeros. What the
 * driver checks is checked as the real one does: every device byte a copy touches lies in one
 * live device allocation or mapping, a stream is live, unified pointers are told apart by what
 * the driver knows of them (memory it does not know is pageable host memory). */
#include "driver.h"

#include <stdlib.h>
#include <string.h>

/* One end of a copy: rows of `width` bytes, `pitch` apart, `layer` rows to a layer. */
struct plane {
    CUmemorytype type;
    uintptr_t addr;
    size_t pitch, layer;
};

static struct plane linear(CUmemorytype type, uintptr_t addr, size_t n)
{
    return (struct plane){type, addr, n, 1};
}

/* The bytes a copy spans at one end. */
static size_t span(const struct plane *p, size_t width, size_t height, size_t depth)
{
    return ((depth - 1) * p->layer + (height - 1)) * p->pitch + width;
}

/* Resolves a unified end and checks a device end (lock held). */
static CUresult settle(struct books *b, struct plane *p, size_t bytes)
{
    if (p->type == CU_MEMORYTYPE_HOST)
        return p->addr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    struct pointer ptr;
    bool known = identify(b, p->addr, &ptr);
    if (p->type == CU_MEMORYTYPE_UNIFIED)
        p->type = known && ptr.kind != PTR_HOST ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    if (p->type == CU_MEMORYTYPE_ARRAY)
        return CUDA_ERROR_NOT_SUPPORTED; /* the stand-in has no arrays */
    if (p->type == CU_MEMORYTYPE_HOST)
        return p->addr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (p->type != CU_MEMORYTYPE_DEVICE || !known || ptr.kind == PTR_HOST ||
        p->addr + bytes > ptr.start + ptr.size)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* One copy of width x height x depth bytes. `stream`: checked when `async`. */
static CUresult copy(struct plane dst, struct plane src, size_t width, size_t height, size_t depth,
                     CUstream stream, bool async)
{
    if (!width || !height || !depth)
        return CUDA_SUCCESS;
    if (dst.pitch < width || src.pitch < width)
        return CUDA_ERROR_INVALID_VALUE;
    struct books *b = lock_books();
    int device;
    CUresult r = current_ctx(b) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    if (r == CUDA_SUCCESS && async)
        r = stream_device(b, stream, &device);
    if (r == CUDA_SUCCESS)
        r = settle(b, &dst, span(&dst, width, height, depth));
    if (r == CUDA_SUCCESS)
        r = settle(b, &src, span(&src, width, height, depth));
    unlock_books(b);
    bool real = books()->host_backed;
    if (r != CUDA_SUCCESS || (dst.type != CU_MEMORYTYPE_HOST && !real))
        return r;
    for (size_t z = 0; z < depth; z++)
        for (size_t y = 0; y < height; y++) {
            char *to = (char *)dst.addr + (z * dst.layer + y) * dst.pitch;
            if (src.type == CU_MEMORYTYPE_HOST || real)
                memmove(to, (const char *)src.addr + (z * src.layer + y) * src.pitch, width);
            else
                memset(to, 0, width);
        }
    return CUDA_SUCCESS;
}

#define H CU_MEMORYTYPE_HOST
#define D CU_MEMORYTYPE_DEVICE
#define U CU_MEMORYTYPE_UNIFIED

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return copy(linear(U, dst, n), linear(U, src, n), n, 1, 1, NULL, false);
}

CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return cuMemcpy(dst, src, n);
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    return copy(linear(U, dst, n), linear(U, src, n), n, 1, 1, s, true);
}

CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    return cuMemcpyAsync(dst, src, n, s);
}

static CUresult peer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n,
                     CUstream s, bool async)
{
    if (!valid_ctx(books(), dctx) || !valid_ctx(books(), sctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    return copy(linear(D, dst, n), linear(D, src, n), n, 1, 1, s, async);
}

CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n)
{
    return peer(dst, dctx, src, sctx, n, NULL, false);
}

CUresult cuMemcpyPeer_ptds(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
                           size_t n)
{
    return peer(dst, dctx, src, sctx, n, NULL, false);
}

CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
                           size_t n, CUstream s)
{
    return peer(dst, dctx, src, sctx, n, s, true);
}

CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
                                size_t n, CUstream s)
{
    return peer(dst, dctx, src, sctx, n, s, true);
}

/* The direction-named copies, each form in one line: a name, its ends, sync or stream. */
#define LINEAR(name, dtype, dparam, stype, sparam)                                                 \
    CUresult name(dparam dst, sparam src, size_t n)                                                \
    {                                                                                              \
        return copy(linear(dtype, (uintptr_t)dst, n), linear(stype, (uintptr_t)src, n), n, 1, 1,   \
                    NULL, false);                                                                  \
    }
#define LINEAR_ASYNC(name, dtype, dparam, stype, sparam)                                           \
    CUresult name(dparam dst, sparam src, size_t n, CUstream s)                                    \
    {                                                                                              \
        return copy(linear(dtype, (uintptr_t)dst, n), linear(stype, (uintptr_t)src, n), n, 1, 1,   \
                    s, true);                                                                      \
    }
LINEAR(cuMemcpyHtoD_v2, D, CUdeviceptr, H, const void *)
LINEAR(cuMemcpyHtoD_v2_ptds, D, CUdeviceptr, H, const void *)
LINEAR(cuMemcpyDtoH_v2, H, void *, D, CUdeviceptr)
LINEAR(cuMemcpyDtoH_v2_ptds, H, void *, D, CUdeviceptr)
LINEAR(cuMemcpyDtoD_v2, D, CUdeviceptr, D, CUdeviceptr)
LINEAR(cuMemcpyDtoD_v2_ptds, D, CUdeviceptr, D, CUdeviceptr)
LINEAR_ASYNC(cuMemcpyHtoDAsync_v2, D, CUdeviceptr, H, const void *)
LINEAR_ASYNC(cuMemcpyHtoDAsync_v2_ptsz, D, CUdeviceptr, H, const void *)
LINEAR_ASYNC(cuMemcpyDtoHAsync_v2, H, void *, D, CUdeviceptr)
LINEAR_ASYNC(cuMemcpyDtoHAsync_v2_ptsz, H, void *, D, CUdeviceptr)
LINEAR_ASYNC(cuMemcpyDtoDAsync_v2, D, CUdeviceptr, D, CUdeviceptr)
LINEAR_ASYNC(cuMemcpyDtoDAsync_v2_ptsz, D, CUdeviceptr, D, CUdeviceptr)

/* CUDA_MEMCPY2D, CUDA_MEMCPY3D and CUDA_MEMCPY3D_PEER name their fields alike; a 2D copy is
 * one layer. */
#define END_3D(c, side, layer_rows, z)                                                             \
    ((struct plane){                                                                               \
        (c)->side##MemoryType,                                                                     \
        ((c)->side##MemoryType == H ? (uintptr_t)(c)->side##Host : (uintptr_t)(c)->side##Device) + \
            ((z) * (layer_rows) + (c)->side##Y) * (c)->side##Pitch + (c)->side##XInBytes,          \
        (c)->side##Pitch, (layer_rows)})

static CUresult copy_2d(const CUDA_MEMCPY2D *c, CUstream s, bool async)
{
    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    return copy(END_3D(c, dst, 1, 0), END_3D(c, src, 1, 0), c->WidthInBytes, c->Height, 1, s,
                async);
}

#define COPY_3D(c, s, async)                                                                       \
    (!(c) ? CUDA_ERROR_INVALID_VALUE                                                               \
          : copy(END_3D(c, dst, (c)->dstHeight, (c)->dstZ),                                        \
                 END_3D(c, src, (c)->srcHeight, (c)->srcZ), (c)->WidthInBytes, (c)->Height,        \
                 (c)->Depth, s, async))

#define COPY(name, type, how)                                                                      \
    CUresult name(const type *c)                                                                   \
    {                                                                                              \
        return how(c, NULL, false);                                                                \
    }
#define COPY_ASYNC(name, type, how)                                                                \
    CUresult name(const type *c, CUstream s)                                                       \
    {                                                                                              \
        return how(c, s, true);                                                                    \
    }
COPY(cuMemcpy2D_v2, CUDA_MEMCPY2D, copy_2d)
COPY(cuMemcpy2D_v2_ptds, CUDA_MEMCPY2D, copy_2d)
COPY(cuMemcpy2DUnaligned_v2, CUDA_MEMCPY2D, copy_2d)
COPY(cuMemcpy2DUnaligned_v2_ptds, CUDA_MEMCPY2D, copy_2d)
COPY_ASYNC(cuMemcpy2DAsync_v2, CUDA_MEMCPY2D, copy_2d)
COPY_ASYNC(cuMemcpy2DAsync_v2_ptsz, CUDA_MEMCPY2D, copy_2d)
COPY(cuMemcpy3D_v2, CUDA_MEMCPY3D, COPY_3D)
COPY(cuMemcpy3D_v2_ptds, CUDA_MEMCPY3D, COPY_3D)
COPY_ASYNC(cuMemcpy3DAsync_v2, CUDA_MEMCPY3D, COPY_3D)
COPY_ASYNC(cuMemcpy3DAsync_v2_ptsz, CUDA_MEMCPY3D, COPY_3D)
COPY(cuMemcpy3DPeer, CUDA_MEMCPY3D_PEER, COPY_3D)
COPY(cuMemcpy3DPeer_ptds, CUDA_MEMCPY3D_PEER, COPY_3D)
COPY_ASYNC(cuMemcpy3DPeerAsync, CUDA_MEMCPY3D_PEER, COPY_3D)
COPY_ASYNC(cuMemcpy3DPeerAsync_ptsz, CUDA_MEMCPY3D_PEER, COPY_3D)

/* Batches: each copy between unified pointers; the first attribute applies from copy 0. */
static CUresult batch(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                      CUmemcpyAttributes *attrs, size_t *idxs, size_t nattrs, size_t *fail,
                      CUstream s)
{
    if (fail)
        *fail = SIZE_MAX;
    if (!dsts || !srcs || !sizes || !count || !attrs || !idxs || !nattrs || nattrs > count ||
        idxs[0] != 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        CUresult r = copy(linear(U, dsts[i], sizes[i]), linear(U, srcs[i], sizes[i]), sizes[i], 1,
                          1, s, true);
        if (r != CUDA_SUCCESS) {
            if (fail)
                *fail = i;
            return r;
        }
    }
    return CUDA_SUCCESS;
}

CUresult cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                            CUmemcpyAttributes *attrs, size_t *idxs, size_t nattrs, size_t *fail,
                            CUstream s)
{
    return batch(dsts, srcs, sizes, count, attrs, idxs, nattrs, fail, s);
}

CUresult cuMemcpyBatchAsync_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                 CUmemcpyAttributes *attrs, size_t *idxs, size_t nattrs,
                                 size_t *fail, CUstream s)
{
    return batch(dsts, srcs, sizes, count, attrs, idxs, nattrs, fail, s);
}

CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                               CUmemcpyAttributes *attrs, size_t *idxs, size_t nattrs, CUstream s)
{
    return batch(dsts, srcs, sizes, count, attrs, idxs, nattrs, NULL, s);
}

CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                    size_t count, CUmemcpyAttributes *attrs, size_t *idxs,
                                    size_t nattrs, CUstream s)
{
    return batch(dsts, srcs, sizes, count, attrs, idxs, nattrs, NULL, s);
}

static struct plane operand(const CUmemcpy3DOperand *o, const CUextent3D *e)
{
    if (o->type != CU_MEMCPY_OPERAND_TYPE_POINTER)
        return (struct plane){CU_MEMORYTYPE_ARRAY, 0, 0, 0};
    size_t row = o->op.ptr.rowLength ? o->op.ptr.rowLength : e->width;
    size_t layer = o->op.ptr.layerHeight ? o->op.ptr.layerHeight : e->height;
    return (struct plane){U, o->op.ptr.ptr, row, layer};
}

static CUresult batch_3d(size_t nops, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail,
                         unsigned long long flags, CUstream s)
{
    if (fail)
        *fail = SIZE_MAX;
    if (!nops || !ops || flags)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < nops; i++) {
        const CUextent3D *e = &ops[i].extent;
        CUresult r = copy(operand(&ops[i].dst, e), operand(&ops[i].src, e), e->width, e->height,
                          e->depth, s, true);
        if (r != CUDA_SUCCESS) {
            if (fail)
                *fail = i;
            return r;
        }
    }
    return CUDA_SUCCESS;
}

CUresult cuMemcpy3DBatchAsync(size_t nops, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail,
                              unsigned long long flags, CUstream s)
{
    return batch_3d(nops, ops, fail, flags, s);
}

CUresult cuMemcpy3DBatchAsync_ptsz(size_t nops, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail,
                                   unsigned long long flags, CUstream s)
{
    return batch_3d(nops, ops, fail, flags, s);
}

CUresult cuMemcpy3DBatchAsync_v2(size_t nops, CUDA_MEMCPY3D_BATCH_OP *ops, unsigned long long flags,
                                 CUstream s)
{
    return batch_3d(nops, ops, NULL, flags, s);
}

CUresult cuMemcpy3DBatchAsync_v2_ptsz(size_t nops, CUDA_MEMCPY3D_BATCH_OP *ops,
                                      unsigned long long flags, CUstream s)
{
    return batch_3d(nops, ops, NULL, flags, s);
}

/* ---- host registration: the caller's memory becomes pinned host memory ---- */

CUresult cuMemHostRegister_v2(void *p, size_t size, unsigned int flags)
{
    if (!p || !size ||
        (flags & ~(unsigned)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                             CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY)))
        return CUDA_ERROR_INVALID_VALUE;
    struct books *b = lock_books();
    struct CUctx_st *c = current_ctx(b);
    struct pointer known;
    CUresult r = !c ? CUDA_ERROR_INVALID_CONTEXT
                 : identify(b, (uintptr_t)p, &known) || identify(b, (uintptr_t)p + size - 1, &known)
                     ? CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
                     : CUDA_SUCCESS;
    struct block *blk = r == CUDA_SUCCESS ? malloc(sizeof *blk) : NULL;
    if (blk) {
        *blk = (struct block){.addr = (uintptr_t)p,
                              .size = size,
                              .span = size,
                              .device = c->device,
                              .kind = BLOCK_REGISTERED};
        HASH_ADD(hh, b->host, addr, sizeof blk->addr, blk);
    } else if (r == CUDA_SUCCESS) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    unlock_books(b);
    return r;
}

CUresult cuMemHostUnregister(void *p)
{
    struct books *b = lock_books();
    uintptr_t key = (uintptr_t)p;
    struct block *blk;
    HASH_FIND(hh, b->host, &key, sizeof key, blk);
    if (blk && blk->kind == BLOCK_REGISTERED)
        HASH_DEL(b->host, blk);
    else
        blk = NULL;
    unlock_books(b);
    CUresult r = blk ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    free(blk);
    return r;
}
