/* Virtual memory management: physical memory counts from cuMemCreate and is freed only when every
 * reference is released AND it is unmapped; cuMemRetainAllocationHandle returns the mapped
 * handle and adds a reference of its own. */
#include "check.h"

#include <cuda.h>

#define MiB ((size_t)1 << 20)

static size_t used(void)
{
    size_t free = 0, total = 0;
    CHECK_EQ_INT(cuMemGetInfo(&free, &total), CUDA_SUCCESS);
    return total - free;
}

int main(void)
{
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    size_t gran = 0;
    CHECK_EQ_INT(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                 CUDA_SUCCESS);
    CHECK_EQ_INT(gran, 2 * MiB);
    CHECK_EQ_INT(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
                 CUDA_SUCCESS);
    CHECK_EQ_INT(gran, 2 * MiB);

    CUmemGenericAllocationHandle h, h2, again;
    CHECK_EQ_INT(cuMemCreate(&h, 3 * MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ_INT(cuMemCreate(&h, 4 * MiB, &prop, 0), CUDA_SUCCESS);
    CHECK_EQ_INT(used(), 4 * MiB);

    CUdeviceptr va;
    CHECK_EQ_INT(cuMemAddressReserve(&va, 8 * MiB, 0, 0, 0), CUDA_SUCCESS);
    CHECK_EQ_INT(va, 0x790000000000ull);
    CHECK_EQ_INT(cuMemAddressReserve(&va, 3 * MiB, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ_INT(used(), 4 * MiB); /* address space costs nothing */

    /* Reserved but not mapped: not a valid pointer yet. */
    int ordinal = -1;
    CHECK_EQ_INT(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, va),
                 CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ_INT(cuMemMap(va, 4 * MiB, 0, h, 0), CUDA_SUCCESS);
    CHECK_EQ_INT(cuMemMap(va + 2 * MiB, 2 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* overlap */
    CUmemAccessDesc access = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                              .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CHECK_EQ_INT(cuMemSetAccess(va, 4 * MiB, &access, 1), CUDA_SUCCESS);
    CHECK_EQ_INT(cuMemSetAccess(va, 8 * MiB, &access, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ_INT(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, va + 100),
                 CUDA_SUCCESS);
    CHECK_EQ_INT(ordinal, 0);
    unsigned int type = 0;
    CHECK_EQ_INT(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va), CUDA_SUCCESS);
    CHECK_EQ_INT(type, CU_MEMORYTYPE_DEVICE);
    CUdeviceptr start = 0;
    size_t size = 0;
    CHECK_EQ_INT(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, va + 5),
                 CUDA_SUCCESS);
    CHECK_EQ_INT(start, va);
    CHECK_EQ_INT(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, va + 5),
                 CUDA_SUCCESS);
    CHECK_EQ_INT(size, 8 * MiB);
    CHECK_EQ_INT(cuMemGetAddressRange(&start, &size, va + 5), CUDA_SUCCESS);
    CHECK_EQ_INT(start, va);
    CHECK_EQ_INT(size, 4 * MiB);

    /* Released while mapped: still charged. A second release is an error. */
    CHECK_EQ_INT(cuMemRelease(h), CUDA_SUCCESS);
    CHECK_EQ_INT(used(), 4 * MiB);
    CHECK_EQ_INT(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);

    /* Retain gives back the same handle, with a reference that needs its own release. */
    CHECK_EQ_INT(cuMemRetainAllocationHandle(&again, (void *)(va + 3 * MiB)), CUDA_SUCCESS);
    CHECK_EQ_INT(again, h);
    CHECK_EQ_INT(cuMemRetainAllocationHandle(&again, (void *)(va + 4 * MiB)),
                 CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ_INT(cuMemUnmap(va, 4 * MiB), CUDA_SUCCESS);
    CHECK_EQ_INT(used(), 4 * MiB); /* unmapped, but the retained reference holds it */
    CHECK_EQ_INT(cuMemRelease(again), CUDA_SUCCESS);
    CHECK_EQ_INT(used(), 0);

    /* The other order: unmapped first, freed at the release. */
    CHECK_EQ_INT(cuMemCreate(&h, 2 * MiB, &prop, 0), CUDA_SUCCESS);
    CHECK_EQ_INT(cuMemMap(va, 2 * MiB, 0, h, 0), CUDA_SUCCESS);
    CHECK_EQ_INT(cuMemUnmap(va, 2 * MiB), CUDA_SUCCESS);
    CHECK_EQ_INT(used(), 2 * MiB);
    CHECK_EQ_INT(cuMemRelease(h), CUDA_SUCCESS);
    CHECK_EQ_INT(used(), 0);

    /* Two chunks, one unmap of the whole range; part of a mapping cannot be unmapped. */
    CHECK_EQ_INT(cuMemCreate(&h, 2 * MiB, &prop, 0), CUDA_SUCCESS);
    CHECK_EQ_INT(cuMemCreate(&h2, 4 * MiB, &prop, 0), CUDA_SUCCESS);
    CHECK(h2 != h);
    CHECK_EQ_INT(cuMemMap(va, 2 * MiB, 0, h, 0), CUDA_SUCCESS);
    CHECK_EQ_INT(cuMemMap(va + 2 * MiB, 4 * MiB, 0, h2, 0), CUDA_SUCCESS);
    CHECK_EQ_INT(cuMemMap(va + 6 * MiB, 4 * MiB, 0, h2, 0),
                 CUDA_ERROR_INVALID_VALUE); /* past end */
    CHECK_EQ_INT(cuMemRelease(h), CUDA_SUCCESS);
    CHECK_EQ_INT(cuMemRelease(h2), CUDA_SUCCESS);
    CHECK_EQ_INT(used(), 6 * MiB);
    CHECK_EQ_INT(cuMemUnmap(va + 2 * MiB, 2 * MiB), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ_INT(cuMemAddressFree(va, 8 * MiB), CUDA_ERROR_INVALID_VALUE); /* still mapped */
    CHECK_EQ_INT(cuMemUnmap(va, 6 * MiB), CUDA_SUCCESS);
    CHECK_EQ_INT(used(), 0);
    CHECK_EQ_INT(cuMemUnmap(va, 6 * MiB), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ_INT(cuMemAddressFree(va, 4 * MiB), CUDA_ERROR_INVALID_VALUE); /* wrong size */
    CHECK_EQ_INT(cuMemAddressFree(va, 8 * MiB), CUDA_SUCCESS);

    /* Physical memory counts against the device named in the properties. */
    prop.location.id = 1;
    CHECK_EQ_INT(cuMemCreate(&h, 16ull << 30, &prop, 0), CUDA_SUCCESS);
    CHECK_EQ_INT(cuMemCreate(&h2, 2 * MiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ_INT(used(), 0);
    CHECK_EQ_INT(cuMemRelease(h), CUDA_SUCCESS);
    prop.location.id = 9;
    CHECK_EQ_INT(cuMemCreate(&h, 2 * MiB, &prop, 0), CUDA_ERROR_INVALID_DEVICE);
    return CHECK_DONE();
}
