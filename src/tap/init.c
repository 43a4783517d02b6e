/* Start and end of the library: configuration from the environment, the variables vramtap sets
 * for the program (NVTX injection, tensor mode, the Python bootstrap), fork handling, and the
 * snapshot at exit. Neither end calls CUDA: before main nothing is initialised, and at exit the
 * runtime has already torn itself down. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attach.h"
#include "batch.h"
#include "copies.h"
#include "grow.h"
#include "history.h"
#include "locks.h"
#include "notice.h"
#include "phase.h"
#include "snapshot.h"
#include "stacks.h"
#include "unwind.h"
#include "table.h"

VT_HIDDEN vt_config vt_cfg;
VT_HIDDEN VT_TLS int vt_depth;
VT_HIDDEN VT_TLS uint64_t vt_nested_pending;

static struct timespec start_mono;
static double start_wall;
static char *cmdline;
static size_t cmdline_len;

#define MAX_ENV_SET 16
static struct {
    char name[64];
    char value[4096];
} env_set[MAX_ENV_SET];
static int nenv_set;

static struct {
    const char *framework;
    const char *mode;
    const char *reason;
} modes[3];

static const char *const api_names[VT_API_COUNT] = {
#define VT_API_NAME(name) #name,
    VT_APIS(VT_API_NAME)
#undef VT_API_NAME
};

const char *vt_api_name(vt_api api)
{
    return (unsigned)api < VT_API_COUNT ? api_names[api] : "unknown";
}

const char *vt_kind_name(vt_kind kind)
{
    static const char *const names[] = {"device", "managed", "pool", "vmm", "host"};
    return (unsigned)kind < sizeof names / sizeof names[0] ? names[kind] : "device";
}

VT_HIDDEN int vt_use_tsc;
static uint64_t start_ticks;

double vt_mono_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - start_mono.tv_sec) + (double)(t.tv_nsec - start_mono.tv_nsec) * 1e-9;
}

uint64_t vt_clock_mono(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

uint64_t vt_ticks_per_second(void)
{
    if (!vt_use_tsc)
        return 1000000000u;
    double s = vt_mono_seconds();
    uint64_t t = vt_clock();
    return s < 0.01 ? 0 : (uint64_t)((double)(t - start_ticks) / s);
}

vt_timebase vt_clock_calibrate(void)
{
    return (vt_timebase){.ticks = vt_clock(), .seconds = vt_mono_seconds()};
}

double vt_seconds(const vt_timebase *tb, uint64_t ticks)
{
    if (!vt_use_tsc)
        return (double)(ticks - start_ticks) * 1e-9;
    if (tb->ticks <= start_ticks)
        return 0;
    return (double)(int64_t)(ticks - start_ticks) * tb->seconds / (double)(tb->ticks - start_ticks);
}

/* The TSC (or the ARM generic timer) counts at a constant rate when the kernel uses it as its
 * own clock source; anywhere else, clock_gettime. */
static void clock_init(void)
{
#if defined(__x86_64__)
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
    char src[64] = "";
    if (f) {
        if (!fgets(src, sizeof src, f))
            src[0] = 0;
        fclose(f);
    }
    vt_use_tsc = !strcmp(src, "tsc\n");
#elif defined(__aarch64__)
    vt_use_tsc = 1;
#endif
    start_ticks = vt_clock();
    clock_gettime(CLOCK_MONOTONIC, &start_mono);
}

/* Whether buffered events can be put in order (batch.h): one clock on every processor, read
 * with fences, and vouched for by the kernel. */
static int buffers_ordered(void)
{
#if defined(__x86_64__)
    return vt_use_tsc;
#else
    return 0;
#endif
}

double vt_start_unix(void)
{
    return start_wall;
}

void vt_log(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof buf - 2)
        n = sizeof buf - 2;
    buf[n++] = '\n';
    /* One write, so that lines from several threads and processes do not interleave. */
    ssize_t w = write(2, "vramtap: ", 9);
    w = write(2, buf, (size_t)n);
    (void)w;
}

const char *vt_cmdline(size_t *len)
{
    *len = cmdline_len;
    return cmdline;
}

void vt_env_note_set(const char *name, const char *value)
{
    if (nenv_set == MAX_ENV_SET)
        return;
    snprintf(env_set[nenv_set].name, sizeof env_set[0].name, "%s", name);
    snprintf(env_set[nenv_set].value, sizeof env_set[0].value, "%s", value);
    nenv_set++;
}

int vt_env_set_count(void)
{
    return nenv_set;
}

const char *vt_env_set_name(int i)
{
    return env_set[i].name;
}

const char *vt_env_set_value(int i)
{
    return env_set[i].value;
}

