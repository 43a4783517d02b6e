/* Forward-only marks (an inference server: the step never advances) over 1M phase instances:
 * the timeline keeps its first VT_TIMELINE_MAX (1024) records and folds the rest into the
 * summary, so vramtap's memory stays under its documented bound (1024 records of about 800
 * bytes; the program allows 4 MiB of resident growth, where 1M records would take 800 MiB). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "vramtap.h"

#define INSTANCES 1000000
#define KEPT 1024
#define BOUND_KIB 4096

static long rss_kib(void)
{
    char line[256];
    long kib = -1;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            sscanf(line + 6, "%ld", &kib);
    if (f)
        fclose(f);
    return kib;
}

int main(void)
{
    vramtap_begin(VRAMTAP_FORWARD); /* the first span allocates the timeline's storage */
    vramtap_end(VRAMTAP_FORWARD);
    long before = rss_kib();
    for (int i = 1; i < INSTANCES; i++) {
        vramtap_begin(VRAMTAP_FORWARD);
        vramtap_end(VRAMTAP_FORWARD);
    }
    long grown = rss_kib() - before;
    fprintf(stderr, "resident memory grew %ld KiB over %d phase instances\n", grown, INSTANCES);
    CHECK(before > 0 && grown < BOUND_KIB);
    /* After the marks, so that they are not each a device memory sample. */
    void *p;
    CHECK_EQ_INT(cudaMalloc(&p, 4096), cudaSuccess);
    printf("EXPECT timeline_len %d\n", KEPT);
    printf("EXPECT timeline %d phase forward\nEXPECT timeline %d instance %d\n", KEPT - 1, KEPT - 1,
           KEPT);
    printf("EXPECT timeline_summary instances %d\n", INSTANCES - KEPT);
    printf("EXPECT timeline_summary first_step 0\nEXPECT timeline_summary last_step 0\n");
    printf("EXPECT timeline_summary live_max 0\nEXPECT steps 0\n");
    printf("EXPECT json bounds.timeline {\"cap\": %d, \"dropped\": %d}\n", KEPT, INSTANCES - KEPT);
    return CHECK_DONE();
}
