/* Byte counts for people, in the binary units PyTorch prints, so figures can be compared with
 * torch.cuda.memory_summary() and OutOfMemoryError messages. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int vt_parse_bytes(const char *s, int64_t *out)
{
    static const struct {
        const char *unit;
        double factor;
    } units[] = {{"", 1},         {"B", 1},      {"K", 0x1p10},   {"KiB", 0x1p10}, {"M", 0x1p20},
                 {"MiB", 0x1p20}, {"G", 0x1p30}, {"GiB", 0x1p30}, {"T", 0x1p40},   {"TiB", 0x1p40},
                 {"KB", 1e3},     {"MB", 1e6},   {"GB", 1e9},     {"TB", 1e12}};
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v >= 0))
        return -1;
    while (*end == ' ')
        end++;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(end, units[i].unit)) {
            double bytes = v * units[i].factor;
            if (bytes > (double)VT_MAX_BYTES)
                return -1;
            *out = (int64_t)bytes; /* whole bytes, rounded down */
            return 0;
        }
    return -1;
}
