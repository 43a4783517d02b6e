/* main() for a fuzz target built without libFuzzer: runs every file named on the command line,
 * or found under a folder named there, through the target once, so that the suite replays the
 * seeds and the inputs that once failed with any compiler, sanitized or not. */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz.h"

static size_t ran;

static int run_file(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (type != FTW_F)
        return 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open\n", path);
        return 1;
    }
    uint8_t *data = NULL;
    size_t len = 0, cap = 0, n;
    do {
        if (len == cap) {
            cap = cap ? cap * 2 : 65536;
            uint8_t *grown = realloc(data, cap);
            if (!grown) {
                fprintf(stderr, "%s: out of memory\n", path);
                free(data);
                fclose(f);
                return 1;
            }
            data = grown;
        }
        n = fread(data + len, 1, cap - len, f);
        len += n;
    } while (n);
    fclose(f);
    LLVMFuzzerTestOneInput(data, len);
    free(data);
    ran++;
    return 0;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (nftw(argv[i], run_file, 16, FTW_PHYS)) {
            fprintf(stderr, "%s: cannot read\n", argv[i]);
            return 2;
        }
    printf("%zu input(s) ran\n", ran);
    return 0;
}
