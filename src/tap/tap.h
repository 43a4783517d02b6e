/* Internal declarations shared by the preload library's subsystems: configuration, clock,
 * logging, the recursion guard and the names of the APIs it records. */
#ifndef VT_TAP_H
#define VT_TAP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define VT_HIDDEN __attribute__((visibility("hidden")))
#define VT_EXPORT __attribute__((visibility("default")))
#define VT_TLS __thread __attribute__((tls_model("initial-exec")))
/* For code that runs inside a sanitizer runtime's own start-up (its interceptors look up the
 * real functions with dlsym before it can check anything). */
#define VT_NO_SANITIZE __attribute__((no_sanitize("address", "undefined", "thread")))

/* The default streams' handles, as cuda.h names them (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD)
 * for files that do not include it; a null stream is one of the two, as the form of the call
 * says. */
#define VT_STREAM_LEGACY ((uintptr_t)1)
#define VT_STREAM_PER_THREAD ((uintptr_t)2)

/* Devices beyond this ordinal are counted in `dropped`, not recorded. */
#define VT_MAX_DEVICES 32

/* Every API that makes memory, in snapshot spelling; `framework` is an out-of-memory error
 * raised by the framework without a failed call. One list: the enum and the names. */
#define VT_APIS(X)                                                                                 \
    X(cudaMalloc)                                                                                  \
    X(cudaMallocAsync)                                                                             \
    X(cudaMallocFromPoolAsync)                                                                     \
    X(cudaMallocManaged)                                                                           \
    X(cudaMallocPitch)                                                                             \
    X(cudaMalloc3D)                                                                                \
    X(cudaMallocHost)                                                                              \
    X(cudaHostAlloc)                                                                               \
    X(cuMemAlloc_v2)                                                                               \
    X(cuMemAllocPitch_v2)                                                                          \
    X(cuMemAllocManaged)                                                                           \
    X(cuMemAllocAsync)                                                                             \
    X(cuMemAllocFromPoolAsync)                                                                     \
    X(cuMemCreate)                                                                                 \
    X(cuMemHostAlloc)                                                                              \
    X(cuMemAllocHost_v2)                                                                           \
    X(framework)

typedef enum {
#define VT_API_ENUM(name) VT_API_##name,
    VT_APIS(VT_API_ENUM)
#undef VT_API_ENUM
        VT_API_COUNT
} vt_api;

typedef enum { VT_KIND_DEVICE, VT_KIND_MANAGED, VT_KIND_POOL, VT_KIND_VMM, VT_KIND_HOST } vt_kind;

VT_HIDDEN const char *vt_api_name(vt_api api);
VT_HIDDEN const char *vt_kind_name(vt_kind kind);

/* Configuration, read once from the environment by the constructor. */
typedef struct {
    int disabled;       /* VRAMTAP_DISABLE=1, or vramtap stepped aside */
    int debug;          /* VRAMTAP_DEBUG=1: route decisions on stderr */
    int stacks;         /* VRAMTAP_STACKS (default 1) */
    int python_stacks;  /* VRAMTAP_PYTHON_STACKS: 0 off, 1 (default) read, 2 follow calls */
    int depth;          /* VRAMTAP_DEPTH: native frames kept */
    int oom_max;        /* VRAMTAP_OOM_MAX (default 4) */
    int interim_s;      /* VRAMTAP_INTERIM_S: seconds between interim snapshots, 0 none */
    int history_steps;  /* VRAMTAP_HISTORY_STEPS: steps in the history's first window */
    int history_events; /* VRAMTAP_HISTORY_EVENTS: events the history keeps, 0 none */
    int huge_slow_us;   /* VRAMTAP_HUGE_SLOW_US: the history's huge pages, too slow past this */
    int thread_buffers; /* VRAMTAP_THREAD_BUFFERS, where the clock allows it (batch.h) */
    int is_python;      /* the program is a Python interpreter */
    int preloaded;      /* loaded by LD_PRELOAD: the wrappers record, CUPTI only counts */
    char out_dir[4096]; /* VRAMTAP_OUT (default: working directory at start) */
    char prog[256];     /* short program name */
    char self_path[4096];
} vt_config;

