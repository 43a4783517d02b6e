#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "locks.h"

/* Adaptive: the critical sections are a few dozen instructions, shorter than a sleep and a
 * wake. */
static pthread_mutex_t locks[VT_LOCK_COUNT] = {
    [0 ... VT_LOCK_COUNT - 1] = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP,
};

#ifdef VT_LOCK_CHECK
static const char *const names[VT_LOCK_COUNT] = {"driver",  "pylocs", "stacks", "modules",
                                                 "symbols", "mpaths", "state"};
/* The locks this thread holds, one bit each. */
static VT_TLS unsigned held;

static void check_take(vt_lock_id id)
{
    /* Taking `id` is in order only when nothing at or after it is held. */
    if (held >> id) {
        for (int i = VT_LOCK_COUNT - 1; i >= 0; i--)
            if (held >> i & 1) {
                vt_log("lock order violated: taking '%s' while holding '%s'", names[id], names[i]);
                break;
            }
        abort();
    }
    held |= 1u << id;
}
#define CHECK_TAKE(id) check_take(id)
#define CHECK_GIVE(id) (held &= ~(1u << (id)))
#else
#define CHECK_TAKE(id) ((void)0)
#define CHECK_GIVE(id) ((void)0)
#endif

/* Threads blocked on each lock; counted only on the contended path, so taking a free lock
 * costs what it did. */
static atomic_int blocked[VT_LOCK_COUNT];

void vt_lock_take(vt_lock_id id)
{
    CHECK_TAKE(id);
    if (pthread_mutex_trylock(&locks[id]) == 0)
        return;
    atomic_fetch_add_explicit(&blocked[id], 1, memory_order_relaxed);
    pthread_mutex_lock(&locks[id]);
    atomic_fetch_sub_explicit(&blocked[id], 1, memory_order_relaxed);
}

void vt_lock_give(vt_lock_id id)
{
    pthread_mutex_unlock(&locks[id]);
    CHECK_GIVE(id);
}

void vt_lock_pass(vt_lock_id id)
{
    vt_lock_give(id);
    struct timespec pause = {0, 20000};
    for (int i = 0; i < 50 && atomic_load_explicit(&blocked[id], memory_order_relaxed) > 0; i++)
        nanosleep(&pause, NULL);
    vt_lock_take(id);
}

void vt_locks_before_fork(void)
{
    for (int i = 0; i < VT_LOCK_COUNT; i++)
        vt_lock_take((vt_lock_id)i);
}

void vt_locks_after_fork(void)
{
    for (int i = VT_LOCK_COUNT - 1; i >= 0; i--)
        vt_lock_give((vt_lock_id)i);
}

void vt_locks_after_fork_child(void)
{
    for (int i = 0; i < VT_LOCK_COUNT; i++)
        atomic_store_explicit(&blocked[i], 0, memory_order_relaxed);
    vt_locks_after_fork();
}
