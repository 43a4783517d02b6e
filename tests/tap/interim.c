/* Interim snapshots are written at a step mark where a device's peak rose since the last one,
 * the first three at once, then at most one per VRAMTAP_INTERIM_S (run with 3600: no more).
 * After each mark the program reads its snapshot file's "steps": the step of the mark that last
 * wrote it, 0 while none did. */
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

/* The steps its snapshot file holds, 0 where there is no file yet. */
static long written_steps(void)
{
    char suffix[32], path[4096], buf[1 << 16];
    snprintf(suffix, sizeof suffix, ".%d.json", (int)getpid());
    DIR *d = opendir(getenv("VRAMTAP_OUT"));
    if (!d)
        return -1;
    long steps = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name), k = strlen(suffix);
        if (n < k || strcmp(e->d_name + n - k, suffix))
            continue;
        snprintf(path, sizeof path, "%s/%s", getenv("VRAMTAP_OUT"), e->d_name);
        FILE *f = fopen(path, "r");
        size_t got = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f)
            fclose(f);
        buf[got] = 0;
        /* the head's top-level count; other members named so hold a list */
        const char *at = buf;
        while ((at = strstr(at, "\"steps\": ")) && !isdigit((unsigned char)at[9]))
            at++;
        steps = at ? strtol(at + 9, NULL, 10) : -1;
    }
    closedir(d);
    return steps;
}

/* Marks a step; then the file holds `steps`. */
static void mark(long steps, int line)
{
    CHECK_EQ_INT(vramtap_step_mark(), VRAMTAP_OK);
    long got = written_steps();
    if (got != steps)
        fprintf(stderr, "interim.c:%d: the file holds steps %ld, expected %ld\n", line, got, steps);
    CHECK_EQ_INT(got, steps);
}

int main(void)
{
    void *a, *b, *c, *d;
    CHECK_EQ_INT(written_steps(), 0);
    CHECK_EQ_INT(cudaMalloc(&a, MiB), cudaSuccess);
    mark(1, __LINE__); /* the peak rose: written */
    mark(1, __LINE__); /* no allocation: not written */
    CHECK_EQ_INT(cudaMalloc(&b, MiB), cudaSuccess);
    mark(3, __LINE__); /* 2 MiB: written */
    CHECK_EQ_INT(cudaFree(b), cudaSuccess);
    CHECK_EQ_INT(cudaMalloc(&b, MiB), cudaSuccess);
    mark(3, __LINE__); /* back to 2 MiB, not past it: not written */
    CHECK_EQ_INT(cudaMalloc(&c, MiB), cudaSuccess);
    mark(5, __LINE__); /* 3 MiB: written, the third at once */
    CHECK_EQ_INT(cudaMalloc(&d, MiB), cudaSuccess);
    mark(5, __LINE__); /* 4 MiB, but within VRAMTAP_INTERIM_S of the third: not written */
    printf("EXPECT peak 0 %d\n", 4 * MiB);
    printf("EXPECT steps 6\n");
    printf("EXPECT json kind \"exit\"\n");
    return CHECK_DONE();
}
