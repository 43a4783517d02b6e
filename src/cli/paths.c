#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paths.h"

void vt_paths_order(const char *build, const char *install, const char *order[2])
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = 0;
    size_t root = strlen(VT_BUILD_ROOT);
    int in_build = !strncmp(self, VT_BUILD_ROOT, root) && self[root] == '/';
    order[0] = in_build ? build : install;
    order[1] = in_build ? install : build;
}

static int readable(const char *path)
{
    return path && *path && access(path, R_OK) == 0;
}

int vt_find_library(char out[PATH_MAX], const char *verb)
{
    const char *env = getenv("VRAMTAP_LIB");
    if (env && *env) {
        if (!readable(env) || !realpath(env, out)) {
            fprintf(stderr, "vramtap %s: VRAMTAP_LIB=%s: %s\n", verb, env, strerror(errno));
            return -1;
        }
        return 0;
    }
    const char *candidates[2];
    vt_paths_order(VT_LIB_BUILD, VT_LIB_INSTALL, candidates);
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++)
        if (readable(candidates[i]) && realpath(candidates[i], out))
            return 0;
    fprintf(stderr, "vramtap %s: libvramtap.so not found (looked for %s and %s); set VRAMTAP_LIB\n",
            verb, VT_LIB_BUILD, VT_LIB_INSTALL);
    return -1;
}
