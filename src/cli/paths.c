#include <limits.h>
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
