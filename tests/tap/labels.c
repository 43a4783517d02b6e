/* Identity evidence through include/vramtap.h, and a workspace by stack: whole and partial
 * ranges, overlapping labels, a range inside an allocation (matched when the file is written),
 * a VMM mapping, a label on freed memory that a later allocation at the same address must not
 * inherit, labels that go with a freed allocation, a library workspace recognised by its
 * module, and the run record. snapcheck holds the snapshot's labels and `vramtap report
 * --json`'s bill to the bytes and evidence worked out below. With the argument "native" (run
 * with VRAMTAP_MODE=native) the allocations stand for an allocator's segments: labels still
 * split them, and what no label covers is unattributed, workspace or not. */
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "check.h"
#include "vramtap.h"

#define KiB 1024ull
#define MiB (1024 * KiB)

void *cublas_ws_alloc(size_t size);

static void *alloc(size_t size)
{
    void *p = NULL;
    if (cudaMalloc(&p, size) != cudaSuccess)
        fprintf(stderr, "cudaMalloc(%zu) failed\n", (size_t)size);
    return p;
}

int main(int argc, char **argv)
{
    int native = argc > 1 && !strcmp(argv[1], "native");
    CHECK_EQ_INT(vramtap_loaded(), 1);
    /* setup: by timing, everything kept from here is a parameter */
    void *param = alloc(1 * MiB);
    CHECK_EQ_INT(vramtap_label(param, 1 * MiB, VRAMTAP_PARAMETERS), VRAMTAP_OK);

    /* a flat buffer: gradients, optimizer state, and a parameter range overlapping the state
     * (bytes already labelled keep their first label); its last 512 KiB carry no label */
    char *flat = alloc(3 * MiB);
    unsigned long long ranges[] = {(uintptr_t)flat, 1 * MiB, (uintptr_t)flat + 1 * MiB, 1 * MiB};
    CHECK_EQ_INT(vramtap_label_ranges(ranges, 1, VRAMTAP_GRADIENTS), VRAMTAP_OK);
    CHECK_EQ_INT(vramtap_label_ranges(ranges + 2, 1, VRAMTAP_OPTIMIZER_STATE), VRAMTAP_OK);
    CHECK_EQ_INT(vramtap_label(flat + 3 * MiB / 2, 1 * MiB, VRAMTAP_PARAMETERS), VRAMTAP_OK);

    /* labelled after its free: the next allocation at that address is new memory */
    void *gone = alloc(256 * KiB);
    cudaFree(gone);
    CHECK_EQ_INT(vramtap_label(gone, 256 * KiB, VRAMTAP_GRADIENTS), VRAMTAP_OK);
    void *after = alloc(256 * KiB);
    CHECK(after == gone);

    /* labels go with the allocation they were put on */
    void *freed = alloc(512 * KiB);
    CHECK_EQ_INT(vramtap_label(freed, 512 * KiB, VRAMTAP_GRADIENTS), VRAMTAP_OK);
    cudaFree(freed);
    void *reused = alloc(512 * KiB);
    CHECK(reused == freed);

    /* a range inside an allocation */
    char *inner = alloc(2 * MiB);
    CHECK_EQ_INT(vramtap_label(inner + 512 * KiB, 256 * KiB, VRAMTAP_OPTIMIZER_STATE), VRAMTAP_OK);

    /* VMM: labelled by its mapped address */
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    size_t gran = 0;
    CHECK_EQ_INT(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                 CUDA_SUCCESS);
    CUdeviceptr va = 0;
    CUmemGenericAllocationHandle h = 0;
    CHECK_EQ_INT(cuMemAddressReserve(&va, gran, 0, 0, 0), CUDA_SUCCESS);
    CHECK_EQ_INT(cuMemCreate(&h, gran, &prop, 0), CUDA_SUCCESS);
    CHECK_EQ_INT(cuMemMap(va, gran, 0, h, 0), CUDA_SUCCESS);
    CHECK_EQ_INT(vramtap_label((void *)va, gran, VRAMTAP_PARAMETERS), VRAMTAP_OK);

    /* host memory vramtap never saw: ignored */
    static char host[4096];
    CHECK_EQ_INT(vramtap_label(host, sizeof host, VRAMTAP_PARAMETERS), VRAMTAP_OK);
    CHECK_EQ_INT(vramtap_label(param, 1, "weights"), VRAMTAP_EUNKNOWN);

    /* a workspace kept for the whole run: temporary by its stack */
    void *ws = cublas_ws_alloc(3 * MiB);
    CHECK(ws != NULL);

    CHECK_EQ_INT(vramtap_record_text("model", "tiny"), VRAMTAP_OK);
    CHECK_EQ_INT(vramtap_record_int("batch_size", 4), VRAMTAP_OK);
    CHECK_EQ_INT(vramtap_record_int("batch_size", 8), VRAMTAP_OK);
    CHECK_EQ_INT(vramtap_record_text("Bad-Key", "x"), VRAMTAP_EUNKNOWN);

    /* one step: a gradient by timing, then the peak between phases */
    vramtap_begin(VRAMTAP_FORWARD);
    void *act = alloc(4 * MiB);
    vramtap_end(VRAMTAP_FORWARD);
    vramtap_begin(VRAMTAP_BACKWARD);
    alloc(1 * MiB); /* a gradient, kept */
    cudaFree(act);
    vramtap_end(VRAMTAP_BACKWARD);
    vramtap_begin(VRAMTAP_OPTIMIZER);
    vramtap_end(VRAMTAP_OPTIMIZER);
    cudaFree(alloc(16 * MiB)); /* the peak */

    printf("EXPECT labels %p 0:%llu:parameters\n", param, 1 * MiB);
    printf("EXPECT labels %p 0:%llu:gradients,%llu:%llu:optimizer_state,%llu:%llu:parameters\n",
           (void *)flat, 1 * MiB, 1 * MiB, 1 * MiB, 3 * MiB / 2, 1 * MiB);
    printf("EXPECT labels %p -\nEXPECT labels %p -\n", after, reused);
    printf("EXPECT labels %p %llu:%llu:optimizer_state\n", (void *)inner, 512 * KiB, 256 * KiB);
    printf("EXPECT labels %p 0:%zu:parameters\n", (void *)va, gran);
    printf("EXPECT identity ranges 9\nEXPECT identity attached 3\nEXPECT identity loose 6\n"
           "EXPECT identity loose_matched 4\nEXPECT identity dropped 0\n");
    printf("EXPECT record model tiny\nEXPECT record batch_size 8\n");

    unsigned long long id_params = 1 * MiB + 1 * MiB / 2 + gran;
    unsigned long long timing_params = 1 * MiB / 2 + 256 * KiB + 512 * KiB + 2 * MiB - 256 * KiB;
    printf("EXPECT bill 0 parameters identity %llu\n", id_params);
    printf("EXPECT bill 0 parameters timing %llu\n", native ? 0 : timing_params);
    printf("EXPECT bill 0 gradients identity %llu\n", 1 * MiB);
    printf("EXPECT bill 0 gradients timing %llu\n", native ? 0 : 1 * MiB);
    printf("EXPECT bill 0 optimizer_state identity %llu\n", 1 * MiB + 256 * KiB);
    printf("EXPECT bill 0 optimizer_state timing 0\n");
    printf("EXPECT bill 0 temporary stack %llu\n", native ? 0 : 3 * MiB);
    printf("EXPECT bill 0 temporary timing %llu\n", native ? 0 : 16 * MiB);
    printf("EXPECT bill 0 activations timing 0\n");
    printf("EXPECT workspace 0 %llu\n", native ? 0 : 3 * MiB);
    return CHECK_DONE();
}
