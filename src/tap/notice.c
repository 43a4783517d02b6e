/* What vramtap tells the user on stderr without being asked: under `vramtap run`, what it
 * changed for Python frameworks, once at start; an unusable VRAMTAP_OUT at once, not after the job;
 * at exit, one line per file written, or that nothing was written. Processes that merely inherit
 * the preload (shells, git, compile workers) stay silent unless they allocate: only the process the
 * user started says "nothing seen". VRAMTAP_QUIET=1 silences all of it but the warnings. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "notice.h"
#include "table.h"

#define MAX_FILES 8

static int quiet, root_pid;
static char unusable_out[512]; /* VRAMTAP_OUT as given, when it could not be used */
static struct {
    char path[PATH_MAX];
    int oom_n; /* 0: the snapshot */
} files[MAX_FILES];
static int nfiles, more_files;

/* The process the user started is the first one to load vramtap; `vramtap run` names itself
 * (the command takes its pid). Children inherit the variable, or the parent's memory when
 * forked, and know by their pid that they are not it. */
static void find_root(void)
{
    const char *r = getenv("VRAMTAP_ROOT_PID");
    root_pid = r && *r ? atoi(r) : 0;
    if (root_pid > 0)
        return;
    root_pid = (int)getpid();
    char pid[32];
    snprintf(pid, sizeof pid, "%d", root_pid);
    setenv("VRAMTAP_ROOT_PID", pid, 1);
}

static int is_root(void)
{
    return (int)getpid() == root_pid;
}

/* A directory that does not exist or cannot be written would lose the whole job's data at
 * exit: say so now and use the working directory, for the children too (said once). */
static void check_out_dir(void)
{
    const char *given = getenv("VRAMTAP_OUT");
    if (!given || !*given)
        return;
    struct stat st;
    const char *why = NULL;
    if (stat(given, &st) != 0)
        why = strerror(errno);
    else if (!S_ISDIR(st.st_mode))
        why = "not a directory";
    else if (access(given, W_OK | X_OK) != 0)
        why = strerror(errno);
    char abs[PATH_MAX];
    if (!why && realpath(given, abs)) {
        snprintf(vt_cfg.out_dir, sizeof vt_cfg.out_dir, "%s", abs);
        return;
    }
    if (!why)
        why = strerror(errno);
    if (!getcwd(vt_cfg.out_dir, sizeof vt_cfg.out_dir))
        snprintf(vt_cfg.out_dir, sizeof vt_cfg.out_dir, ".");
    snprintf(unusable_out, sizeof unusable_out, "%s", given);
    setenv("VRAMTAP_OUT", vt_cfg.out_dir, 1);
    vt_log("VRAMTAP_OUT=%s: %s; snapshots go to the working directory (%s) instead", given, why,
           vt_cfg.out_dir);
}

/* `vramtap run` asks for this once. The settings concern Python frameworks only, so the first
 * Python process says it (the command itself, or one a shell script starts) and the variable
 * goes so that its own children do not repeat it; any other program stays silent and passes
 * the ask on (to each Python program it starts: they cannot tell each other). */
static void say_changes(void)
{
    const char *ask = getenv("VRAMTAP_ANNOUNCE");
    if (!ask || !vt_cfg.is_python)
        return;
    unsetenv("VRAMTAP_ANNOUNCE");
    if (quiet)
        return;
    char list[1024] = "";
    size_t used = 0;
    for (int i = 0; i < vt_env_set_count() && used < sizeof list; i++) {
        const char *name = vt_env_set_name(i);
        if (strcmp(name, "PYTORCH_CUDA_ALLOC_CONF") && strcmp(name, "PYTORCH_ALLOC_CONF") &&
            strncmp(name, "XLA_PYTHON_CLIENT_", 18) && strcmp(name, "TF_GPU_ALLOCATOR"))
            continue;
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s=%s", used ? ", " : "", name,
                                 vt_env_set_value(i));
    }
    if (*list)
        vt_log("tensor mode: set %s so that frameworks allocate per tensor "
               "(--mode native keeps their own allocators)",
               list);
    else
        vt_log("allocator settings left as they are (native mode)");
}

void vt_notice_init(void)
{
    const char *q = getenv("VRAMTAP_QUIET");
    quiet = q && *q && strcmp(q, "0");
    find_root();
    check_out_dir();
    say_changes();
}

/* Writers run on any thread, unlocked: the list is kept under the state lock. */
static void note_written_locked(const char *path, int oom_n)
{
    for (int i = 0; i < nfiles; i++)
        if (!strcmp(files[i].path, path))
            return;
    if (nfiles == MAX_FILES) {
        more_files++;
        return;
    }
    snprintf(files[nfiles].path, sizeof files[0].path, "%s", path);
    files[nfiles++].oom_n = oom_n;
}

void vt_notice_written(const char *path, int oom_n)
{
    vt_lock();
    note_written_locked(path, oom_n);
    vt_unlock();
}

/* The units the `vramtap` command prints. */
static const char *fmt_bytes(char buf[32], uint64_t b)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
    if (b < 1024) {
        snprintf(buf, 32, "%llu B", (unsigned long long)b);
        return buf;
    }
    double v = (double)b / 1024;
    int u = 0;
    while (v >= 1024 && u < 3) {
        v /= 1024;
        u++;
    }
    snprintf(buf, 32, "%.2f %s", v, units[u]);
    return buf;
}

/* "cuda:0 peak 76.50 MiB in backward of step 1, cuda:1 peak ..." */
static void peaks(char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = 0;
    vt_lock();
    int markers = vt_state.markers;
    for (int d = 0; d < VT_MAX_DEVICES && used < len; d++) {
        const vt_device *dev = &vt_state.dev[d];
        if (!dev->used)
            continue;
        char b[32];
        used += (size_t)snprintf(buf + used, len - used, "%scuda:%d peak %s", used ? ", " : "", d,
                                 fmt_bytes(b, dev->peak));
        if (used >= len)
            break;
        if (markers)
            used += (size_t)snprintf(buf + used, len - used, " in %s of step %u",
                                     vt_phase_name(dev->peak_phase), dev->peak_step);
        else
            used += (size_t)snprintf(buf + used, len - used, " (no phase markers)");
    }
    vt_unlock();
}

void vt_notice_exit(void)
{
    if (quiet)
        return;
    const char *fallback =
        *unusable_out ? " (VRAMTAP_OUT was unusable: in the working directory)" : "";
    char what[1024];
    peaks(what, sizeof what);
    for (int i = 0; i < nfiles; i++) {
        if (files[i].oom_n)
            vt_log("out-of-memory post-mortem %d written%s; to read it: vramtap report %s",
                   files[i].oom_n, fallback, files[i].path);
        else
            vt_log("snapshot written, %s%s; to read it: vramtap report %s", what, fallback,
                   files[i].path);
    }
    if (more_files)
        vt_log("%d more post-mortems in %s", more_files, vt_cfg.out_dir);
    vt_lock();
    int made = vt_state.made_device_alloc;
    vt_unlock();
    if (!made && is_root())
        vt_log("no CUDA device allocation seen in %s (pid %d): no snapshot written", vt_cfg.prog,
               (int)getpid());
}
