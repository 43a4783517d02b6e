/* The timeline: one record per phase instance for the first 64 steps, with live bytes at its
 * start, end and maximum; later instances folded into the summary. 70 steps of forward,
 * backward and optimizer through the C API, each step a little heavier than the last. */
#include <cuda_runtime_api.h>

#include "check.h"
#include "vramtap.h"

#define STEPS 70
#define KiB 1024

int main(void)
{
    void *param;
    CHECK_EQ_INT(cudaMalloc(&param, 64 * KiB), cudaSuccess);
    unsigned long long base = 64 * KiB, folded_max = 0;
    for (int s = 0; s < STEPS; s++) {
        size_t act = (size_t)(s + 1) * KiB;
        void *a, *t;
        vramtap_begin(VRAMTAP_FORWARD);
        CHECK_EQ_INT(cudaMalloc(&a, act), cudaSuccess);
        vramtap_end(VRAMTAP_FORWARD);
        vramtap_begin(VRAMTAP_BACKWARD);
        CHECK_EQ_INT(cudaMalloc(&t, 2 * KiB), cudaSuccess);
        cudaFree(t);
        cudaFree(a);
        vramtap_end(VRAMTAP_BACKWARD);
        vramtap_begin(VRAMTAP_OPTIMIZER);
        vramtap_end(VRAMTAP_OPTIMIZER);
        if (s < 64) {
            int r = 3 * s;
            printf("EXPECT timeline %d phase forward\nEXPECT timeline %d step %d\n", r, r, s);
            printf("EXPECT timeline %d instance %d\n", r, r + 1);
            printf("EXPECT timeline %d live_start %llu\n", r, base);
            printf("EXPECT timeline %d live_end %llu\n", r, base + act);
            printf("EXPECT timeline %d phase backward\n", r + 1);
            printf("EXPECT timeline %d live_max %llu\n", r + 1, base + act + 2 * KiB);
            printf("EXPECT timeline %d live_end %llu\n", r + 1, base);
            printf("EXPECT timeline %d phase optimizer\n", r + 2);
        } else if (base + act + 2 * KiB > folded_max) {
            folded_max = base + act + 2 * KiB;
        }
    }
    printf("EXPECT timeline_len %d\n", 3 * 64);
    printf("EXPECT timeline_summary instances %d\n", 3 * (STEPS - 64));
    printf("EXPECT timeline_summary first_step 64\nEXPECT timeline_summary last_step %d\n",
           STEPS - 1);
    printf("EXPECT timeline_summary live_max %llu\n", folded_max);
    printf("EXPECT steps %d\n", STEPS);
    return CHECK_DONE();
}
