/* `vramtap import` on any bytes that are not a pickle: the Kineto and memory-timeline readers
 * over the JSON stream reader (plain or gzipped), the replay, the writer, and the reporter's
 * loader on what the writer wrote. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = vt_fuzz_file("input", data, size);
    vt_trace tr;
    vt_replay rp;
    vt_err err = {{0}};
    int rc = vt_import_read(path, &tr, &rp, &err);
    vt_fuzz_check_err(rc, &err);
    if (!rc)
        vt_fuzz_write_and_reload(&rp);
    vt_replay_free(&rp);
    vt_trace_free(&tr);
    return 0;
}
