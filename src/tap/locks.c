#include <errno.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "locks.h"

VT_HIDDEN vt_lock_state vt_locks[VT_LOCK_COUNT];
VT_HIDDEN VT_TLS int vt_lock_slot;
VT_HIDDEN vt_lock_owners vt_lock_owner;
VT_HIDDEN vt_lock_flags vt_lock_inside[VT_LOCK_SLOTS + 1];
VT_HIDDEN vt_lock_turns vt_lock_passed;

/* Whether locks may be biased: membarrier() registered (vt_locks_init); cleared for good if it
 * ever fails. */
static atomic_int bias_ok;
/* The numbers handed out to threads so far. */
static atomic_int slots_given;
/* How often each lock was biased and revoked, for VRAMTAP_DEBUG. */
static atomic_uint grants[VT_LOCK_COUNT], revokes[VT_LOCK_COUNT];
/* The error of a membarrier() that failed after start-up (-1 for none said), which stopped the
 * biasing: VRAMTAP_DEBUG says so at exit, since the revoke that saw it held a lock. */
static atomic_int membarrier_errno;

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
    atomic_int *w = &vt_locks[id].word;
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
    syscall(SYS_futex, &vt_locks[id].word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    errno = saved;
}

/* Waits, holding the word, for `owner` to leave the lock it was biased to. Its flag is set
 * for a few dozen instructions, unless its thread was preempted inside. */
static void wait_outside(vt_lock_id id, int owner)
{
    atomic_uchar *inside = &vt_lock_inside[owner].in[id];
    const struct timespec pause = {0, 20000};
    for (int i = 0; atomic_load_explicit(inside, memory_order_acquire); i++) {
        if (i < SPINS)
            cpu_relax();
        else
            nanosleep(&pause, NULL);
    }
}

/* With the word held: takes the bias from thread `owner`. */
static void unbias(vt_lock_id id, int owner)
{
    atomic_store_explicit(&vt_lock_owner.of[id], 0, memory_order_seq_cst);
    atomic_fetch_add_explicit(&revokes[id], 1, memory_order_relaxed);
    int saved = errno;
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0)) {
        /* Registered at start-up, so not expected. Without the barrier the owner may not have
         * seen the revoke yet: its stores leave a core's buffer in far less than this pause. */
        atomic_store(&membarrier_errno, errno ? errno : -1);
        atomic_store(&bias_ok, 0);
        const struct timespec drain = {0, 1000000};
        nanosleep(&drain, NULL);
    }
    wait_outside(id, owner);
    errno = saved;
}

void vt_lock_turned(vt_lock_id id, unsigned run)
{
    vt_lock_state *l = &vt_locks[id];
    int passed = atomic_load_explicit(&vt_lock_passed.of[id], memory_order_relaxed);
    if (run >= VT_LOCK_SHORT_RUN) {
        l->short_runs = 0;
        if (passed)
            atomic_store_explicit(&vt_lock_passed.of[id], 0, memory_order_relaxed);
    } else if (++l->short_runs >= VT_LOCK_SHORT_RUNS && !passed) {
        atomic_store_explicit(&vt_lock_passed.of[id], 1, memory_order_relaxed);
    }
}

void vt_lock_after_word(vt_lock_id id)
{
    int me = vt_lock_slot;
    if (!me) {
        me = atomic_fetch_add_explicit(&slots_given, 1, memory_order_relaxed) + 1;
        vt_lock_slot = me = me < VT_LOCK_SLOTS ? me : VT_LOCK_SLOTS;
    }
    int owner = atomic_load_explicit(&vt_lock_owner.of[id], memory_order_relaxed);
    if (owner)
        unbias(id, owner);
    if (me != vt_locks[id].run_slot) {
        vt_lock_turned(id, vt_locks[id].run);
        vt_locks[id].run_slot = me;
        vt_locks[id].run = 0;
    } else if (vt_locks[id].run >= VT_LOCK_GRANT_AFTER) {
        vt_lock_turned(id, vt_locks[id].run); /* a long run, whoever comes next */
        vt_locks[id].run = 0;
        /* Seen by the next holder of the word, which revokes it, or by this thread's next
         * take, which goes in as owner. */
        if (me < VT_LOCK_SLOTS && atomic_load_explicit(&bias_ok, memory_order_relaxed)) {
            atomic_store_explicit(&vt_lock_owner.of[id], me, memory_order_relaxed);
            atomic_fetch_add_explicit(&grants[id], 1, memory_order_relaxed);
        }
    }
}

/* membarrier()'s private expedited command needs the process registered first. */
static int membarrier_ready(void)
{
    int saved = errno;
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    int ok = cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
             syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    errno = saved;
    return ok;
}

/* Why no lock is biased, for VRAMTAP_DEBUG; NULL while they may be. */
static const char *unbiased_because;

void vt_locks_init(int allowed)
{
    if (!allowed)
        unbiased_because = "VRAMTAP_LOCK_BIAS=0";
    else if (!membarrier_ready())
        unbiased_because = "no membarrier() here";
    atomic_store(&bias_ok, !unbiased_because);
}

void vt_locks_debug(void)
{
    if (unbiased_because) {
        vt_debug("the books' lock was never biased: %s", unbiased_because);
        return;
    }
    int failed = atomic_load(&membarrier_errno);
    char stopped[128] = "";
    if (failed)
        snprintf(stopped, sizeof stopped, "; then never again: membarrier() failed (%s)",
                 failed > 0 ? strerror(failed) : "no error number");
    vt_debug("the books' lock was biased %u times and revoked %u times%s",
             atomic_load(&grants[VT_LOCK_STATE]), atomic_load(&revokes[VT_LOCK_STATE]), stopped);
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
    /* The child's only thread took every lock before the fork; the other threads, the owners
     * they were and the flags they may have left up are not in the child. */
    memset(vt_lock_inside, 0, sizeof vt_lock_inside);
    atomic_store(&membarrier_errno, 0);
    if (!unbiased_because && !membarrier_ready())
        unbiased_because = "no membarrier() here";
    atomic_store(&bias_ok, !unbiased_because);
    /* The threads that were blocked are not in the child: nobody sleeps on a word. */
    for (int i = VT_LOCK_COUNT - 1; i >= 0; i--) {
        atomic_store_explicit(&vt_lock_owner.of[i], 0, memory_order_relaxed);
        atomic_store_explicit(&vt_lock_passed.of[i], 0, memory_order_relaxed);
        vt_locks[i].short_runs = 0;
        atomic_store_explicit(&grants[i], 0, memory_order_relaxed);
        atomic_store_explicit(&revokes[i], 0, memory_order_relaxed);
        atomic_store_explicit(&blocked[i], 0, memory_order_relaxed);
        vt_lock_check_give((vt_lock_id)i);
        atomic_store_explicit(&vt_locks[i].word, 0, memory_order_release);
    }
}
