#include <pthread.h>
#include <stdlib.h>

#include "locks.h"

/* Adaptive: the critical sections are a few dozen instructions, shorter than a sleep and a
 * wake. */
static pthread_mutex_t locks[VT_LOCK_COUNT] = {
    [0 ... VT_LOCK_COUNT - 1] = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP,
};

#ifdef VT_LOCK_CHECK
static const char *const names[VT_LOCK_COUNT] = {"driver",  "pylocs",  "stacks",
                                                 "modules", "symbols", "state"};
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

void vt_lock_take(vt_lock_id id)
{
    CHECK_TAKE(id);
    pthread_mutex_lock(&locks[id]);
}

void vt_lock_give(vt_lock_id id)
{
    pthread_mutex_unlock(&locks[id]);
    CHECK_GIVE(id);
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
