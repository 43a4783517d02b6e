#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"

static char dir[256];

static void remove_dir(void)
{
    static const char *const names[] = {"input", "output.json"};
    char path[512];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

const char *vt_fuzz_path(const char *name)
{
    static char path[512];
    if (!dir[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/vt-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir))
            vt_fuzz_fail("cannot create a scratch folder in %s", dir);
        atexit(remove_dir);
        /* The pickle reader's helper is never the subject: a gzipped pickle sniffed as one
         * fails fast instead of starting Python. */
        setenv("VRAMTAP_PYTHON", "/bin/false", 1);
    }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

const char *vt_fuzz_file(const char *name, const uint8_t *data, size_t size)
{
    const char *path = vt_fuzz_path(name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f))
        vt_fuzz_fail("cannot write %s", path);
    return path;
}

void vt_fuzz_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("vt-fuzz: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

void vt_fuzz_check_err(int rc, const vt_err *err)
{
    if (rc == 0)
        return;
    if (!err->msg[0])
        vt_fuzz_fail("a failed read (%d) left no message", rc);
    if (strchr(err->msg, '\n') || strchr(err->msg, '\r'))
        vt_fuzz_fail("a message spans lines: %s", err->msg);
}

void vt_fuzz_write_and_reload(const vt_replay *rp)
{
    vt_err err = {{0}};
    const char *out = vt_fuzz_path("output.json");
    if (vt_snapshot_write(rp, out, &err)) {
        vt_fuzz_check_err(-1, &err);
        return;
    }
    vt_snapshot snap;
    if (vt_snapshot_load(out, &snap, &err))
        vt_fuzz_fail("the importer wrote a snapshot the reporter refuses: %s", err.msg);
    if (vt_sites_load_all(&snap, &err))
        vt_fuzz_fail("the importer wrote a site the reporter refuses: %s", err.msg);
    vt_snapshot_free(&snap);
}
