/* A training-like process for outfiles.py: MIB MiB of parameters, two steps whose peaks rise (so
 * interim snapshots are written and replaced), then one request that fails for lack of memory
 * (a post-mortem). With `plant DIR`, it first plants symbolic links where its own files would
 * go, as someone else sharing VRAMTAP_OUT could: the snapshot's name and its temporary name,
 * and the post-mortem's name, pointing into DIR. Before the failure it prints the regular files
 * in VRAMTAP_OUT ("WRITTEN name interim|-"). The names are spelled out here on purpose:
 * they are what the documentation promises. */
#include <ctype.h>
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "vramtap.h"

#define MiB (1024 * 1024)

static void plant(const char *dir, const char *name, const char *target)
{
    char link[4096], to[4096];
    snprintf(link, sizeof link, "%s/%s", getenv("VRAMTAP_OUT"), name);
    snprintf(to, sizeof to, "%s/%s", dir, target);
    CHECK_EQ_INT(symlink(to, link), 0);
}

/* The files written so far that are not links, and whether each is an interim snapshot. */
static void list_written(void)
{
    DIR *d = opendir(getenv("VRAMTAP_OUT"));
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_type != DT_REG)
            continue;
        char path[4096], buf[256] = "";
        snprintf(path, sizeof path, "%s/%s", getenv("VRAMTAP_OUT"), e->d_name);
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        buf[n] = 0;
        if (f)
            fclose(f);
        printf("WRITTEN %s %s\n", e->d_name,
               strstr(buf, "\"kind\": \"interim\"") ? "interim" : "-");
    }
    if (d)
        closedir(d);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    size_t params = strtoull(argv[1], NULL, 10) * MiB;
    if (argc == 4 && !strcmp(argv[2], "plant")) {
        char host[256] = "", base[512], name[600];
        gethostname(host, sizeof host);
        host[strcspn(host, ".")] = 0;
        for (char *p = host; *p; p++)
            if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_')
                *p = '_';
        snprintf(base, sizeof base, "vramtap.tap_outfiles.%s.%d", host, (int)getpid());
        snprintf(name, sizeof name, "%s.json", base);
        plant(argv[3], name, "snapshot");
        snprintf(name, sizeof name, "%s.json.tmp", base);
        plant(argv[3], name, "temporary");
        snprintf(name, sizeof name, "%s.oom1.json", base);
        plant(argv[3], name, "postmortem");
    }
    void *p, *act, *big;
    CHECK_EQ_INT(cudaMalloc(&p, params), cudaSuccess);
    for (int step = 1; step <= 2; step++) {
        vramtap_begin(VRAMTAP_FORWARD);
        CHECK_EQ_INT(cudaMalloc(&act, (size_t)step * MiB), cudaSuccess);
        vramtap_end(VRAMTAP_FORWARD);
        vramtap_begin(VRAMTAP_OPTIMIZER);
        CHECK_EQ_INT(cudaFree(act), cudaSuccess);
        vramtap_end(VRAMTAP_OPTIMIZER);
    }
    list_written();
    CHECK_EQ_INT(cudaMalloc(&big, (size_t)1 << 40), cudaErrorMemoryAllocation);
    return CHECK_DONE();
}
