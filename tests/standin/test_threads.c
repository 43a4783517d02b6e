/* Thread safety: 8 threads allocate and free through every route at once and the books end
 * exactly where they started; a child forked meanwhile can use the stand-in.
 *
 * GCC 12's AddressSanitizer does not take its allocator's lock around fork, so a child forked
 * while another thread is inside malloc can block forever on that lock in its first malloc
 * (seen in about half the runs), whatever the stand-in does. Its ThreadSanitizer does not take
 * its own either (LLVM added that in 2024): a child forked while the workers ran hung once in a
 * fresh clone's test run on a loaded machine (none in 100 runs alone or beside two busy loops).
 * In those builds the child is forked after the workers finish: the stand-in's own fork handling
 * is tested in the plain build. */
#include "check.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

enum { THREADS = 8, OPS = 20000, SLOTS = 64 };

static void *worker(void *arg)
{
    unsigned long long rng = 0x9e3779b97f4a7c15ull * (uintptr_t)arg + 1;
    void *slot[SLOTS] = {0};
    int failures = 0;
    /* Odd threads work on device 1, so both devices' books are contended. */
    if ((uintptr_t)arg % 2 && cudaSetDevice(1) != cudaSuccess)
        failures++;
    for (int i = 0; i < OPS; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        int k = (int)(rng % SLOTS);
        size_t size = 1 + (rng >> 8) % 100000;
        if (slot[k]) {
            failures += (k % 3 == 1 ? cudaFreeAsync(slot[k], 0) : cudaFree(slot[k])) != 0;
            slot[k] = NULL;
        } else if (k % 3 == 0) {
            failures += cudaMalloc(&slot[k], size) != cudaSuccess;
        } else if (k % 3 == 1) {
            failures += cudaMallocAsync(&slot[k], size, 0) != cudaSuccess;
        } else {
            CUdeviceptr d;
            failures += cuMemAlloc(&d, size) != CUDA_SUCCESS;
            slot[k] = (void *)d;
        }
    }
    for (int k = 0; k < SLOTS; k++)
        if (slot[k])
            failures += cudaFree(slot[k]) != cudaSuccess;
    return (void *)(uintptr_t)failures;
}

static size_t used_on(int device)
{
    size_t free = 0, total = 0;
    CHECK_EQ_INT(cudaSetDevice(device), cudaSuccess);
    CHECK_EQ_INT(cudaMemGetInfo(&free, &total), cudaSuccess);
    return total - free;
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
enum { FORK_WHILE_WORKING = 0 };
#else
enum { FORK_WHILE_WORKING = 1 };
#endif

static void fork_and_use(void)
{
    pid_t child = fork();
    if (child == 0) {
        void *p;
        int ok = cudaMalloc(&p, 1000) == cudaSuccess && cudaFree(p) == cudaSuccess;
        _exit(ok ? 0 : 1);
    }
    int status = -1;
    CHECK_EQ_INT(waitpid(child, &status, 0), child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void)
{
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);

    /* Fork while the workers hold and release the books' lock. */
    if (FORK_WHILE_WORKING)
        fork_and_use();

    for (int i = 0; i < THREADS; i++) {
        void *failures;
        pthread_join(t[i], &failures);
        CHECK_EQ_INT((uintptr_t)failures, 0);
    }
    if (!FORK_WHILE_WORKING)
        fork_and_use();

    /* Only the pools' reservations remain; trimmed, the devices are empty again. */
    for (int d = 0; d < 2; d++) {
        cudaMemPool_t pool;
        CHECK_EQ_INT(cudaDeviceGetDefaultMemPool(&pool, d), cudaSuccess);
        cuuint64_t used = 1;
        CHECK_EQ_INT(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used),
                     cudaSuccess);
        CHECK_EQ_INT(used, 0);
        CHECK_EQ_INT(cudaMemPoolTrimTo(pool, 0), cudaSuccess);
        CHECK_EQ_INT(used_on(d), 0);
    }
    return CHECK_DONE();
}
