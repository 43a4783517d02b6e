/* Threads that free what other threads allocated, in rounds a barrier separates: every thread
 * allocates, then every thread frees what the next one allocated. With each thread's events
 * buffered and applied in batches (VRAMTAP_THREAD_BUFFERS=1, or left to itself while threads take
 * turns on the books) the books must end as they do without buffers: the peak is every thread's
 * blocks of the largest round at once, no free is unknown (an allocation is applied before the
 * free another thread made of it), and the blocks each thread keeps at its end (no event of its
 * own after them) are live at exit. Two waves of threads: the second takes over the buffers the
 * first left. Before them, two threads allocate and free in strict turns: the books' lock sees
 * a turn at every take, so that events are buffered without VRAMTAP_THREAD_BUFFERS too. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define THREADS 4
#define BLOCKS 300 /* a round's blocks per thread: more than a buffer holds */
#define ROUNDS 6
#define KEPT 3
#define KEPT_BYTES 4096

static void *blocks[THREADS][BLOCKS];
static pthread_barrier_t turn;

static size_t round_bytes(int r)
{
    return 512 * (size_t)(1 + (r * 5) % 7);
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < BLOCKS; i++)
            if (cudaMalloc(&blocks[t][i], round_bytes(r)) != cudaSuccess)
                return (void *)1;
        pthread_barrier_wait(&turn);
        for (int i = 0; i < BLOCKS; i++)
            if (cudaFree(blocks[(t + 1) % THREADS][i]) != cudaSuccess)
                return (void *)1;
        pthread_barrier_wait(&turn);
    }
    for (int i = 0; i < KEPT; i++) {
        void *p;
        if (cudaMalloc(&p, KEPT_BYTES) != cudaSuccess)
            return (void *)1;
    }
    return NULL;
}

#define TURNS 600
static pthread_mutex_t turns_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turns_cond = PTHREAD_COND_INITIALIZER;
static int whose;

static void *in_turns(void *arg)
{
    int me = (int)(intptr_t)arg;
    for (int i = 0; i < TURNS; i++) {
        pthread_mutex_lock(&turns_lock);
        while (whose != me)
            pthread_cond_wait(&turns_cond, &turns_lock);
        pthread_mutex_unlock(&turns_lock);
        void *p;
        int bad = cudaMalloc(&p, 256) != cudaSuccess || cudaFree(p) != cudaSuccess;
        pthread_mutex_lock(&turns_lock);
        whose = !me;
        pthread_cond_signal(&turns_cond);
        pthread_mutex_unlock(&turns_lock);
        if (bad)
            return (void *)1;
    }
    return NULL;
}

int main(void)
{
    CHECK_EQ_INT(pthread_barrier_init(&turn, NULL, THREADS), 0);
    check_threads(2, in_turns);
    check_threads(THREADS, worker);
    check_threads(THREADS, worker); /* takes over the buffers of the threads before */
    size_t largest = 0;
    for (int r = 0; r < ROUNDS; r++)
        largest = round_bytes(r) > largest ? round_bytes(r) : largest;
    int allocs = 2 * THREADS * (ROUNDS * BLOCKS + KEPT) + 2 * TURNS;
    int frees = 2 * THREADS * ROUNDS * BLOCKS + 2 * TURNS;
    /* the kept blocks of the first wave are live through the second's rounds */
    printf("EXPECT peak 0 %zu\n", THREADS * KEPT * (size_t)KEPT_BYTES + THREADS * BLOCKS * largest);
    printf("EXPECT live_at_end 0 %d\n", 2 * THREADS * KEPT * KEPT_BYTES);
    printf("EXPECT allocs 0 %d\n", allocs);
    printf("EXPECT counter allocs %d\nEXPECT counter frees %d\n", allocs, frees);
    printf("EXPECT counter unknown_frees 0\nEXPECT counter dropped 0\n");
    printf("EXPECT history_times_ordered %d\n", allocs + frees);
    /* VRAMTAP_DEBUG=1 says what was buffered: nothing with VRAMTAP_THREAD_BUFFERS=0, else events
     * from the turns' buffers at least (a device's first allocations are recorded at once) */
    const char *debug = getenv("VRAMTAP_DEBUG"), *buffers = getenv("VRAMTAP_THREAD_BUFFERS");
    if (debug && !strcmp(debug, "1"))
        printf("EXPECT stderr ^vramtap:\\sthread\\sbuffers:\\s[1-9][0-9]*\\sevents\\sapplied %d\n",
               !(buffers && !strcmp(buffers, "0")));
    return CHECK_DONE();
}
