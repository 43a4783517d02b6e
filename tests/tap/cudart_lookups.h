/* What NVIDIA's runtime, dynamic or static, must obtain from vramtap when it looks up the
 * driver: printed as expectations on the VRAMTAP_DEBUG lines. */
#ifndef CUDART_LOOKUPS_H
#define CUDART_LOOKUPS_H

#include <stdio.h>

static void expect_cudart_lookups(void)
{
    static const char *const lookups[][2] = {
        {"cuGetProcAddress_v2 cuGetProcAddress ver=11030 flags=0", "cuGetProcAddress"},
        {"cuGetProcAddress_v2 cuGetProcAddress ver=12000 flags=0", "cuGetProcAddress_v2"},
        {"cuGetProcAddress_v2 cuMemAlloc ver=3020 flags=0", "cuMemAlloc_v2"},
        {"cuGetProcAddress_v2 cuMemFree ver=3020 flags=0", "cuMemFree_v2"},
        {"cuGetProcAddress_v2 cuMemAllocPitch ver=3020 flags=0", "cuMemAllocPitch_v2"},
        {"cuGetProcAddress_v2 cuMemAllocManaged ver=6000 flags=0", "cuMemAllocManaged"},
        {"cuGetProcAddress_v2 cuMemHostAlloc ver=2020 flags=0", "cuMemHostAlloc"},
        {"cuGetProcAddress_v2 cuMemFreeHost ver=2000 flags=0", "cuMemFreeHost"},
        {"cuGetProcAddress_v2 cuMemAllocAsync ver=11020 flags=0", "cuMemAllocAsync"},
        {"cuGetProcAddress_v2 cuMemAllocAsync ver=11020 flags=2", "cuMemAllocAsync_ptsz"},
        {"cuGetProcAddress_v2 cuMemAllocFromPoolAsync ver=11020 flags=0",
         "cuMemAllocFromPoolAsync"},
        {"cuGetProcAddress_v2 cuMemAllocFromPoolAsync ver=11020 flags=2",
         "cuMemAllocFromPoolAsync_ptsz"},
        {"cuGetProcAddress_v2 cuMemFreeAsync ver=11020 flags=0", "cuMemFreeAsync"},
        {"cuGetProcAddress_v2 cuMemFreeAsync ver=11020 flags=2", "cuMemFreeAsync_ptsz"},
        /* the waits that end asynchronous downloads into pinned memory */
        {"cuGetProcAddress_v2 cuCtxSynchronize ver=2000 flags=0", "cuCtxSynchronize"},
        {"cuGetProcAddress_v2 cuCtxSynchronize ver=13000 flags=0", "cuCtxSynchronize_v2"},
        {"cuGetProcAddress_v2 cuEventSynchronize ver=2000 flags=0", "cuEventSynchronize"},
        {"cuGetProcAddress_v2 cuStreamSynchronize ver=2000 flags=0", "cuStreamSynchronize"},
        {"cuGetProcAddress_v2 cuStreamSynchronize ver=7000 flags=2", "cuStreamSynchronize_ptsz"},
    };
    /* The runtime's one dlsym on the driver handle. */
    printf("EXPECT stderr ^vramtap:.dlsym.cuGetProcAddress_v2.ver=0.flags=0.->.vramtap."
           "cuGetProcAddress_v2$ 1\n");
    for (size_t i = 0; i < sizeof lookups / sizeof lookups[0]; i++) {
        char re[256];
        snprintf(re, sizeof re, "^vramtap:.%s.->.vramtap.%s$", lookups[i][0], lookups[i][1]);
        for (char *c = re; *c; c++)
            if (*c == ' ')
                *c = '.';
        printf("EXPECT stderr %s 1\n", re);
    }
}

#endif
