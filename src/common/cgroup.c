#include "cgroup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int vt_cgroup_dir(char *dir, size_t size)
{
    const char *given = getenv("VRAMTAP_CGROUP");
    if (given && *given) {
        snprintf(dir, size, "%s", given);
        return 0;
    }
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return -1;
    char line[4096];
    int found = -1;
    /* "ID:CONTROLLERS:PATH"; v2's is "0::PATH" */
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = 0;
        const char *controllers = c1 + 1, *path = c2 + 1;
        if (strstr(controllers, "memory")) {
            snprintf(dir, size, "/sys/fs/cgroup/memory%s", path);
            found = 0;
            break;
        }
        if (!strcmp(line, "0") && !*controllers) {
            snprintf(dir, size, "/sys/fs/cgroup%s", path);
            found = 0;
        }
    }
    fclose(f);
    return found;
}

long long vt_cgroup_key(const char *dir, const char *file, const char *key)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char k[64];
    long long n, found = -1;
    while (fscanf(f, "%63s %lld", k, &n) == 2)
        if (!strcmp(k, key))
            found = n;
    fclose(f);
    return found;
}

long long vt_cgroup_limit(const char *dir)
{
    static const char *const files[] = {"memory.max", "memory.limit_in_bytes"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[4200], text[64] = "";
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        int got = fgets(text, sizeof text, f) != NULL;
        fclose(f);
        if (!got)
            continue;
        if (!strncmp(text, "max", 3))
            return 0;
        char *end;
        long long v = strtoll(text, &end, 10);
        if (end == text || v < 0)
            continue;
        /* v1 says "unlimited" as LONG_MAX rounded down to a page */
        return v >= (1LL << 62) ? 0 : v;
    }
    return -1;
}
