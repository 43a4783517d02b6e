#include <fcntl.h>
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

void vt_hostram_write_json(FILE *f, const vt_ram *high, double high_time_s)
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
    fputs(", \"machine_bytes\": ", f);
    vt_json_int_or_null(f, proc_kib("/proc/meminfo", "MemTotal"));
    char dir[4096];
    long long limit = vt_cgroup_dir(dir, sizeof dir) ? -1 : vt_cgroup_limit(dir);
    fputs(", \"cgroup_limit_bytes\": ", f);
    vt_json_int_or_null(f, limit > 0 ? limit : -1);
    fputs("},\n", f);
}
