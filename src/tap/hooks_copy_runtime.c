/* The CUDA runtime's copies and host registration, each with its per-thread default stream
 * variant. Each wrapper calls the next definition (libcudart) under the recursion guard, so the
 * driver copy underneath is not counted again, and counts the copy the runtime accepted. */
/* Declares the names as libcudart exports them: cudaMemcpy beside cudaMemcpy_ptds, and so on. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda_runtime_api.h>

#include "copies.h"
#include "pinned.h"
#include "resolve.h"

/* The next definition (libcudart), looked up once; without one a wrapper answers as a runtime
 * that could not initialise. */
#define REAL(name)                                                                                 \
    ({                                                                                             \
        static _Atomic(void *) cache_;                                                             \
        void *p_ = atomic_load_explicit(&cache_, memory_order_acquire);                            \
        (__typeof__(&name))(p_ ? p_ : vt_real_next(&cache_, #name));                               \
    })
#define HOOK(name, params, args, note)                                                             \
    VT_COPY_HOOK(cudaError_t, cudaSuccess, cudaErrorInitializationError, REAL(name), name, params, \
                 args, note)

/* One end of a copy as its kind names it; cudaMemcpyDefault is unified addressing. */
static vt_copy_side end_of(enum cudaMemcpyKind kind, int is_dst, const void *p)
{
    vt_copy_end end = VT_END_UNIFIED;
    if (kind == cudaMemcpyHostToHost)
        end = VT_END_HOST;
    else if (kind == cudaMemcpyDeviceToDevice)
        end = VT_END_DEVICE;
    else if (kind == cudaMemcpyHostToDevice)
        end = is_dst ? VT_END_DEVICE : VT_END_HOST;
    else if (kind == cudaMemcpyDeviceToHost)
        end = is_dst ? VT_END_HOST : VT_END_DEVICE;
    return (vt_copy_side){end, (uintptr_t)p};
}

static void note_linear(void *dst, const void *src, uint64_t bytes, enum cudaMemcpyKind kind,
                        uintptr_t how)
{
    vt_copy_note(end_of(kind, 1, dst), end_of(kind, 0, src), bytes, how);
}

/* Where the first byte of a 3D operand is: an array's is device memory. */
static vt_copy_side pitched(enum cudaMemcpyKind kind, int is_dst, cudaArray_const_t array,
                            struct cudaPitchedPtr p, struct cudaPos pos)
{
    if (array)
        return (vt_copy_side){VT_END_DEVICE, 0};
    return end_of(kind, is_dst, (const char *)p.ptr + (pos.z * p.ysize + pos.y) * p.pitch + pos.x);
}

static uint64_t volume(struct cudaExtent e)
{
    return (uint64_t)e.width * e.height * e.depth;
}

static void note_3d(const struct cudaMemcpy3DParms *c, uintptr_t how)
{
    vt_copy_note(pitched(c->kind, 1, c->dstArray, c->dstPtr, c->dstPos),
                 pitched(c->kind, 0, c->srcArray, c->srcPtr, c->srcPos), volume(c->extent), how);
}

static void note_3d_peer(const struct cudaMemcpy3DPeerParms *c, uintptr_t how)
{
    vt_copy_note(pitched(cudaMemcpyDeviceToDevice, 1, c->dstArray, c->dstPtr, c->dstPos),
                 pitched(cudaMemcpyDeviceToDevice, 0, c->srcArray, c->srcPtr, c->srcPos),
                 volume(c->extent), how);
}

static void note_batch(void *const *dsts, const void *const *srcs, const size_t *sizes,
                       size_t count, uintptr_t how)
{
    for (size_t i = 0; i < count; i++)
        note_linear(dsts[i], srcs[i], sizes[i], cudaMemcpyDefault, how);
}

static vt_copy_side operand(const struct cudaMemcpy3DOperand *o)
{
    if (o->type == cudaMemcpyOperandTypePointer)
        return (vt_copy_side){VT_END_UNIFIED, (uintptr_t)o->op.ptr.ptr};
    return (vt_copy_side){VT_END_DEVICE, 0};
}

static void note_3d_batch(const struct cudaMemcpy3DBatchOp *ops, size_t n, uintptr_t how)
{
    for (size_t i = 0; i < n; i++)
        vt_copy_note(operand(&ops[i].dst), operand(&ops[i].src), volume(ops[i].extent), how);
}

/* An asynchronous form's `pt`: whether it is the per-thread default stream's (_ptsz), where a
 * null stream means that. */
#define LINEAR(name)                                                                               \
    HOOK(name, (void *d, const void *s, size_t n, enum cudaMemcpyKind k), (d, s, n, k),            \
         note_linear(d, s, n, k, VT_COPY_SYNC))
#define LINEAR_ASYNC(name, pt)                                                                     \
    HOOK(name, (void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st),         \
         (d, s, n, k, st), note_linear(d, s, n, k, vt_copy_stream(st, pt)))
LINEAR(cudaMemcpy)
LINEAR(cudaMemcpy_ptds)
LINEAR_ASYNC(cudaMemcpyAsync, 0)
LINEAR_ASYNC(cudaMemcpyAsync_ptsz, 1)

#define PARAMS_2D                                                                                  \
    void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, enum cudaMemcpyKind k
#define COPY_2D(name)                                                                              \
    HOOK(name, (PARAMS_2D), (d, dp, s, sp, w, h, k),                                               \
         note_linear(d, s, (uint64_t)w *h, k, VT_COPY_SYNC))
#define COPY_2D_ASYNC(name, pt)                                                                    \
    HOOK(name, (PARAMS_2D, cudaStream_t st), (d, dp, s, sp, w, h, k, st),                          \
         note_linear(d, s, (uint64_t)w *h, k, vt_copy_stream(st, pt)))
COPY_2D(cudaMemcpy2D)
COPY_2D(cudaMemcpy2D_ptds)
COPY_2D_ASYNC(cudaMemcpy2DAsync, 0)
COPY_2D_ASYNC(cudaMemcpy2DAsync_ptsz, 1)

#define COPY_3D(name, type, note) HOOK(name, (const struct type *c), (c), note(c, VT_COPY_SYNC))
#define COPY_3D_ASYNC(name, type, note, pt)                                                        \
    HOOK(name, (const struct type *c, cudaStream_t st), (c, st), note(c, vt_copy_stream(st, pt)))
COPY_3D(cudaMemcpy3D, cudaMemcpy3DParms, note_3d)
COPY_3D(cudaMemcpy3D_ptds, cudaMemcpy3DParms, note_3d)
COPY_3D_ASYNC(cudaMemcpy3DAsync, cudaMemcpy3DParms, note_3d, 0)
COPY_3D_ASYNC(cudaMemcpy3DAsync_ptsz, cudaMemcpy3DParms, note_3d, 1)
COPY_3D(cudaMemcpy3DPeer, cudaMemcpy3DPeerParms, note_3d_peer)
COPY_3D(cudaMemcpy3DPeer_ptds, cudaMemcpy3DPeerParms, note_3d_peer)
COPY_3D_ASYNC(cudaMemcpy3DPeerAsync, cudaMemcpy3DPeerParms, note_3d_peer, 0)
COPY_3D_ASYNC(cudaMemcpy3DPeerAsync_ptsz, cudaMemcpy3DPeerParms, note_3d_peer, 1)

HOOK(cudaMemcpyPeer, (void *d, int dd, const void *s, int sd, size_t n), (d, dd, s, sd, n),
     note_linear(d, s, n, cudaMemcpyDeviceToDevice, VT_COPY_SYNC))
HOOK(cudaMemcpyPeerAsync, (void *d, int dd, const void *s, int sd, size_t n, cudaStream_t st),
     (d, dd, s, sd, n, st), note_linear(d, s, n, cudaMemcpyDeviceToDevice, vt_copy_stream(st, 0)))

#define BATCH(name, pt)                                                                            \
    HOOK(name,                                                                                     \
         (void *const *d, const void *const *s, const size_t *n, size_t count,                     \
          struct cudaMemcpyAttributes *attrs, size_t *idxs, size_t nattrs, cudaStream_t st),       \
         (d, s, n, count, attrs, idxs, nattrs, st),                                                \
         note_batch(d, s, n, count, vt_copy_stream(st, pt)))
#define BATCH_3D(name, pt)                                                                         \
    HOOK(name,                                                                                     \
         (size_t nops, struct cudaMemcpy3DBatchOp * ops, unsigned long long flags,                 \
          cudaStream_t st),                                                                        \
         (nops, ops, flags, st), note_3d_batch(ops, nops, vt_copy_stream(st, pt)))
BATCH(cudaMemcpyBatchAsync, 0)
BATCH(cudaMemcpyBatchAsync_ptsz, 1)
BATCH_3D(cudaMemcpy3DBatchAsync, 0)
BATCH_3D(cudaMemcpy3DBatchAsync_ptsz, 1)

/* Registered host memory is pinned; the range is forgotten before the real unregister. */
HOOK(cudaHostRegister, (void *p, size_t size, unsigned int flags), (p, size, flags),
     vt_pinned_add((uintptr_t)p, size))

VT_EXPORT cudaError_t cudaHostUnregister(void *p)
{
    __typeof__(&cudaHostUnregister) real = REAL(cudaHostUnregister);
    if (!real)
        return cudaErrorInitializationError;
    int outer = vt_guard_enter();
    if (outer)
        vt_pinned_remove((uintptr_t)p);
    cudaError_t rc = real(p);
    vt_guard_leave();
    return rc;
}
