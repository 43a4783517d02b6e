/* Binary units as PyTorch prints them, at the edges: below 1 KiB, each unit's start, signs,
 * and the extremes of int64; sizes as people write them (vramtap fit --capacity). */
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

    int64_t v = -1;
    CHECK(!vt_parse_bytes("85899345920", &v) && v == INT64_C(80) << 30);
    CHECK(!vt_parse_bytes("80GiB", &v) && v == INT64_C(80) << 30);
    CHECK(!vt_parse_bytes("80G", &v) && v == INT64_C(80) << 30);
    CHECK(!vt_parse_bytes("81920 MiB", &v) && v == INT64_C(80) << 30);
    CHECK(!vt_parse_bytes("80GB", &v) && v == INT64_C(80000000000));
    CHECK(!vt_parse_bytes("1.5KiB", &v) && v == 1536);
    CHECK(!vt_parse_bytes("0.3B", &v) && v == 0);
    CHECK(vt_parse_bytes("1PiB", &v) == -1); /* no device holds one */
    CHECK(!vt_parse_bytes("1024TiB", &v) && v == INT64_C(1) << 50);
    CHECK(vt_parse_bytes("1025TiB", &v) == -1);
    CHECK(vt_parse_bytes("", &v) == -1);
    CHECK(vt_parse_bytes("GiB", &v) == -1);
    CHECK(vt_parse_bytes("-1GiB", &v) == -1);
    CHECK(vt_parse_bytes("12XB", &v) == -1);
    CHECK(vt_parse_bytes("nan", &v) == -1);
    CHECK(vt_parse_bytes("inf", &v) == -1);
    return CHECK_DONE();
}
