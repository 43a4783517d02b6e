/* `vramtap report` on any bytes, JSON or compact: the snapshot loader, then every output built
 * on what it accepts (the report or post-mortem, --json, --folded, --record, `export --json`),
 * written to /dev/null. The
 * loader reads each allocation its fast reader takes with its tree reader too
 * (VT_CHECK_READERS): an element they read differently is a failure. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_read.h"

#include "fuzz.h"
#include "pictures.h"
#include "record.h"
#include "report.h"

/* The loader's own message for readers that differ, whole: an input can spell the words (in a
 * value a message quotes), not the message. */
static bool readers_differ(const char *msg, const char *path)
{
    size_t n = strlen(path);
    if (strncmp(msg, path, n) || strncmp(msg + n, ": ", 2))
        return false;
    const char *p = msg + n + 2;
    if (!strncmp(p, "history_", 8))
        p += 8;
    if (strncmp(p, "allocations[", 12))
        return false;
    for (p += 12; isdigit((unsigned char)*p); p++)
        ;
    return !strcmp(p, "]: " VT_READERS_DIFFER " (" VT_CHECK_READERS ")");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *sink;
    if (!sink && !(sink = fopen("/dev/null", "w")))
        vt_fuzz_fail("cannot open /dev/null");
    setenv(VT_CHECK_READERS, "1", 0);
    const char *path = vt_fuzz_file("input", data, size);
    vt_report_opts o = {.top_n = VT_DEFAULT_TOP, .device = -1};
    vt_loaded l;
    vt_err err = {{0}};
    int rc = vt_loaded_open(path, &o, &l, &err);
    vt_fuzz_check_err(rc, &err);
    if (rc && readers_differ(err.msg, path))
        vt_fuzz_fail("%s", err.msg);
    if (rc)
        return 0;
    if (l.snap.kind == VT_SNAP_OOM)
        vt_print_postmortem(sink, &l);
    else
        vt_print_report(sink, &l);
    json_t *doc = vt_report_json(&l);
    vt_print_json(sink, doc);
    json_decref(doc);
    vt_fuzz_check_err(vt_print_folded(sink, &l, &err), &err);
    vt_print_record_markdown(sink, &l.snap);
    vt_fuzz_check_err(vt_export_json(sink, &l.snap, &err), &err);
    vt_loaded_close(&l);
    return 0;
}
