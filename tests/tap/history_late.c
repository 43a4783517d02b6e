/* A free the file would lose with the step in progress: with VRAMTAP_HISTORY_STEPS=1 the first
 * window holds step 0, where the peak is; an allocation born there after the peak is freed in
 * step 1, which raises no peak and is still in progress at exit, so the file leaves that step
 * out. The allocation's event in the first window says only its size and time: its death, its
 * birth and its address come from the step's free, taken into the copy as a late death. */
#include <inttypes.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "check.h"
#include "vramtap.h"

#define KiB 1024

static void *alloc(size_t n)
{
    void *p;
    CHECK_EQ_INT(cudaMalloc(&p, n), cudaSuccess);
    return p;
}

int main(void)
{
    void *late = NULL;
    uintptr_t late_at = 0;
    for (int s = 0; s < 2; s++) {
        vramtap_begin(VRAMTAP_FORWARD);
        void *a = alloc(s ? 8 * KiB : 100 * KiB);
        vramtap_end(VRAMTAP_FORWARD);
        vramtap_begin(VRAMTAP_BACKWARD);
        cudaFree(a);
        if (s == 0)
            late_at = (uintptr_t)(late = alloc(4 * KiB));
        else
            cudaFree(late);
        vramtap_end(VRAMTAP_BACKWARD);
        if (s == 1)
            break; /* the step is in progress at exit */
        vramtap_begin(VRAMTAP_OPTIMIZER);
        vramtap_end(VRAMTAP_OPTIMIZER);
    }
    printf("EXPECT peak 0 %d\n", 100 * KiB);
    printf("EXPECT history windows 1\nEXPECT history dropped 0\n");
    printf("EXPECT history 0 sizes +102400,-102400,+4096\n");
    printf("EXPECT history_death 4096 backward 1\n");
    printf("EXPECT history_birth 4096 backward 0 0x%" PRIxPTR "\n", late_at);
    return CHECK_DONE();
}
