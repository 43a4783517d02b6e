/* An output directory that cannot be written costs one line on stderr and nothing else: the
 * program's own exit status stands. The directory was fine at start (vramtap checked it) and
 * goes away during the run. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

int main(void)
{
    void *p;
    CHECK_EQ_INT(rmdir(getenv("VRAMTAP_OUT")), 0);
    CHECK_EQ_INT(cudaMalloc(&p, 1024), cudaSuccess);
    CHECK_EQ_INT(cudaFree(p), cudaSuccess);
    CHECK_EQ_INT(cudaMalloc(&p, (size_t)1 << 40), cudaErrorMemoryAllocation);
    printf("EXPECT stderr ^vramtap: 1\nEXPECT stderr cannot.write 1\n");
    return CHECK_DONE() ? 1 : 7;
}
