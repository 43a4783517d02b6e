/* Host RAM beside device memory: 256 MiB of pageable memory loaded (touched) before the first
 * device allocation, whose new peak is sampled; freed before exit, so only the high-water mark
 * and the sample remember it. usage: tap_host_ram; prints the load in bytes. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

enum { LOAD = 256 << 20 };

int main(void)
{
    char *checkpoint = malloc(LOAD);
    CHECK(checkpoint != NULL);
    if (!checkpoint)
        return CHECK_DONE();
    memset(checkpoint, 1, LOAD);
    void *p;
    CHECK_EQ_INT(cudaMalloc(&p, 1 << 20), cudaSuccess);
    CHECK_EQ_INT(cudaFree(p), cudaSuccess);
    long sum = 0;
    for (size_t i = 0; i < LOAD; i += 4096)
        sum += checkpoint[i];
    free(checkpoint);
    CHECK_EQ_INT(sum, LOAD / 4096);
    printf("%d\n", LOAD);
    return CHECK_DONE();
}
