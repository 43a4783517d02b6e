/* Binary units as PyTorch prints them, at the edges: below 1 KiB, each unit's start, signs,
 * and the extremes of int64. */
#include "check.h"
#include "snapshot.h"

int main(void)
{
    char b[32];
    CHECK_EQ_STR(vt_fmt_bytes(b, 0), "0 B");
    CHECK_EQ_STR(vt_fmt_bytes(b, 1023), "1023 B");
    CHECK_EQ_STR(vt_fmt_bytes(b, 1024), "1.00 KiB");
    CHECK_EQ_STR(vt_fmt_bytes(b, 1536), "1.50 KiB");
    CHECK_EQ_STR(vt_fmt_bytes(b, INT64_C(1) << 20), "1.00 MiB");
    CHECK_EQ_STR(vt_fmt_bytes(b, INT64_C(20) << 20), "20.00 MiB");
    CHECK_EQ_STR(vt_fmt_bytes(b, INT64_C(3) << 29), "1.50 GiB");
    CHECK_EQ_STR(vt_fmt_bytes(b, INT64_C(1) << 40), "1.00 TiB");
    CHECK_EQ_STR(vt_fmt_bytes(b, INT64_C(1) << 50), "1.00 PiB");
    CHECK_EQ_STR(vt_fmt_bytes(b, INT64_MAX), "8.00 EiB");
    CHECK_EQ_STR(vt_fmt_bytes(b, -2048), "-2.00 KiB");
    CHECK_EQ_STR(vt_fmt_bytes(b, INT64_MIN), "-8.00 EiB");
    CHECK_EQ_STR(vt_fmt_delta(b, 0), "0 B");
    CHECK_EQ_STR(vt_fmt_delta(b, 512), "+512 B");
    CHECK_EQ_STR(vt_fmt_delta(b, -(INT64_C(1) << 20)), "-1.00 MiB");
    CHECK_EQ_STR(vt_fmt_delta(b, INT64_C(400) << 20), "+400.00 MiB");
    CHECK_EQ_STR(vt_fmt_delta(b, INT64_MIN), "-8.00 EiB");
    return CHECK_DONE();
}
