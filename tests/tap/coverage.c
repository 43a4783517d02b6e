/* The coverage check. The program allocates through the runtime, the driver and pinned host
 * memory, which the wrappers see; through the runtime's own cudaMalloc found by dlsym on its
 * handle, which the runtime wrapper does not see but the driver wrapper underneath does; and,
 * but for `complete`, through a library opened with RTLD_DEEPBIND (planted.c), whose call binds
 * past LD_PRELOAD. Preloaded with VRAMTAP_COVERAGE=1 (`preload`, `complete`), CUPTI counts every
 * one and names the one interposition missed, none for `complete`; attached through CUPTI
 * (`attach`), all are recorded; `aside` is attached with no usable CUPTI: vramtap says so once
 * and records nothing, and the program runs as without it.
 * Usage: coverage preload|attach|complete|aside LIBPLANTED */
#define CUDA_ENABLE_DEPRECATED
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "check.h"

typedef CUresult (*planted_fn)(CUdeviceptr *, size_t);
typedef cudaError_t (*malloc_fn)(void **, size_t);

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int attach = !strcmp(argv[1], "attach"), complete = !strcmp(argv[1], "complete");
    int aside = !strcmp(argv[1], "aside");
    if (aside)
        printf("EXPECT no_snapshot\nEXPECT stderr ^vramtap:.attached.through.CUDA_INJECTION64_"
               "PATH,.but.CUPTI.is.too.old.*records.nothing 1\nEXPECT stderr vramtap 1\n");
    void *p, *host, *gone, *own;
    CUdeviceptr dp, planted_p;
    CHECK_EQ_INT(cudaMallocAsync(&gone, 500, 0), cudaSuccess);
    CHECK_EQ_INT(cudaFreeAsync(gone, 0), cudaSuccess);
    CHECK_EQ_INT(cudaMalloc(&p, 1000), cudaSuccess);
    CHECK_EQ_INT(cudaMallocHost(&host, 3000), cudaSuccess);
    CHECK_EQ_INT(cuMemAlloc_v2(&dp, 2000), CUDA_SUCCESS);
    void *rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
    malloc_fn rt_malloc = rt ? (malloc_fn)dlsym(rt, "cudaMalloc") : NULL;
    CHECK(rt_malloc != NULL);
    CHECK_EQ_INT(rt_malloc ? rt_malloc(&own, 700) : cudaErrorUnknown, cudaSuccess);
    if (aside)
        return CHECK_DONE();

    printf("EXPECT at_peak 0 0x%lx 1000 cudaMalloc\n", (unsigned long)p);
    printf("EXPECT at_peak 0 0x%lx 2000 cuMemAlloc_v2\n", (unsigned long)dp);
    /* preloaded, the driver wrapper under the runtime's own cudaMalloc records it */
    printf("EXPECT at_peak 0 0x%lx 700 %s\n", (unsigned long)own,
           attach ? "cudaMalloc" : "cuMemAlloc_v2");
    printf("EXPECT host_peak 3000\n");
    if (complete) {
        printf("EXPECT peak 0 3700\nEXPECT json coverage.cupti.allocations 5\n");
        printf("EXPECT json coverage.cupti.bytes 7200\nEXPECT json coverage.interposition.bytes "
               "7200\n");
        printf("EXPECT json coverage.missed {\"allocations\": 0, \"bytes\": 0, \"by_api\": {}}\n");
        printf("EXPECT report_line ^..coverage..CUPTI.saw.5.allocations.\\(7.03.KiB\\),."
               "interposition.recorded.5.\\(7.03.KiB\\):.none.missed$ 1\n");
        printf("EXPECT stderr WARNING 0\nEXPECT report_line WARNING 0\n");
        return CHECK_DONE();
    }

    void *lib = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    CHECK(lib != NULL);
    planted_fn planted = lib ? (planted_fn)dlsym(lib, "planted_alloc") : NULL;
    CHECK(planted != NULL);
    CHECK_EQ_INT(planted ? planted(&planted_p, 4096) : CUDA_ERROR_UNKNOWN, CUDA_SUCCESS);

    if (attach) {
        printf("EXPECT at_peak 0 0x%lx 4096 cuMemAlloc_v2\n", (unsigned long)planted_p);
        printf("EXPECT peak 0 7796\nEXPECT allocs 0 5\nEXPECT json attach \"cupti\"\n");
        printf("EXPECT stderr WARNING 0\nEXPECT report_line ^..recorded..through.CUPTI 1\n");
        return CHECK_DONE();
    }
    printf("EXPECT peak 0 3700\nEXPECT allocs 0 4\nEXPECT json attach \"preload\"\n");
    printf("EXPECT json coverage.source \"cupti\"\n");
    printf("EXPECT json coverage.cupti.allocations 6\nEXPECT json coverage.cupti.bytes 11296\n");
    printf("EXPECT json coverage.cupti.by_api {\"cudaMalloc\": {\"allocations\": 2, \"bytes\": "
           "1700}, \"cudaMallocAsync\": {\"allocations\": 1, \"bytes\": 500}, \"cudaMallocHost\": "
           "{\"allocations\": 1, \"bytes\": 3000}, \"cuMemAlloc_v2\": {\"allocations\": 2, "
           "\"bytes\": 6096}}\n");
    printf("EXPECT json coverage.interposition.allocations 5\n");
    printf("EXPECT json coverage.interposition.bytes 7200\n");
    printf("EXPECT json coverage.interposition.by_api {\"cudaMalloc\": {\"allocations\": 1, "
           "\"bytes\": 1000}, \"cudaMallocAsync\": {\"allocations\": 1, \"bytes\": 500}, "
           "\"cudaMallocHost\": {\"allocations\": 1, \"bytes\": 3000}, \"cuMemAlloc_v2\": "
           "{\"allocations\": 2, \"bytes\": 2700}}\n");
    printf("EXPECT json coverage.missed {\"allocations\": 1, \"bytes\": 4096, \"by_api\": "
           "{\"cuMemAlloc_v2\": {\"allocations\": 1, \"bytes\": 4096}}}\n");
    printf("EXPECT stderr ^vramtap:.WARNING:.interposition.missed.1.of.the.6.allocations.CUPTI."
           "saw..4096.of.11296.bytes.:.cuMemAlloc_v2.1; 1\n");
    printf("EXPECT report_line ^..WARNING:.coverage:.interposition.missed.1.of.the.6.allocations."
           "CUPTI.saw.\\(4.00.KiB.of.11.03.KiB\\),.through.cuMemAlloc_v2.\\(1,.4.00.KiB\\): 1\n");
    return CHECK_DONE();
}
