/* `vramtap report` on any bytes: the snapshot loader, then every output built on what it
 * accepts (the report or post-mortem, --json, --folded, --record), written to /dev/null. */
#include <stdio.h>

#include "fuzz.h"
#include "record.h"
#include "report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *sink;
    if (!sink && !(sink = fopen("/dev/null", "w")))
        vt_fuzz_fail("cannot open /dev/null");
    const char *path = vt_fuzz_file("input", data, size);
    vt_report_opts o = {.top_n = VT_DEFAULT_TOP, .device = -1};
    vt_loaded l;
    vt_err err = {{0}};
    int rc = vt_loaded_open(path, &o, &l, &err);
    vt_fuzz_check_err(rc, &err);
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
    vt_loaded_close(&l);
    return 0;
}
