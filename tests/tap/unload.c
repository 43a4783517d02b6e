/* Allocates through a dlopen'ed library, then (with "unload") dlcloses it for good before the
 * snapshot is written. usage: tap_unload LIB keep|unload */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    int (*alloc)(void **, size_t) = h ? (int (*)(void **, size_t))dlsym(h, "unload_lib_alloc") : 0;
    void *p;
    if (!alloc || alloc(&p, 12345) != 0) {
        fprintf(stderr, "cannot allocate through %s\n", argv[1]);
        return 1;
    }
    if (!strcmp(argv[2], "unload")) {
        dlclose(h);
        if (dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD)) {
            fprintf(stderr, "%s is still loaded\n", argv[1]);
            return 1;
        }
    }
    return 0;
}
