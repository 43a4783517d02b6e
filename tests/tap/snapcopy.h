/* What the tests of interim files share: a copy of the file, made before the exit's file
 * takes its name. */
#ifndef VT_TEST_SNAPCOPY_H
#define VT_TEST_SNAPCOPY_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Copies the process's snapshot file in VRAMTAP_OUT to interim.<pid>.copy there. */
static int copy_snapshot(void)
{
    const char *out = getenv("VRAMTAP_OUT");
    char suffix[32], from[4096], to[4096];
    snprintf(suffix, sizeof suffix, ".%d.json", (int)getpid());
    DIR *d = out ? opendir(out) : NULL;
    if (!d)
        return 1;
    int copied = 0;
    for (struct dirent *e; (e = readdir(d)) && !copied;) {
        size_t n = strlen(e->d_name), k = strlen(suffix);
        if (n < k || strcmp(e->d_name + n - k, suffix))
            continue;
        snprintf(from, sizeof from, "%s/%s", out, e->d_name);
        snprintf(to, sizeof to, "%s/interim.%d.copy", out, (int)getpid());
        FILE *f = fopen(from, "rb"), *g = fopen(to, "wb");
        char buf[1 << 16];
        size_t got;
        while (f && g && (got = fread(buf, 1, sizeof buf, f)) > 0)
            copied = fwrite(buf, 1, got, g) == got;
        if (f)
            fclose(f);
        if (g)
            copied &= fclose(g) == 0;
    }
    closedir(d);
    return !copied;
}

#endif