const char *vt_mode_of(const char *framework, const char **reason)
{
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        if (modes[i].framework && !strcmp(modes[i].framework, framework)) {
            *reason = modes[i].reason;
            return modes[i].mode;
        }
    }
    *reason = NULL;
    return NULL;
}

static void set_env(const char *name, const char *value)
{
    if (setenv(name, value, 1) == 0)
        vt_env_note_set(name, value);
}

static int env_int(const char *name, int def, int lo, int hi)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < lo || v > hi) {
        vt_log("%s=%s is not a number in [%d, %d]; using %d", name, s, lo, hi, def);
        return def;
    }
    return (int)v;
}

static void read_cmdline(void)
{
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    size_t cap = 0, len = 0;
    char *buf = NULL;
    while (!vt_grow(&buf, &cap, len + 1, 1, 4096)) {
        ssize_t n = read(fd, buf + len, cap - len);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    cmdline = buf;
    cmdline_len = buf ? len : 0;
}

/* A parent's vramtap (torchrun, a shell script, a data-loader worker's exec) left its settings
 * in the environment: they are vramtap's own, not the user's. It lists their names in
 * VRAMTAP_ENV_SET. */
static int inherited(const char *name, const char *value, const char *ours)
{
    const char *list = getenv("VRAMTAP_ENV_SET");
    size_t n = strlen(name);
    for (const char *p = list; p && *p; p += strcspn(p, ","), p += *p == ',') {
        if (!strncmp(p, name, n) && (p[n] == ',' || !p[n]))
            return !strcmp(value, ours);
    }
    return 0;
}

/* Tensor mode: each framework allocates per buffer through a stream-ordered pool, so vramtap
 * sees tensors instead of the allocator's segments. The user's own setting wins unless
 * VRAMTAP_MODE=tensor forces it. */
static void choose_modes(void)
{
    const char *mode = getenv("VRAMTAP_MODE");
    int forced_tensor = mode && !strcmp(mode, "tensor");
    int forced_native = mode && !strcmp(mode, "native");
    if (mode && *mode && !forced_tensor && !forced_native)
        vt_log("VRAMTAP_MODE=%s is neither 'tensor' nor 'native'; using the default", mode);
    /* PyTorch reads either name; PYTORCH_CUDA_ALLOC_CONF is the one every version knows. */
    static const struct {
        const char *framework, *var, *alias, *value;
    } fw[] = {
        {"pytorch", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "backend:cudaMallocAsync"},
        {"jax", "XLA_PYTHON_CLIENT_ALLOCATOR", NULL, "platform"},
        {"tensorflow", "TF_GPU_ALLOCATOR", NULL, "cuda_malloc_async"},
    };
    char names[256] = "";
    for (size_t i = 0; i < sizeof fw / sizeof fw[0]; i++) {
        const char *var = fw[i].var, *user = getenv(var);
        if (!user && fw[i].alias && (user = getenv(fw[i].alias)))
            var = fw[i].alias;
        if (user && inherited(var, user, fw[i].value))
            user = NULL;
        modes[i].framework = fw[i].framework;
        if (forced_native) {
            modes[i].mode = "native";
            modes[i].reason = "forced";
            continue;
        }
        if (user && !forced_tensor) {
            modes[i].mode = "native";
            modes[i].reason = "user-setting";
            if (!strcmp(fw[i].framework, "pytorch") && vt_cfg.is_python)
                vt_log("%s is set (%s): PyTorch keeps its own allocator, so vramtap sees its "
                       "segments, not tensors (native mode; VRAMTAP_MODE=tensor overrides)",
                       var, user);
            continue;
        }
        if (user && vt_cfg.is_python)
            vt_log("VRAMTAP_MODE=tensor: replacing %s=%s with %s", var, user, fw[i].value);
        set_env(fw[i].var, fw[i].value);
        if (user && var != fw[i].var)
            set_env(var, fw[i].value);
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", *names ? "," : "",
                 fw[i].var);
        /* JAX would still grab 75% of the card up front. */
        const char *pre = getenv("XLA_PYTHON_CLIENT_PREALLOCATE");
        if (!strcmp(fw[i].framework, "jax") &&
            (!pre || inherited("XLA_PYTHON_CLIENT_PREALLOCATE", pre, "false"))) {
            set_env("XLA_PYTHON_CLIENT_PREALLOCATE", "false");
            strncat(names, ",XLA_PYTHON_CLIENT_PREALLOCATE", sizeof names - strlen(names) - 1);
        }
        modes[i].mode = "tensor";
        modes[i].reason = user ? "forced" : "default";
    }
    if (*names)
        setenv("VRAMTAP_ENV_SET", names, 1);
}

/* Loaded by dlopen (a program or a Python module that asks for the C API) rather than
 * preloaded: the program has started and its environment is its own; vramtap changes none of
 * it, and the allocators are what the program chose. */
