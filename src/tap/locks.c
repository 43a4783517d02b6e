#include <errno.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "locks.h"

VT_HIDDEN atomic_int vt_lock_words[VT_LOCK_COUNT];

#ifdef VT_LOCK_CHECK
static const char *const names[VT_LOCK_COUNT] = {"driver",  "pylocs", "stacks", "modules",
                                                 "symbols", "mpaths", "state"};
/* The locks this thread holds, one bit each. */
static VT_TLS unsigned held;

void vt_lock_check_take(vt_lock_id id)
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

void vt_lock_check_give(vt_lock_id id)
{
    held &= ~(1u << id);
}
#endif

/* Threads blocked on each lock; counted only on the contended path, so taking a free lock
 * costs what it did. */
static atomic_int blocked[VT_LOCK_COUNT];

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* Spins before sleeping: the critical sections are a few dozen instructions, shorter than a
 * sleep and a wake (glibc's adaptive mutex spins as long). */
#define SPINS 100

void vt_lock_wait(vt_lock_id id)
{
    atomic_int *w = &vt_lock_words[id];
    atomic_fetch_add_explicit(&blocked[id], 1, memory_order_relaxed);
    for (int i = 0; i < SPINS; i++) {
        cpu_relax();
        int free_word = 0;
        if (atomic_load_explicit(w, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_weak_explicit(w, &free_word, 1, memory_order_acquire,
                                                  memory_order_relaxed))
            goto taken;
    }
    /* Marked 2 whoever holds it, so that its giver wakes a sleeper. */
    int saved = errno; /* the program's: the futex may say EAGAIN or EINTR */
    while (atomic_exchange_explicit(w, 2, memory_order_acquire) != 0)
        syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
    errno = saved;
taken:
    atomic_fetch_sub_explicit(&blocked[id], 1, memory_order_relaxed);
}

void vt_lock_wake(vt_lock_id id)
{
    int saved = errno;
    syscall(SYS_futex, &vt_lock_words[id], FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    errno = saved;
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
    /* The threads that were blocked are not in the child: nobody sleeps on a word. */
    for (int i = VT_LOCK_COUNT - 1; i >= 0; i--) {
        atomic_store_explicit(&blocked[i], 0, memory_order_relaxed);
        vt_lock_check_give((vt_lock_id)i);
        atomic_store_explicit(&vt_lock_words[i], 0, memory_order_release);
    }
}
