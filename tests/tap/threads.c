/* 8 threads x 100k operations on two devices: every allocation and free is counted once, the
 * books end where the program's own account ends, and the history holds every event in an order
 * whose times never go back. */
#include <cuda_runtime_api.h>
#include <pthread.h>

#include "check.h"

#define THREADS 8
#define OPS 100000
#define KEEP 16

static unsigned long long kept_bytes[THREADS];

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    int dev = t & 1;
    cudaSetDevice(dev);
    int nheld = 0;
    for (int i = 0; i < OPS / 2; i++) {
        void *p;
        size_t size = 256 * (1 + (size_t)((i * 7 + t) % 32));
        if (cudaMalloc(&p, size) != cudaSuccess)
            return (void *)1;
        if (i % (OPS / 2 / KEEP) == 0 && nheld < KEEP) {
            nheld++; /* kept live to the end */
            kept_bytes[t] += size;
        } else if (cudaFree(p) != cudaSuccess) {
            return (void *)1;
        }
    }
    return NULL;
}

int main(void)
{
    check_threads(THREADS, worker);
    unsigned long long live[2] = {0, 0};
    for (int t = 0; t < THREADS; t++)
        live[t & 1] += kept_bytes[t];
    printf("EXPECT live_at_end 0 %llu\nEXPECT live_at_end 1 %llu\n", live[0], live[1]);
    printf("EXPECT allocs 0 %d\nEXPECT allocs 1 %d\n", THREADS / 2 * OPS / 2,
           THREADS / 2 * OPS / 2);
    printf("EXPECT counter allocs %d\n", THREADS * OPS / 2);
    printf("EXPECT counter frees %d\n", THREADS * (OPS / 2 - KEEP));
    printf("EXPECT counter unknown_frees 0\nEXPECT counter dropped 0\n");
    printf("EXPECT history_times_ordered %d\n", THREADS * OPS / 2 + THREADS * (OPS / 2 - KEEP));
    return CHECK_DONE();
}