static int preloaded(void)
{
    const char *list = getenv("LD_PRELOAD");
    const char *self = strrchr(vt_cfg.self_path, '/');
    self = self ? self + 1 : vt_cfg.self_path;
    for (const char *p = list; p && *p;) {
        size_t n = strcspn(p, ": ");
        char entry[PATH_MAX], real[PATH_MAX];
        if (n && n < sizeof entry) {
            memcpy(entry, p, n);
            entry[n] = 0;
            const char *base = strrchr(entry, '/');
            if (realpath(entry, real) ? !strcmp(real, vt_cfg.self_path)
                                      : !strcmp(base ? base + 1 : entry, self))
                return 1;
        }
        p += n;
        p += *p != 0;
    }
    return 0;
}

/* Whether variable `name` names this library (CUDA_INJECTION64_PATH: attached through CUPTI,
 * either by `vramtap run --attach cupti` or by hand). */
static int names_self(const char *name)
{
    const char *v = getenv(name);
    char real[PATH_MAX];
    return v && *v && vt_cfg.self_path[0] && realpath(v, real) && !strcmp(real, vt_cfg.self_path);
}

/* The coverage check: the driver loads this library again as its injection library at cuInit
 * (the same copy: InitializeInjection finds it preloaded and only counts). */
static void coverage(void)
{
    const char *other = getenv("CUDA_INJECTION64_PATH");
    if (other && *other && !names_self("CUDA_INJECTION64_PATH")) {
        vt_log("VRAMTAP_COVERAGE=1: CUDA_INJECTION64_PATH already names %s, so the coverage "
               "check cannot run",
               other);
        return;
    }
    if (vt_cfg.self_path[0])
        set_env("CUDA_INJECTION64_PATH", vt_cfg.self_path);
}

static void keep_modes(void)
{
    static const char *const frameworks[] = {"pytorch", "jax", "tensorflow"};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        modes[i].framework = frameworks[i];
        modes[i].mode = "native";
        modes[i].reason = "not-preloaded";
    }
}

/* The PyTorch hooks correct the record when the program set the allocator itself after start. */
VT_EXPORT int vramtap_note_mode(const char *framework, const char *mode, const char *reason)
{
    static char saved[3][2][32];
    for (size_t i = 0; framework && mode && reason && i < sizeof modes / sizeof modes[0]; i++) {
        if (!modes[i].framework || strcmp(modes[i].framework, framework))
            continue;
        snprintf(saved[i][0], sizeof saved[i][0], "%s", mode);
        snprintf(saved[i][1], sizeof saved[i][1], "%s", reason);
        modes[i].mode = saved[i][0];
        modes[i].reason = saved[i][1];
        return 0;
    }
    return -1;
}

static int is_python(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return 0;
    exe[n] = 0;
    const char *slash = strrchr(exe, '/');
    return !strncmp(slash ? slash + 1 : exe, "python", 6);
}

/* The build's folders, read through volatile pointers: compared as constants, their lengths
 * set the size of the code that uses them, and with it where every function after it lies (the
 * pair at 1k live measured 4 ns apart between two build folders). */
static const char *volatile const build_root = VT_BUILD_ROOT;
static const char *volatile const pydir_build = VT_PYDIR_BUILD;
static const char *volatile const pydir_install = VT_PYDIR_INSTALL;

/* The directory whose sitecustomize.py installs the PyTorch hooks. */
static const char *bootstrap_dir(void)
{
    static char dir[PATH_MAX];
    /* A library in the build tree uses the source tree's files; an installed one, the installed
     * files; each falls back on the other. */
    const char *built = build_root;
    size_t root = strlen(built);
    int in_build = !strncmp(vt_cfg.self_path, built, root) && vt_cfg.self_path[root] == '/';
    const char *candidates[] = {getenv("VRAMTAP_PYDIR"), in_build ? pydir_build : pydir_install,
                                in_build ? pydir_install : pydir_build};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        if (!candidates[i])
            continue;
        snprintf(dir, sizeof dir, "%s/vramtap", candidates[i]);
        char probe[PATH_MAX + 32];
        snprintf(probe, sizeof probe, "%s/sitecustomize.py", dir);
        if (access(probe, R_OK) == 0)
            return dir;
    }
    return NULL;
}

static void python_bootstrap(void)
{
    const char *dir = bootstrap_dir();
    if (!dir) {
        vt_log("the Python bootstrap (sitecustomize.py) was not found: phases come only from "
               "NVTX and the C API");
        return;
    }
    const char *old = getenv("PYTHONPATH");
    if (old && (!strncmp(old, dir, strlen(dir)) && (old[strlen(dir)] == ':' || !old[strlen(dir)])))
        return;
    char buf[8192];
    snprintf(buf, sizeof buf, "%s%s%s", dir, old && *old ? ":" : "", old ? old : "");
    set_env("PYTHONPATH", buf);
}

