/* Byte counts for people, in the binary units PyTorch prints, so figures can be compared with
 * torch.cuda.memory_summary() and OutOfMemoryError messages. */
#include <inttypes.h>
#include <stdio.h>

#include "snapshot.h"

static const char *fmt_magnitude(char buf[32], const char *sign, uint64_t bytes)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, 32, "%s%" PRIu64 " B", sign, bytes);
        return buf;
    }
    double v = (double)bytes / 1024;
    size_t u = 0;
    while (v >= 1024 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024;
        u++;
    }
    snprintf(buf, 32, "%s%.2f %s", sign, v, units[u]);
    return buf;
}

const char *vt_fmt_bytes(char buf[32], int64_t bytes)
{
    return bytes < 0 ? fmt_magnitude(buf, "-", (uint64_t)0 - (uint64_t)bytes)
                     : fmt_magnitude(buf, "", (uint64_t)bytes);
}

const char *vt_fmt_delta(char buf[32], int64_t delta)
{
    if (delta == 0)
        return fmt_magnitude(buf, "", 0);
    return delta < 0 ? fmt_magnitude(buf, "-", (uint64_t)0 - (uint64_t)delta)
                     : fmt_magnitude(buf, "+", (uint64_t)delta);
}
