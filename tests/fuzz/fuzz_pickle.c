/* The command's side of the pickle import: any bytes as the records the Python helper writes,
 * then the replay, the writer and the reporter's loader, as `vramtap import` runs them. */
#include <math.h>
#include <stdio.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* fmemopen cannot open an empty buffer */
    FILE *in = size ? fmemopen((void *)data, size, "r") : fopen("/dev/null", "r");
    if (!in)
        vt_fuzz_fail("cannot open the records");
    vt_trace tr = {.source = "records",
                   .format = "pytorch-snapshot",
                   .pid = -1,
                   .rank = -1,
                   .start_unix = NAN};
    vt_replay rp = {0};
    vt_err err = {{0}};
    int rc = vt_pickle_records(in, "records", &tr, &err);
    fclose(in);
    if (rc < 0)
        vt_fuzz_check_err(rc, &err);
    if (!rc) {
        rc = vt_replay_run(&tr, &rp, &err);
        vt_fuzz_check_err(rc, &err);
        if (!rc && rp.ndevs)
            vt_fuzz_write_and_reload(&rp);
    }
    vt_replay_free(&rp);
    vt_trace_free(&tr);
    return 0;
}
