#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"
#include "hostram.h"
#include "json_out.h"
#include "snapshot_keys.h"

int64_t vt_hostram_rss(void)
{
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[128];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    char *p = strchr(buf, ' '); /* "size resident shared ...", in pages */
    if (!p)
        return -1;
    long long pages = strtoll(p + 1, NULL, 10);
    long page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (int64_t)pages * page : -1;
}

/* The "KEY: N kB" line of a /proc file, in bytes; -1 when absent. */
static int64_t proc_kib(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[256];
    size_t n = strlen(key);
    int64_t v = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') {
            v = strtoll(line + n + 1, NULL, 10) * 1024;
            break;
        }
    fclose(f);
    return v;
}

static int64_t pss_of(int pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/smaps_rollup", pid);
    return proc_kib(path, "Pss");
}

int vt_hostram_workers(int *pids, int64_t *pss, int max)
{
    /* every thread's children: a worker may have been started from any thread */
    DIR *tasks = opendir("/proc/self/task");
    if (!tasks)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(tasks))) {
        if (e->d_name[0] == '.')
            continue;
        char path[300];
        snprintf(path, sizeof path, "/proc/self/task/%s/children", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        int pid;
        while (fscanf(f, "%d", &pid) == 1) {
            if (n < max) {
                pids[n] = pid;
                pss[n] = pss_of(pid);
            }
            n++;
        }
        fclose(f);
    }
    closedir(tasks);
    return n;
}

static void write_workers(FILE *f, const vt_workers *w)
{
    fputs(", \"workers\": [", f);
    for (int i = 0; i < w->n; i++)
        fprintf(f, "%s{\"pid\": %d, \"pss_high_bytes\": %lld, \"pss_last_bytes\": %lld}",
                i ? ", " : "", w->w[i].pid, (long long)w->w[i].pss_high,
                (long long)w->w[i].pss_last);
    fputs("], \"workers_high_bytes\": ", f);
    vt_json_int_or_null(f, w->n || w->left_out ? w->sum_high : -1);
    fprintf(f, ", \"workers_left_out\": %llu", (unsigned long long)w->left_out);
}

void vt_hostram_write_json(FILE *f, const vt_ram *high, double high_time_s,
                           const vt_workers *workers)
{
    fputs(VT_JSON_KEY(VT_K_HOST_RAM) "{\"high_water_bytes\": ", f);
    vt_json_int_or_null(f, proc_kib("/proc/self/status", "VmHWM"));
    fputs(", \"sampled_high\": ", f);
    if (high->bytes > 0) {
        fprintf(f, "{\"bytes\": %lld, \"time_s\": ", (long long)high->bytes);
        vt_json_time(f, high_time_s);
        fprintf(f, ", \"phase\": \"%s\", \"step\": %u}", vt_phase_name(high->phase), high->step);
    } else {
        fputs("null", f);
    }
    write_workers(f, workers);
    fputs(", \"machine_bytes\": ", f);
    vt_json_int_or_null(f, proc_kib("/proc/meminfo", "MemTotal"));
    char dir[4096];
    long long limit = vt_cgroup_dir(dir, sizeof dir) ? -1 : vt_cgroup_limit(dir);
    fputs(", \"cgroup_limit_bytes\": ", f);
    vt_json_int_or_null(f, limit > 0 ? limit : -1);
    fputs("},\n", f);
}