extern VT_HIDDEN vt_config vt_cfg;

/* Time stamps are raw ticks (the TSC where the kernel trusts it, else CLOCK_MONOTONIC in ns):
 * a stamp is taken on every event, so it must cost less than clock_gettime. vt_seconds turns
 * ticks into seconds since start, interpolating between the start and a time base taken by
 * vt_clock_calibrate() (each writer its own). */
typedef struct {
    uint64_t ticks;
    double seconds; /* monotonic seconds from start to `ticks` */
} vt_timebase;
extern VT_HIDDEN int vt_use_tsc;
VT_HIDDEN uint64_t vt_clock_mono(void); /* CLOCK_MONOTONIC in ns */
/* Inline: two readings per allocation/free pair. */
static inline uint64_t vt_clock(void)
{
#if defined(__x86_64__)
    if (vt_use_tsc)
        return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
    if (vt_use_tsc) {
        uint64_t v;
        __asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
        return v;
    }
#endif
    return vt_clock_mono();
}
VT_HIDDEN vt_timebase vt_clock_calibrate(void);

/* A hash of a run of words (frames, return addresses): each folded in by vt_hash_fold, from a
 * seed, then vt_hash_end. Thread-local caches index their slots by it. */
static inline uint64_t vt_hash_fold(uint64_t h, uint64_t word)
{
    return (h ^ word) * 0x9e3779b97f4a7c15ULL;
}

static inline uint64_t vt_hash_end(uint64_t h)
{
    return h ^ h >> 32;
}
/* vt_clock's ticks per second: measured against the monotonic clock since start where the
 * clock is the TSC, 0 until 10 ms have passed. */
VT_HIDDEN uint64_t vt_ticks_per_second(void);
VT_HIDDEN double vt_seconds(const vt_timebase *tb, uint64_t ticks);
/* Seconds since start from CLOCK_MONOTONIC: for the rare moments that pace themselves. */
VT_HIDDEN double vt_mono_seconds(void);
VT_HIDDEN double vt_start_unix(void);

/* One line on stderr, prefixed "vramtap: ". vt_warn_once keeps a flag per call site. */
VT_HIDDEN void vt_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define vt_warn_once(...)                                                                          \
    do {                                                                                           \
        static atomic_int warned_;                                                                 \
        if (!atomic_exchange(&warned_, 1))                                                         \
            vt_log(__VA_ARGS__);                                                                   \
    } while (0)
#define vt_debug(...)                                                                              \
    do {                                                                                           \
        if (vt_cfg.debug)                                                                          \
            vt_log(__VA_ARGS__);                                                                   \
    } while (0)

/* The recursion guard: a wrapped runtime call that reaches a wrapped driver function underneath
 * is one logical allocation. vt_guard_enter returns 1 for the outermost call on this thread. */
extern VT_HIDDEN VT_TLS int vt_depth;
static inline int vt_guard_enter(void)
{
    return vt_depth++ == 0;
}
/* Nested calls seen by this thread and not yet added to the counters (which need the lock). */
extern VT_HIDDEN VT_TLS uint64_t vt_nested_pending;
static inline void vt_guard_leave(void)
{
    vt_depth--;
}

/* Process-wide facts the snapshot reports. */
VT_HIDDEN const char *vt_cmdline(size_t *len);
VT_HIDDEN void vt_env_note_set(const char *name, const char *value);
VT_HIDDEN int vt_env_set_count(void);
VT_HIDDEN const char *vt_env_set_name(int i);
VT_HIDDEN const char *vt_env_set_value(int i);
VT_HIDDEN const char *vt_mode_of(const char *framework, const char **reason);

#endif
