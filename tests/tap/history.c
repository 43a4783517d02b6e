/* The allocation history: with VRAMTAP_HISTORY_STEPS=2, the first window holds setup and steps
 * 0 and 1; steps 2 and 4 raise the peak, so step 2 is kept until step 4 replaces it; steps 3
 * and 5 are dropped. An allocation born in step 0 and freed in step 3 (a dropped step) keeps
 * its death, and its birth and address (its event in the first window says only its size and
 * time; the rest went with the free). With a cap of 5 events (argument "cap"), the first window is
 * the first five events, cut short, and every later event is counted as dropped. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "check.h"
#include "vramtap.h"

#define KiB 1024

static int events;

static void *alloc(size_t n)
{
    void *p;
    CHECK_EQ_INT(cudaMalloc(&p, n), cudaSuccess);
    events++;
    return p;
}

static void release(void *p)
{
    cudaFree(p);
    events++;
}

int main(int argc, char **argv)
{
    int cap = argc > 1 && !strcmp(argv[1], "cap");
    static const size_t act[] = {8 * KiB, 9 * KiB, 50 * KiB, 10 * KiB, 100 * KiB, 11 * KiB};
    void *param = alloc(64 * KiB), *grad = NULL, *state = NULL, *kept = NULL;
    uintptr_t kept_at = 0;
    for (int s = 0; s < 6; s++) {
        vramtap_begin(VRAMTAP_FORWARD);
        void *a = alloc(act[s]);
        if (s == 0)
            kept_at = (uintptr_t)(kept = alloc(4 * KiB));
        vramtap_end(VRAMTAP_FORWARD);
        vramtap_begin(VRAMTAP_BACKWARD);
        release(alloc(2 * KiB));
        if (s == 0)
            grad = alloc(64 * KiB);
        if (s == 3)
            release(kept);
        release(a);
        vramtap_end(VRAMTAP_BACKWARD);
        vramtap_begin(VRAMTAP_OPTIMIZER);
        if (s == 0)
            state = alloc(16 * KiB);
        vramtap_end(VRAMTAP_OPTIMIZER);
    }
    (void)param, (void)grad, (void)state;
    printf("EXPECT peak 0 %d\n", (64 + 4 + 64 + 16 + 100 + 2) * KiB - 4 * KiB);
    printf("EXPECT peak_at 0 backward 4\n");
    if (cap) {
        printf("EXPECT history windows 1\n");
        printf("EXPECT history 0 events 5\nEXPECT history 0 truncated true\n");
        printf("EXPECT history 0 sizes +65536,+8192,+4096,+2048,-2048\n");
        printf("EXPECT history dropped %d\n", events - 5);
        return CHECK_DONE();
    }
    printf("EXPECT history windows 2\nEXPECT history dropped 0\n");
    printf("EXPECT history 0 reason first_steps\nEXPECT history 0 devices 0\n");
    printf("EXPECT history 0 truncated false\n");
    printf("EXPECT history 0 sizes "
           "+65536,+8192,+4096,+2048,-2048,+65536,-8192,+16384,+9216,+2048,-2048,-9216\n");
    printf("EXPECT history 1 reason peak_step\nEXPECT history 1 devices 0\n");
    printf("EXPECT history 1 sizes +102400,+2048,-2048,-102400\n");
    printf("EXPECT history_death 4096 backward 3\n");
    printf("EXPECT history_birth 4096 forward 0 0x%" PRIxPTR "\n", kept_at);
    return CHECK_DONE();
}
