#include "json_out.h"

/* Length of the valid UTF-8 sequence at p (at most n bytes), or 0. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    size_t len = p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
    if (p[0] >= 0xf8 || !len || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    return len;
}

/* Paths and command lines may hold bytes that are not UTF-8; readers would reject the whole
 * file, so such bytes become U+FFFD. */
void vt_json_strn(FILE *f, const char *s, size_t len)
{
    fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) {
            size_t n = utf8_len((const unsigned char *)s + i, len - i);
            if (n) {
                fwrite(s + i, 1, n, f);
                i += n - 1;
            } else {
                fputs("\\ufffd", f);
            }
            continue;
        }
        switch (c) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        case '\r':
            fputs("\\r", f);
            break;
        default:
            if (c < 0x20)
                fprintf(f, "\\u%04x", c);
            else
                fputc(c, f);
        }
    }
    fputc('"', f);
}

void vt_json_str(FILE *f, const char *s)
{
    size_t n = 0;
    if (!s) {
        fputs("null", f);
        return;
    }
    while (s[n])
        n++;
    vt_json_strn(f, s, n);
}

void vt_json_time(FILE *f, double t)
{
    if (t < 0)
        fputs("null", f);
    else
        fprintf(f, "%.6f", t);
}

void vt_json_int_or_null(FILE *f, int64_t v)
{
    if (v < 0)
        fputs("null", f);
    else
        fprintf(f, "%lld", (long long)v);
}
