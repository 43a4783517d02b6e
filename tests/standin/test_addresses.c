/* Synthetic addresses: 512-byte aligned, a fixed range per device and for managed memory, and
 * reused after free, as a real allocator reuses them. */
#include "check.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#define DEVICE0 0x700000000000ull
#define DEVICE1 0x710000000000ull
#define MANAGED 0x780000000000ull

enum { N = 2000 };

static struct {
    uintptr_t addr;
    size_t size;
} live[N];

static unsigned long long rng = 88172645463325252ull;
static unsigned long long next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int by_addr(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

/* Live allocations never overlap and all lie in device 0's range. */
static void check_disjoint(void)
{
    static uintptr_t sorted[N][2];
    int n = 0;
    for (int i = 0; i < N; i++)
        if (live[i].addr) {
            sorted[n][0] = live[i].addr;
            sorted[n++][1] = live[i].size;
        }
    qsort(sorted, (size_t)n, sizeof sorted[0], by_addr);
    int overlaps = 0, outside = 0;
    for (int i = 0; i < n; i++) {
        overlaps += i > 0 && sorted[i - 1][0] + sorted[i - 1][1] > sorted[i][0];
        outside += sorted[i][0] < DEVICE0 || sorted[i][0] + sorted[i][1] > DEVICE1;
    }
    CHECK_EQ_INT(overlaps, 0);
    CHECK_EQ_INT(outside, 0);
}

int main(void)
{
    /* First allocations are laid out from the start of device 0's range. */
    void *a, *b, *c;
    CHECK_EQ_INT(cudaMalloc(&a, 1000), cudaSuccess);
    CHECK_EQ_INT((uintptr_t)a, DEVICE0);
    CHECK_EQ_INT(cudaMalloc(&b, 1000), cudaSuccess);
    CHECK_EQ_INT((uintptr_t)b, DEVICE0 + 1024);

    /* A freed block's address is handed out again for the same size... */
    CHECK_EQ_INT(cudaFree(a), cudaSuccess);
    CHECK_EQ_INT(cudaMalloc(&c, 1000), cudaSuccess);
    CHECK(c == a);
    /* ...and freed neighbours merge into one range. */
    CHECK_EQ_INT(cudaFree(c), cudaSuccess);
    CHECK_EQ_INT(cudaFree(b), cudaSuccess);
    CHECK_EQ_INT(cudaMalloc(&c, 2048), cudaSuccess);
    CHECK(c == a);
    CHECK_EQ_INT(cudaFree(c), cudaSuccess);

    /* Every route draws from the same device range. */
    CUdeviceptr d;
    CHECK_EQ_INT(cuMemAlloc(&d, 300), CUDA_SUCCESS);
    CHECK_EQ_INT(d, DEVICE0);
    CHECK_EQ_INT(cuMemFree(d), CUDA_SUCCESS);
    CHECK_EQ_INT(cudaMallocAsync(&c, 5000, 0), cudaSuccess);
    CHECK_EQ_INT((uintptr_t)c, DEVICE0);
    CHECK_EQ_INT(cudaFreeAsync(c, 0), cudaSuccess);
    CHECK_EQ_INT(cudaMallocAsync(&c, 5000, 0), cudaSuccess);
    CHECK_EQ_INT((uintptr_t)c, DEVICE0);
    CHECK_EQ_INT(cudaFreeAsync(c, 0), cudaSuccess);

    /* Managed memory has a range of its own; device 1 another. */
    CHECK_EQ_INT(cudaMallocManaged(&c, 100, cudaMemAttachGlobal), cudaSuccess);
    CHECK_EQ_INT((uintptr_t)c, MANAGED);
    CHECK_EQ_INT(cudaFree(c), cudaSuccess);
    CHECK_EQ_INT(cudaSetDevice(1), cudaSuccess);
    CHECK_EQ_INT(cudaMalloc(&c, 100), cudaSuccess);
    CHECK_EQ_INT((uintptr_t)c, DEVICE1);
    CUdeviceptr base = 0;
    size_t size = 0;
    CHECK_EQ_INT(cuMemGetAddressRange(&base, &size, (CUdeviceptr)c + 99), CUDA_SUCCESS);
    CHECK_EQ_INT(base, DEVICE1);
    CHECK_EQ_INT(size, 100);
    CHECK_EQ_INT(cuMemGetAddressRange(&base, &size, (CUdeviceptr)c + 100), CUDA_ERROR_NOT_FOUND);
    CHECK_EQ_INT(cudaFree(c), cudaSuccess);
    CHECK_EQ_INT(cudaSetDevice(0), cudaSuccess);

    /* A long random run: alignment, no overlap, and the range stays compact through reuse. */
    unsigned long long reused = 0, aligned = 0, allocs = 0;
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < N; i++) {
            if (live[i].addr && next() % 2) {
                CHECK_EQ_INT(cudaFree((void *)live[i].addr), cudaSuccess);
                live[i].addr = 0;
            } else if (!live[i].addr && next() % 2) {
                size_t sz = 1 + next() % (64 << 10);
                void *p;
                CHECK_EQ_INT(cudaMalloc(&p, sz), cudaSuccess);
                live[i].addr = (uintptr_t)p;
                live[i].size = sz;
                allocs++;
                aligned += live[i].addr % 512 == 0;
                reused += live[i].addr < DEVICE0 + ((uintptr_t)N << 16);
            }
        }
        check_disjoint();
    }
    CHECK(allocs > 10 * N);
    CHECK_EQ_INT(aligned, allocs);
    CHECK_EQ_INT(reused, allocs);
    for (int i = 0; i < N; i++)
        if (live[i].addr)
            CHECK_EQ_INT(cudaFree((void *)live[i].addr), cudaSuccess);
    CHECK_EQ_INT(cudaMalloc(&c, 1), cudaSuccess);
    CHECK_EQ_INT((uintptr_t)c, DEVICE0);
    return CHECK_DONE();
}