static void self_path(void)
{
    Dl_info info;
    if (dladdr((void *)&self_path, &info) && info.dli_fname &&
        realpath(info.dli_fname, vt_cfg.self_path))
        return;
    vt_cfg.self_path[0] = 0;
}

/* The child of a fork starts with empty books; the interned stacks and modules stay valid
 * (same addresses). */
static void fork_child(void)
{
    vt_batch_reset_after_fork();
    vt_table_reset_after_fork();
    vt_history_reset_after_fork();
    vt_coverage_reset_after_fork();
    vt_copies_reset_after_fork();
    vt_locks_after_fork_child();
}

__attribute__((constructor)) static void vt_init(void)
{
    clock_init();
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    start_wall = (double)wall.tv_sec + (double)wall.tv_nsec * 1e-9;

    const char *disable = getenv("VRAMTAP_DISABLE");
    if (disable && *disable && strcmp(disable, "0")) {
        vt_cfg.disabled = 1;
        return;
    }
    vt_cfg.debug = env_int("VRAMTAP_DEBUG", 0, 0, 9);
    vt_locks_init(env_int("VRAMTAP_LOCK_BIAS", 1, 0, 1));
    vt_cfg.stacks = env_int("VRAMTAP_STACKS", 1, 0, 1);
    vt_cfg.python_stacks = env_int("VRAMTAP_PYTHON_STACKS", 1, 0, 2);
    vt_cfg.depth = env_int("VRAMTAP_DEPTH", VT_DEFAULT_DEPTH, 1, VT_MAX_DEPTH);
    vt_cfg.oom_max = env_int("VRAMTAP_OOM_MAX", 4, 0, 1000);
    vt_cfg.interim_s = env_int("VRAMTAP_INTERIM_S", 60, 0, 86400);
    vt_cfg.history_steps = env_int("VRAMTAP_HISTORY_STEPS", 3, 0, 1 << 20);
    vt_cfg.history_events = env_int("VRAMTAP_HISTORY_EVENTS", 1000000, 0, 1 << 28);
    vt_cfg.huge_slow_us = env_int("VRAMTAP_HUGE_SLOW_US", 1500, 0, 1 << 30);
    const char *buffers = getenv("VRAMTAP_THREAD_BUFFERS");
    vt_cfg.thread_buffers = buffers && !strcmp(buffers, "auto")
                                ? VT_BUFFERS_AUTO
                                : env_int("VRAMTAP_THREAD_BUFFERS", VT_BUFFERS_AUTO, 0, 1);
    if (vt_cfg.thread_buffers && !buffers_ordered()) {
        if (vt_cfg.thread_buffers == VT_BUFFERS_ALWAYS)
            vt_log("VRAMTAP_THREAD_BUFFERS=1 needs one clock for every processor, the TSC as the "
                   "kernel's clock source on x86-64; each event is recorded as it happens");
        vt_cfg.thread_buffers = VT_BUFFERS_OFF;
    }
    vt_buffers_init();
    const char *out = getenv("VRAMTAP_OUT");
    if (out && *out)
        snprintf(vt_cfg.out_dir, sizeof vt_cfg.out_dir, "%s", out);
    else if (!getcwd(vt_cfg.out_dir, sizeof vt_cfg.out_dir))
        snprintf(vt_cfg.out_dir, sizeof vt_cfg.out_dir, ".");
    snprintf(vt_cfg.prog, sizeof vt_cfg.prog, "%s", program_invocation_short_name);
    vt_cfg.is_python = is_python();
    read_cmdline();
    self_path();

    vt_cfg.preloaded = preloaded();
    if (vt_cfg.preloaded || names_self("CUDA_INJECTION64_PATH")) {
        if (vt_cfg.self_path[0] && !getenv("NVTX_INJECTION64_PATH"))
            set_env("NVTX_INJECTION64_PATH", vt_cfg.self_path);
        if (vt_cfg.preloaded && env_int("VRAMTAP_COVERAGE", 0, 0, 1))
            coverage();
        choose_modes();
        if (vt_cfg.is_python)
            python_bootstrap();
    } else {
        keep_modes();
    }
    vt_notice_init();
    vt_phase_init();
    vt_unwind_init();
    vt_history_init();
    vt_copies_init();
    pthread_atfork(vt_locks_before_fork, vt_locks_after_fork, fork_child);
}

__attribute__((destructor)) static void vt_fini(void)
{
    if (vt_cfg.disabled)
        return;
    vt_snapshot_write_exit();
    vt_notice_exit();
    vt_coverage_exit();
    vt_locks_debug();
    vt_batch_debug();
}
