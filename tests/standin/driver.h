/* The books the driver stand-in keeps instead of memory, shared by its source files.
 *
 * All state sits behind one mutex: the stand-in exists to be correct and predictable, not fast,
 * and one lock makes every figure it reports consistent with every other. */
#ifndef STANDIN_DRIVER_H
#define STANDIN_DRIVER_H

/* Declares every exported name exactly as libcuda exports it (cuMemAlloc_v2, cuMemAllocAsync and
 * cuMemAllocAsync_ptsz, the 4-argument cuGetProcAddress ...) instead of the macro-renamed forms
 * an application sees. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uthash.h>

#include "trace.h"

#define HIDDEN __attribute__((visibility("hidden")))

enum {
    MAX_DEVICES = 8,
    DRIVER_VERSION = 13000,
};

#define GRANULE ((size_t)2 << 20) /* VMM granularity and pool reservation step */
#define BLOCK_ALIGN ((size_t)512) /* alignment of synthetic device addresses */

/* Synthetic address layout. Nothing is mapped there: device pointers are only numbers, as they
 * are to a host program on a real GPU. The ranges sit below where Linux places host mappings
 * (top-down from 0x7fxxxxxxxxxx) and above ASan's heap (0x6000...), so they never alias a real
 * host pointer. */
#define DEVICE_HEAP_BASE ((uintptr_t)0x700000000000)
#define DEVICE_HEAP_SPAN ((uintptr_t)1 << 40) /* device d: BASE + d * SPAN */
#define MANAGED_BASE ((uintptr_t)0x780000000000)
#define VA_BASE ((uintptr_t)0x790000000000) /* cuMemAddressReserve */
#define REGION_SPAN ((uintptr_t)1 << 40)

/* A first-fit allocator of address ranges: freed ranges are coalesced and handed out again, so
 * addresses are reused after free the way a real allocator reuses them. */
struct extent {
    uintptr_t start, end;
};
struct arena {
    struct extent *free; /* sorted by address, never adjacent */
    size_t n, cap;
};
HIDDEN bool arena_init(struct arena *a, uintptr_t base, uintptr_t span);
HIDDEN uintptr_t arena_alloc(struct arena *a, size_t span, size_t align); /* 0: no room */
HIDDEN void arena_free(struct arena *a, uintptr_t addr, size_t span);

struct CUctx_st {
    int device;
    int refs; /* cuDevicePrimaryCtxRetain minus releases */
};

struct CUstream_st {
    uintptr_t key; /* the handle itself, so a stale or foreign handle is detected, not used */
    int device;
    UT_hash_handle hh;
};

struct CUmemPoolHandle_st {
    uintptr_t key;
    int device;
    bool is_default;
    bool destroyed; /* destroyed with allocations outstanding: freed with the last of them */
    size_t live;    /* outstanding allocations */
    size_t used, used_high, reserved, reserved_high;
    cuuint64_t release_threshold;
    int reuse[3]; /* CU_MEMPOOL_ATTR_REUSE_* */
    UT_hash_handle hh;
};

/* BLOCK_REGISTERED: the caller's memory, page-locked by cuMemHostRegister */
enum block_kind { BLOCK_DEVICE, BLOCK_MANAGED, BLOCK_HOST, BLOCK_REGISTERED };

/* One allocation from cuMemAlloc*, cuMemAllocManaged, a pool, or pinned host memory. */
struct block {
    uintptr_t addr;
    size_t size; /* as requested: the bytes counted against the device */
    size_t span; /* address range taken, size rounded up to BLOCK_ALIGN */
    int device;
    enum block_kind kind;
    struct CUmemPoolHandle_st *pool; /* NULL unless stream-ordered */
    UT_hash_handle hh;
};

/* Physical memory from cuMemCreate: freed when no reference and no mapping is left. */
struct phys {
    CUmemGenericAllocationHandle handle;
    int device;
    size_t size;
    int refs, maps;
    UT_hash_handle hh;
};

/* A cuMemAddressReserve range, or a cuMemMap mapping inside one. */
struct vrange {
    uintptr_t addr;
    size_t size;
    struct phys *phys; /* mappings only */
    UT_hash_handle hh;
};

struct device {
    struct CUctx_st ctx; /* the primary context */
    size_t used;         /* bytes counted against capacity */
    struct arena heap;
    struct CUmemPoolHandle_st *default_pool, *current_pool;
};

struct books {
    pthread_mutex_t lock;
    int ndev;
    size_t capacity, context_bytes;
    bool no_default_ctx;
    bool host_backed; /* device memory is host memory the program may read and write */
    struct device dev[MAX_DEVICES];
    struct arena managed, va;
    struct block *blocks; /* device and managed, keyed by address */
    struct block *host;   /* pinned and registered host memory, keyed by address */
    struct CUstream_st *streams;
    struct CUmemPoolHandle_st *pools;
    struct phys *phys;
    struct vrange *reservations, *mappings;
    CUmemGenericAllocationHandle next_handle;
};

/* Reads the STANDIN_* knobs on first use. What they fix (ndev, capacity, context_bytes,
 * no_default_ctx, the contexts' devices) never changes afterwards and may be read without the
 * lock; everything else needs it. */
HIDDEN struct books *books(void);
HIDDEN struct books *lock_books(void);
HIDDEN void unlock_books(struct books *b);

/* The calling thread's current context (device 0's primary one until the thread sets another,
 * unless STANDIN_NO_DEFAULT_CTX=1); NULL when none. Needs no lock. */
HIDDEN struct CUctx_st *current_ctx(struct books *b);
HIDDEN bool valid_device(const struct books *b, CUdevice d);
HIDDEN bool valid_ctx(const struct books *b, CUcontext c);
/* The device a stream belongs to; NULL and the two special handles mean the current context's.
 * Needs the lock. */
HIDDEN CUresult stream_device(struct books *b, CUstream s, int *device);

/* Counts bytes against a device's capacity; CUDA_ERROR_OUT_OF_MEMORY when they do not fit. */
HIDDEN CUresult charge(struct books *b, int device, size_t bytes);
HIDDEN void refund(struct books *b, int device, size_t bytes);

HIDDEN struct CUmemPoolHandle_st *pool_new(struct books *b, int device, bool is_default);
/* What memory at addr is, interior addresses included: false when the driver does not know it
 * (pageable host memory). Needs the lock. */
struct pointer {
    enum { PTR_DEVICE, PTR_MANAGED, PTR_HOST, PTR_MAPPED } kind;
    int device;
    uintptr_t start; /* the allocation, or for VMM the reserved range, as documented */
    size_t size;
    CUmemoryPool pool;
};
HIDDEN bool identify(struct books *b, uintptr_t addr, struct pointer *out);

/* A question of which device a context or a pointer is on: counted, for tests that check what
 * the library asks the driver (standin_device_queries, exported). Not a read-modify-write: a
 * count from several threads at once may come short, which no test reads. */
HIDDEN void count_device_query(void);

/* The VMM mapping holding addr, and the reservation it lies in. */
HIDDEN bool vmm_lookup(struct books *b, uintptr_t addr, struct vrange **mapping,
                       struct vrange **reservation);

#endif
