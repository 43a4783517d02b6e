/* Offloaded state: ranges labelled through include/vramtap.h in pinned host memory are billed on
 * the host side by category; labelled pageable memory, a range labelled before its memory was
 * registered, one whose pinned memory was freed, and a labelled device allocation are not;
 * bytes labelled twice count once. The expected bill is in offload.py. */
#include <cuda_runtime_api.h>
#include <stdlib.h>

#include "check.h"
#include "vramtap.h"

enum { KiB = 1024 };

int main(void)
{
    char *pinned, *freed, *registered = malloc(64 * KiB), *pageable = malloc(256 * KiB);
    void *dev, *later;
    CHECK(registered && pageable);
    CHECK_EQ_INT(cudaMallocHost((void **)&pinned, 1024 * KiB), cudaSuccess);
    CHECK_EQ_INT(vramtap_label_range(pinned, 512 * KiB, "optimizer_state"), VRAMTAP_OK);
    CHECK_EQ_INT(vramtap_label_range(pinned + 512 * KiB, 256 * KiB, "parameters"), VRAMTAP_OK);
    /* inside the parameters' range: counted once, as parameters */
    CHECK_EQ_INT(vramtap_label_range(pinned + 640 * KiB, 64 * KiB, "gradients"), VRAMTAP_OK);

    CHECK_EQ_INT(vramtap_label_range(pageable, 256 * KiB, "parameters"), VRAMTAP_OK);
    CHECK_EQ_INT(vramtap_label_range(registered, 64 * KiB, "optimizer_state"), VRAMTAP_OK);
    CHECK_EQ_INT(cudaMalloc(&later, 4096), cudaSuccess); /* the books move on */
    CHECK_EQ_INT(cudaHostRegister(registered, 64 * KiB, cudaHostRegisterDefault), cudaSuccess);
    CHECK_EQ_INT(cudaMallocHost((void **)&freed, 128 * KiB), cudaSuccess);
    CHECK_EQ_INT(vramtap_label_range(freed, 128 * KiB, "parameters"), VRAMTAP_OK);
    CHECK_EQ_INT(cudaFreeHost(freed), cudaSuccess);
    CHECK_EQ_INT(cudaMalloc(&dev, 32 * KiB), cudaSuccess);
    CHECK_EQ_INT(vramtap_label_range(dev, 32 * KiB, "parameters"), VRAMTAP_OK);
    return CHECK_DONE();
}
