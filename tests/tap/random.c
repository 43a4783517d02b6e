/* A long random sequence of allocations and frees on two devices. The program logs what it
 * did, then finds the peak and the live set at the peak offline, independently of vramtap:
 * the first moment each device's live bytes reached their maximum. */
#include <cuda_runtime_api.h>

#include "check.h"

#define OPS 200000
#define MAX_LIVE 4000

typedef struct {
    int dev;
    int alloc;
    uintptr_t addr;
    size_t size;
} event;

static event log_[OPS];
static void *slots[2][MAX_LIVE];
static size_t sizes[2][MAX_LIVE];
static int nslots[2];

int main(void)
{
    unsigned long long seed = 0x5eed;
    int n = 0;
    for (int i = 0; i < OPS; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        unsigned r = (unsigned)(seed >> 33);
        int dev = r & 1;
        int grow = (r >> 1) % 100 < 52; /* drifts upward, so the peak comes late */
        CHECK_EQ_INT(cudaSetDevice(dev), cudaSuccess);
        if ((grow && nslots[dev] < MAX_LIVE) || nslots[dev] == 0) {
            size_t size = 512 * (1 + (r >> 8) % 64);
            void *p;
            CHECK_EQ_INT(cudaMalloc(&p, size), cudaSuccess);
            slots[dev][nslots[dev]] = p;
            sizes[dev][nslots[dev]++] = size;
            log_[n++] = (event){dev, 1, (uintptr_t)p, size};
        } else {
            int k = (int)((r >> 8) % (unsigned)nslots[dev]);
            log_[n++] = (event){dev, 0, (uintptr_t)slots[dev][k], sizes[dev][k]};
            CHECK_EQ_INT(cudaFree(slots[dev][k]), cudaSuccess);
            slots[dev][k] = slots[dev][--nslots[dev]];
            sizes[dev][k] = sizes[dev][nslots[dev]];
        }
    }
    for (int dev = 0; dev < 2; dev++) {
        unsigned long long liveb = 0, peak = 0, allocs = 0;
        int peak_at = -1;
        for (int i = 0; i < n; i++) {
            if (log_[i].dev != dev)
                continue;
            if (log_[i].alloc) {
                allocs++;
                liveb += log_[i].size;
                if (liveb > peak) {
                    peak = liveb;
                    peak_at = i;
                }
            } else {
                liveb -= log_[i].size;
            }
        }
        /* Live at the peak: replay up to it with a set of live addresses. */
        static uintptr_t set[1 << 16];
        static size_t set_size[1 << 16];
        memset(set, 0, sizeof set);
        for (int i = 0; i <= peak_at; i++) {
            if (log_[i].dev != dev)
                continue;
            unsigned h = (unsigned)((log_[i].addr >> 9) * 2654435761u) & 0xffff;
            while (set[h] && set[h] != log_[i].addr)
                h = (h + 1) & 0xffff;
            if (log_[i].alloc) {
                set[h] = log_[i].addr;
                set_size[h] = log_[i].size;
            } else {
                /* Deletion by re-inserting the rest of the cluster keeps probing correct. */
                set[h] = 0;
                for (unsigned k = (h + 1) & 0xffff; set[k]; k = (k + 1) & 0xffff) {
                    uintptr_t a = set[k];
                    size_t sz = set_size[k];
                    set[k] = 0;
                    unsigned j = (unsigned)((a >> 9) * 2654435761u) & 0xffff;
                    while (set[j])
                        j = (j + 1) & 0xffff;
                    set[j] = a;
                    set_size[j] = sz;
                }
            }
        }
        for (unsigned h = 0; h < (1u << 16); h++)
            if (set[h])
                printf("EXPECT at_peak %d 0x%lx %zu cudaMalloc\n", dev, (unsigned long)set[h],
                       set_size[h]);
        printf("EXPECT peak %d %llu\nEXPECT live_at_end %d %llu\nEXPECT allocs %d %llu\n", dev,
               peak, dev, liveb, dev, allocs);
    }
    printf("EXPECT counter unknown_frees 0\nEXPECT counter dropped 0\n");
    return CHECK_DONE();
}
