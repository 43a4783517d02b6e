/* Every lock of the preload library, and the rules for holding them.
 *
 * The library runs inside someone else's threads, at moments it does not choose: inside dlopen
 * (a library constructor that allocates holds the dynamic loader's lock), inside fork, on a
 * thread that may be cancelled, on threads that hold or wait for Python's GIL. So:
 *
 *   1. Locks are taken in the order of vt_lock_id, never the other way. In practice each is a
 *      leaf: nothing in the library takes a second lock while it holds one; the order is what
 *      the fork handler follows, and what a debug build checks (it aborts on a violation).
 *   2. Under any vramtap lock: no loader call (dlopen, dlsym, dladdr, dl_iterate_phdr: they take
 *      the loader's lock, which a thread inside dlopen holds while it waits for ours), no GIL,
 *      no file or terminal I/O (a slow disk would stall every allocating thread), no CUDA call.
 *      malloc is allowed: fork takes the allocator's locks after ours.
 *   3. Critical sections are O(1) on the allocation path; the writer copies what a file needs
 *      and does the rest unlocked.
 *   4. One pthread_atfork registration (init.c) takes every lock in order before fork and
 *      releases them after, in parent and child (the child's only thread is the one that took
 *      them). */
#ifndef VT_LOCKS_H
#define VT_LOCKS_H

#include <stdatomic.h>

#include "tap.h"

typedef enum {
    VT_LOCK_DRIVER,  /* resolve.c: libcuda's function addresses, filled once */
    VT_LOCK_PYLOCS,  /* pystack.c: interned Python code locations */
    VT_LOCK_STACKS,  /* stacks.c: interned stacks */
    VT_LOCK_MODULES, /* modules.c: loaded objects seen in stacks */
    VT_LOCK_SYMBOLS, /* symbols.c: ELF symbol tables read by the writer */
    VT_LOCK_MPATHS,  /* mpath.c: interned nn.Module paths */
    VT_LOCK_STATE,   /* table.c: the books (live set, peaks, phases, timeline, counters) */
    VT_LOCK_COUNT
} vt_lock_id;

/* A lock is a word: 0 free, 1 held, 2 held while a thread may sleep on it (a futex), and a
 * bias. Taking a free word and giving one nobody waits for are one atomic instruction each,
 * inline: the books are taken twice per allocation/free pair, and glibc's adaptive mutex cost
 * about 90 instructions a pair of calls there (callgrind).
 *
 * The bias: a thread that takes a lock many times in a row (VT_LOCK_GRANT_AFTER) is made its
 * owner, and then takes and gives it with no atomic instruction at all: it says it is inside
 * (its flag in vt_lock_inside), and goes in while it is still the owner. Another thread that
 * wants the lock takes the word, revokes the bias (owner 0) and waits for the owner's flag to
 * fall. The owner stores its flag and then loads the owner, the revoker stores the owner and
 * then loads the flag: each side must see the other's store (Dekker), which takes a full
 * barrier on each. The owner's side has a compiler barrier only; the revoker's membarrier()
 * system call makes one happen on every running thread of the process, the owner's included
 * (the use its manual page gives). Where the kernel has no membarrier, or with
 * VRAMTAP_LOCK_BIAS=0, no lock is biased. Even while it lasts a bias costs a revoke, a system
 * call of about a microsecond, whenever another thread takes the lock: a thread earns it by a
 * run of takes a thousand times longer. */
typedef struct {
    _Alignas(64) atomic_int word;
    /* The run of takes of the word by one thread (`run_slot`), counted by its holder: beside
     * the word, so that a take moves one line between processors, not three. */
    int run_slot;
    unsigned run;
    unsigned short_runs; /* runs of takes shorter than VT_LOCK_SHORT_RUN in a row */
} vt_lock_state;
extern VT_HIDDEN vt_lock_state vt_locks[VT_LOCK_COUNT];

/* Whether threads pass a lock between them all the time: set after VT_LOCK_SHORT_RUNS runs of
 * takes in a row each shorter than VT_LOCK_SHORT_RUN (threads allocating at the same time), clear
 * after a longer run (a PyTorch step's threads take turns phase by phase, thousands of takes
 * each). Read without the lock (the books read it at every allocation): a line of its own. */
#define VT_LOCK_SHORT_RUN 16
#define VT_LOCK_SHORT_RUNS 16
typedef struct {
    _Alignas(64) atomic_int of[VT_LOCK_COUNT];
} vt_lock_turns;
extern VT_HIDDEN vt_lock_turns vt_lock_passed;
/* With the word held, when this thread takes it after another thread's run of `run` takes. */
VT_HIDDEN void vt_lock_turned(vt_lock_id id, unsigned run);

/* Biased threads are numbered 1 to VT_LOCK_SLOTS - 1; 0: not numbered yet; VT_LOCK_SLOTS: a
 * thread past the numbers, never biased. */
