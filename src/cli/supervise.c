/* vramtap run's supervision: the job runs as a child, so that when it dies by a signal (the
 * kernel's OOM killer sends SIGKILL: no exit handler runs, no snapshot is written at exit)
 * someone is left to say which signal, whether the OOM killer sent it, and which snapshot the
 * job left. Signals sent to vramtap are passed on; those the terminal sends reach the job's
 * process group directly and are not sent a second time. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "supervise.h"

static volatile sig_atomic_t child_pid;

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM};
#define NFORWARDED (sizeof forwarded / sizeof forwarded[0])

/* si_code > 0 is the kernel's doing (a terminal's ^C goes to the whole foreground group);
 * <= 0 is kill(), sigqueue() or tgkill() from a process, aimed at vramtap alone. */
static void forward(int sig, siginfo_t *info, void *context)
{
    (void)context;
    if (child_pid > 0 && info->si_code <= 0)
        kill((pid_t)child_pid, sig);
}

/* The OOM killer's count for this process's cgroup (v2 memory.events or v1
 * memory.oom_control), -1 when there is none to read. */
static long long oom_kills(char *dir, size_t size)
{
    if (vt_cgroup_dir(dir, size))
        return -1;
    long long n = vt_cgroup_key(dir, "memory.events", "oom_kill");
    return n >= 0 ? n : vt_cgroup_key(dir, "memory.oom_control", "oom_kill");
}

/* The snapshot the job's first process left in out_dir: vramtap.<...>.<pid>.json. */
static int find_snapshot(const char *out_dir, pid_t pid, char *path, size_t size)
{
    DIR *d = opendir(out_dir);
    if (!d)
        return -1;
    char tail[32];
    snprintf(tail, sizeof tail, ".%d.json", (int)pid);
    size_t ntail = strlen(tail);
    int found = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n > ntail && !strncmp(e->d_name, "vramtap.", 8) &&
            !strcmp(e->d_name + n - ntail, tail)) {
            snprintf(path, size, "%s/%s", out_dir, e->d_name);
            found = 0;
            break;
        }
    }
    closedir(d);
    return found;
}

static void say_death(const char *prog, pid_t pid, int sig, long long kills_before,
                      const char *cgroup)
{
    const char *abbrev = sigabbrev_np(sig);
    fprintf(stderr, "vramtap run: %s (pid %d) was killed by SIG%s (signal %d)\n", prog, (int)pid,
            abbrev ? abbrev : "?", sig);
    char dir[4096];
    long long kills = kills_before >= 0 ? oom_kills(dir, sizeof dir) : -1;
    if (kills > kills_before)
        fprintf(stderr,
                "vramtap run: the kernel's OOM killer killed it: host memory ran out, not GPU "
                "memory (%s: oom_kill %lld -> %lld)\n",
                cgroup, kills_before, kills);
    else if (sig == SIGKILL && kills_before >= 0)
        fprintf(stderr, "vramtap run: not by the OOM killer of its cgroup (oom_kill stayed %lld)\n",
                kills_before);
    const char *out = getenv("VRAMTAP_OUT");
    char cwd[4096];
    if (!out || !*out)
        out = getcwd(cwd, sizeof cwd) ? cwd : ".";
    char snap[4352];
    if (find_snapshot(out, pid, snap, sizeof snap) == 0)
        fprintf(stderr,
                "vramtap run: its last snapshot is %s, an interim one written at a step mark "
                "before it died: vramtap report %s\n",
                snap, snap);
    else
        fprintf(stderr,
                "vramtap run: it left no snapshot in %s (an interim one is written at the first "
                "step marks where the peak rose; none had been)\n",
                out);
}

int vt_supervise(char **argv)
{
    char cgroup[4096];
    long long kills_before = oom_kills(cgroup, sizeof cgroup);
    int report[2];
    if (pipe2(report, O_CLOEXEC)) {
        fprintf(stderr, "vramtap run: cannot create a pipe: %s\n", strerror(errno));
        return 2;
    }
    sigset_t block, old;
    sigemptyset(&block);
    for (size_t i = 0; i < NFORWARDED; i++)
        sigaddset(&block, forwarded[i]);
    sigprocmask(SIG_BLOCK, &block, &old);
    pid_t pid = fork();
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        char self[32];
        snprintf(self, sizeof self, "%d", (int)getpid());
        /* the library knows by this that the command is the process the user started */
        setenv("VRAMTAP_ROOT_PID", self, 1);
        execvp(argv[0], argv);
        int e = errno;
        if (write(report[1], &e, sizeof e) < 0)
            _exit(127);
        _exit(127);
    }
    close(report[1]);
    if (pid < 0) {
        fprintf(stderr, "vramtap run: cannot start '%s': %s\n", argv[0], strerror(errno));
        close(report[0]);
        sigprocmask(SIG_SETMASK, &old, NULL);
        return 2;
    }
    child_pid = pid;
    struct sigaction sa = {.sa_sigaction = forward, .sa_flags = SA_SIGINFO | SA_RESTART};
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < NFORWARDED; i++)
        sigaction(forwarded[i], &sa, NULL);
    sigprocmask(SIG_SETMASK, &old, NULL);

    int exec_errno = 0;
    ssize_t got;
    while ((got = read(report[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR)
        ;
    close(report[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return 2;
    if (got == (ssize_t)sizeof exec_errno) {
        fprintf(stderr, "vramtap run: cannot run '%s': %s\n", argv[0], strerror(exec_errno));
        return 2;
    }
    if (WIFSIGNALED(status)) {
        say_death(argv[0], pid, WTERMSIG(status), kills_before, cgroup);
        return 128 + WTERMSIG(status);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 2;
}
