/* NVIDIA's own libcudart.so.13 over the stand-in driver: every memory entry point it looks up
 * through cuGetProcAddress_v2 must come back as vramtap's wrapper. Its cudaMalloc then fails
 * (the stand-in has no private export table); that is expected and not the point. */
#include <dlfcn.h>

#include "check.h"

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/usr/local/cuda/lib64/libcudart.so.13";
    void *rt = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!rt) {
        fprintf(stderr, "skipping: %s\n", dlerror());
        return 77;
    }
    int (*cuda_malloc)(void **, size_t) = (int (*)(void **, size_t))dlsym(rt, "cudaMalloc");
    CHECK(cuda_malloc != NULL);
    void *p = NULL;
    int rc = cuda_malloc ? cuda_malloc(&p, 1024) : -1;
    CHECK(rc != 0);
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
    printf("EXPECT no_snapshot\n");
    return CHECK_DONE();
}
