/* The allocation history's pages: huge pages where the system gives them, until populating 2 MiB
 * of them took longer than VRAMTAP_HUGE_SLOW_US of CPU; small pages from then on, for the books'
 * tables made after that too. The program keeps 200,000 allocations live (the table of live
 * allocations grows past 2 MiB, where it is mapped apart) and writes 200,000 pairs of events
 * (about 19 MB, with VRAMTAP_HISTORY_EVENTS=500,000 mapped as 48,000,000 bytes), then reads
 * its own /proc/self/smaps: the events' mapping (one or two areas side by side, marked
 * MAP_NORESERVE, 48,000,000 bytes in all), the huge pages in it, and the other areas that ask
 * for huge pages (the table):
 *   slow  (VRAMTAP_HUGE_SLOW_US=1: every populate is too slow): the first populate may leave two
 *         huge pages, then none: at most 4 MiB, and the later pages are marked "no huge pages";
 *         no other area asks for them;
 *   off   (VRAMTAP_HUGE_SLOW_US=0): no huge page at all in the events, no other area asking;
 *   bare  (VRAMTAP_HUGE_SLOW_US=0 and no history, VRAMTAP_HISTORY_EVENTS=0): no area asks;
 *   never (VRAMTAP_HUGE_SLOW_US at its largest): where the system gives huge pages on request
 *         (transparent_hugepage not "never"), at least 8 MiB of them; the table asks for them.
 * A kernel without transparent huge pages refuses the hints: nothing differs there. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define PAIRS 200000
#define LIVE 200000
#define EVENTS_BYTES 48000000ull /* 500,000 events of up to three 32-byte units */
#define PAGE 4096ull

typedef struct {
    unsigned long long start, end, huge_kib;
    int noreserve, no_huge, asks_huge;
} area;

static int has_flag(const char *vmflags, const char *flag)
{
    size_t n = strlen(flag);
    for (const char *p = vmflags; (p = strstr(p, flag)); p += n)
        if ((p == vmflags || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0))
            return 1;
    return 0;
}

/* The areas marked MAP_NORESERVE or asking for huge pages, in address order: at most `max`. */
static int areas(area *out, int max)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    int n = 0;
    area cur = {0};
    int have = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long a, b, kib;
        char vmflags[256];
        if (sscanf(line, "%llx-%llx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            cur = (area){.start = a, .end = b};
            have = 1;
        } else if (have && sscanf(line, "AnonHugePages: %llu kB", &kib) == 1) {
            cur.huge_kib = kib;
        } else if (have && sscanf(line, "VmFlags: %255[^\n]", vmflags) == 1) {
            cur.noreserve = has_flag(vmflags, "nr");
            cur.no_huge = has_flag(vmflags, "nh");
            cur.asks_huge = has_flag(vmflags, "hg");
            if ((cur.noreserve || cur.asks_huge) && n < max)
                out[n++] = cur;
            have = 0;
        }
    }
    fclose(f);
    return n;
}

/* transparent_hugepage's setting ("always [madvise] never"), or "" where the kernel has none. */
static void thp_setting(char *s, size_t len)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    s[0] = 0;
    if (f) {
        if (!fgets(s, (int)len, f))
            s[0] = 0;
        fclose(f);
    }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    static void *keep[LIVE];
    for (int i = 0; i < LIVE; i++)
        CHECK_EQ_INT(cudaMalloc(&keep[i], 512), cudaSuccess);
    for (int i = 0; i < PAIRS; i++) {
        void *p;
        CHECK_EQ_INT(cudaMalloc(&p, 512), cudaSuccess);
        CHECK_EQ_INT(cudaFree(p), cudaSuccess);
    }
    area a[256];
    int n = areas(a, 256), bare = !strcmp(mode, "bare");
    CHECK(bare ? n >= 0 : n > 0);
    /* the events' mapping: areas side by side, marked MAP_NORESERVE, that make up its size */
    unsigned long long want = (EVENTS_BYTES + PAGE - 1) / PAGE * PAGE, huge_kib = 0;
    int first = -1, last = -1, no_huge_areas = 0, others_asking = 0;
    for (int i = 0; i < n && first < 0; i++) {
        unsigned long long size = 0;
        for (int j = i; j < n && a[j].noreserve && (j == i || a[j].start == a[j - 1].end); j++)
            if ((size += a[j].end - a[j].start) == want) {
                first = i, last = j;
                break;
            }
    }
    CHECK(bare ? first < 0 : first >= 0);
    for (int i = 0; i < n; i++) {
        if (i >= first && i <= last) {
            huge_kib += a[i].huge_kib;
            no_huge_areas += a[i].no_huge;
        } else {
            others_asking += a[i].asks_huge;
        }
    }
    printf("events' mapping: %llu KiB in huge pages, %d area(s) without; %d other area(s) asking "
           "for them\n",
           huge_kib, no_huge_areas, others_asking);
    char thp[128];
    thp_setting(thp, sizeof thp);
    if (!thp[0]) {
        /* madvise() refuses both hints: the library never switches, and nothing differs */
        printf("this kernel has no transparent huge pages: nothing to compare\n");
        printf("EXPECT stderr small.pages.from.here.on 0\n");
    } else if (bare) {
        CHECK_EQ_INT(others_asking, 0);
        printf("EXPECT stderr small.pages.from.here.on 0\n");
    } else if (!strcmp(mode, "slow")) {
        CHECK(huge_kib <= 4096);
        CHECK_EQ_INT(no_huge_areas, 1);
        CHECK_EQ_INT(others_asking, 0);
        printf("EXPECT stderr small.pages.from.here.on 1\n");
    } else if (!strcmp(mode, "off")) {
        CHECK_EQ_INT(huge_kib, 0);
        CHECK_EQ_INT(no_huge_areas, 1);
        CHECK_EQ_INT(others_asking, 0);
        printf("EXPECT stderr small.pages.from.here.on 0\n");
    } else if (!strcmp(mode, "never")) {
        if (strstr(thp, "[always]") || strstr(thp, "[madvise]"))
            CHECK(huge_kib >= 8192);
        else
            printf("transparent huge pages are off here: nothing to compare\n");
        CHECK_EQ_INT(no_huge_areas, 0);
        CHECK(others_asking >= 1);
        printf("EXPECT stderr small.pages.from.here.on 0\n");
    } else {
        fprintf(stderr, "usage: huge_pages slow|off|bare|never\n");
        return 2;
    }
    printf("EXPECT allocs 0 %d\n", LIVE + PAIRS);
    printf("EXPECT live_at_end 0 %d\n", LIVE * 512);
    return CHECK_DONE();
}