#define VT_LOCK_SLOTS 64
#define VT_LOCK_GRANT_AFTER 1024
extern VT_HIDDEN VT_TLS int vt_lock_slot;
/* Each lock's owner (a thread's number), 0 for none: read at every take, written seldom, on a
 * cache line of its own (the words beside it are written at every take of the word). */
typedef struct {
    _Alignas(64) atomic_int of[VT_LOCK_COUNT];
} vt_lock_owners;
extern VT_HIDDEN vt_lock_owners vt_lock_owner;
/* A thread's flags, one per lock, set while it is inside as owner; a cache line per thread.
 * Entries 0 (not numbered yet) and VT_LOCK_SLOTS (past the numbers) are never set, as no lock is
 * ever biased to them: a give reads its thread's flag without testing the number first. */
typedef struct {
    _Alignas(64) atomic_uchar in[VT_LOCK_COUNT];
} vt_lock_flags;
extern VT_HIDDEN vt_lock_flags vt_lock_inside[VT_LOCK_SLOTS + 1];

/* The contended paths: spin a little, then sleep until the holder gives the lock. */
VT_HIDDEN void vt_lock_wait(vt_lock_id id);
VT_HIDDEN void vt_lock_wake(vt_lock_id id);
/* With the word just taken: revokes another thread's bias, numbers this thread, starts or ends
 * its run of takes (and makes it the owner at the end of one). */
VT_HIDDEN void vt_lock_after_word(vt_lock_id id);
/* Once, at start-up: whether locks may be biased (`allowed`, VRAMTAP_LOCK_BIAS, and
 * membarrier() is there). */
VT_HIDDEN void vt_locks_init(int allowed);
/* At exit, with VRAMTAP_DEBUG: how often the books' lock was biased and revoked. */
VT_HIDDEN void vt_locks_debug(void);
#ifdef VT_LOCK_CHECK
VT_HIDDEN void vt_lock_check_take(vt_lock_id id);
VT_HIDDEN void vt_lock_check_give(vt_lock_id id);
#else
static inline void vt_lock_check_take(vt_lock_id id)
{
    (void)id;
}
static inline void vt_lock_check_give(vt_lock_id id)
{
    (void)id;
}
#endif

static inline void vt_lock_take(vt_lock_id id)
{
    vt_lock_check_take(id);
    int me = vt_lock_slot;
    if (me && atomic_load_explicit(&vt_lock_owner.of[id], memory_order_relaxed) == me) {
        atomic_uchar *inside = &vt_lock_inside[me].in[id];
        atomic_store_explicit(inside, 1, memory_order_relaxed);
        atomic_signal_fence(memory_order_seq_cst);
        if (__builtin_expect(
                atomic_load_explicit(&vt_lock_owner.of[id], memory_order_acquire) == me, 1))
            return;
        atomic_store_explicit(inside, 0, memory_order_release);
    }
    int free_word = 0;
    if (!atomic_compare_exchange_strong_explicit(&vt_locks[id].word, &free_word, 1,
                                                 memory_order_acquire, memory_order_relaxed))
        vt_lock_wait(id);
    if (!me || atomic_load_explicit(&vt_lock_owner.of[id], memory_order_relaxed)) {
        vt_lock_after_word(id);
    } else if (me != vt_locks[id].run_slot) {
        vt_lock_turned(id, vt_locks[id].run);
        vt_locks[id].run_slot = me;
        vt_locks[id].run = 0;
    } else if (++vt_locks[id].run >= VT_LOCK_GRANT_AFTER) {
        vt_lock_after_word(id);
    }
}

static inline void vt_lock_give(vt_lock_id id)
{
    vt_lock_check_give(id);
    int me = vt_lock_slot;
    if (atomic_load_explicit(&vt_lock_inside[me].in[id], memory_order_relaxed)) {
        atomic_store_explicit(&vt_lock_inside[me].in[id], 0, memory_order_release);
        return;
    }
    if (atomic_exchange_explicit(&vt_locks[id].word, 0, memory_order_release) == 2)
        vt_lock_wake(id);
}

/* For a holder that takes a lock many times in a row (the writer copying the books in steps):
 * releases it and, while another thread is blocked on it, waits a little (at most about a
 * millisecond) for that thread to have its turn before taking it again. A mutex is not fair: a
 * holder that unlocks and relocks at once keeps winning against a sleeper that has to be woken,
 * and on two cores an allocating thread was seen to wait 0.45 s through hundreds of steps. */
VT_HIDDEN void vt_lock_pass(vt_lock_id id);

/* The fork handlers: every lock in order before; released after, in parent and child. */
VT_HIDDEN void vt_locks_before_fork(void);
VT_HIDDEN void vt_locks_after_fork(void);
/* The child's: the threads that were blocked are not in it. */
VT_HIDDEN void vt_locks_after_fork_child(void);

#endif
