/* An output directory that cannot be written costs one line on stderr and nothing else: the
 * program's own exit status stands. */
#include <cuda_runtime_api.h>

#include "check.h"

int main(void)
{
    void *p;
    CHECK_EQ_INT(cudaMalloc(&p, 1024), cudaSuccess);
    CHECK_EQ_INT(cudaFree(p), cudaSuccess);
    CHECK_EQ_INT(cudaMalloc(&p, (size_t)1 << 40), cudaErrorMemoryAllocation);
    printf("EXPECT stderr ^vramtap: 1\nEXPECT stderr cannot.write 1\n");
    return CHECK_DONE() ? 1 : 7;
}
