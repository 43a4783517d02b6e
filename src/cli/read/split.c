#include "split.h"
#include "grow.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const char *skip_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* End of the string whose opening quote is just before p, or NULL. */
static const char *skip_string(const char *p, const char *end)
{
    const char *start = p;
    for (;;) {
        const char *q = memchr(p, '"', (size_t)(end - p));
        if (!q)
            return NULL;
        /* a quote after an odd run of backslashes is escaped */
        size_t backslashes = 0;
        while (q - backslashes > start && q[-1 - (ptrdiff_t)backslashes] == '\\')
            backslashes++;
        p = q + 1;
        if (backslashes % 2 == 0)
            return p;
    }
}

/* End of the value starting at p, or NULL when the buffer ends first. Brackets are counted
 * without matching their kinds: a wrong pairing makes a span that jansson then rejects. This
 * is the one pass over the whole file that is not parallel, so it leans on the C library's
 * vectorised searches. */
static const char *skip_value(const char *p, const char *end)
{
    size_t depth = 0;
    if (p < end && !strchr("\"{[", *p)) {
        while (p < end && !strchr(",:]} \t\r\n", *p))
            p++;
        return p;
    }
    while (p < end) {
        /* the buffer ends in a NUL, so strcspn stops at the end at the latest */
        p += strcspn(p, "\"{}[]");
        if (p >= end)
            return NULL;
        switch (*p++) {
        case '{':
        case '[':
            depth++;
            break;
        case '}':
        case ']':
            if (--depth == 0)
                return p;
            break;
        case '"':
            if (!(p = skip_string(p, end)))
                return NULL;
            if (!depth)
                return p;
            break;
        default: /* a NUL inside the file: jansson rejects the span */
            break;
        }
    }
    return NULL;
}

void vt_describe_offset(const char *buf, size_t offset, char *out, size_t outlen)
{
    size_t line = 1, col = 1;
    for (size_t i = 0; i < offset; i++) {
        if (buf[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    snprintf(out, outlen, "line %zu, column %zu", line, col);
}

static int syntax_error(const char *path, const char *buf, const char *at, const char *end,
                        const char *what, vt_err *err)
{
    if (at >= end) {
        vt_err_set(err, "%s: truncated: the file ends inside %s (at byte %zu)", path, what,
                   (size_t)(end - buf));
        return -1;
    }
    char where[64];
    vt_describe_offset(buf, (size_t)(at - buf), where, sizeof where);
    vt_err_set(err, "%s: not valid JSON at %s: unexpected '%c' in %s", path, where, *at, what);
    return -1;
}

/* Appends one item to a growing array; -1 when memory runs out. */
static int push(void **items, size_t *n, size_t *cap, size_t size, const void *item)
{
    if (vt_grow(items, cap, *n + 1, size, 64))
        return -1;
    memcpy((char *)*items + *n * size, item, size);
    (*n)++;
    return 0;
}

/* Splits the array starting at p into elements; returns its end, or NULL with err set. */
static const char *split_elements(const char *path, const char *buf, const char *p, const char *end,
                                  vt_piece **elems, size_t *n, vt_err *err)
{
    void *items = NULL;
    size_t count = 0, cap = 0;
    p = skip_ws(p + 1, end);
    if (p < end && *p == ']') {
        *elems = NULL;
        *n = 0;
        return p + 1;
    }
    for (;;) {
        vt_piece e = {p, 0};
        p = skip_value(p, end);
        if (!p || !(e.len = (size_t)(p - e.p)))
            break;
        if (push(&items, &count, &cap, sizeof e, &e)) {
            free(items);
            vt_err_set(err, "%s: out of memory", path);
            return NULL;
        }
        p = skip_ws(p, end);
        if (p < end && *p == ',') {
            p = skip_ws(p + 1, end);
            continue;
        }
        if (p < end && *p == ']') {
            *elems = items;
            *n = count;
            return p + 1;
        }
        break;
    }
    free(items);
    syntax_error(path, buf, p ? p : end, end, "an array", err);
    return NULL;
}

void vt_members_free(vt_member *members, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(members[i].elems);
    free(members);
}

int vt_split_object(const char *path, const char *buf, size_t len, vt_member **members, size_t *n,
                    vt_err *err)
{
    const char *end = buf + len, *p = skip_ws(buf, end);
    void *items = NULL;
    size_t count = 0, cap = 0;
    *members = NULL;
    *n = 0;
    if (p == end || *p != '{') {
        /* Not an object: the caller asks jansson for the precise complaint. */
        return 1;
    }
    p = skip_ws(p + 1, end);
    const char *what = "the top-level object";
    if (p < end && *p == '}') {
        p++;
    } else {
        for (;;) {
            vt_member m = {{p, 0}, {NULL, 0}, NULL, 0};
            if (p >= end || *p != '"') {
                what = "the top-level object (a key was expected)";
                goto bad;
            }
            if (!(p = skip_value(p, end)))
                goto bad;
            m.key.len = (size_t)(p - m.key.p);
            p = skip_ws(p, end);
            if (p >= end || *p != ':')
                goto bad;
            p = skip_ws(p + 1, end);
            m.value.p = p;
            /* Arrays are split on the way, so the big ones are scanned once. */
            if (p < end && *p == '[')
                p = split_elements(path, buf, p, end, &m.elems, &m.nelems, err);
            else
                p = skip_value(p, end);
            if (!p || p == m.value.p) {
                if (!p && m.value.p < end && *m.value.p == '[')
                    goto failed; /* split_elements said why */
                goto bad;
            }
            m.value.len = (size_t)(p - m.value.p);
            if (push(&items, &count, &cap, sizeof m, &m)) {
                free(m.elems);
                vt_members_free(items, count);
                vt_err_set(err, "%s: out of memory", path);
                return -1;
            }
            p = skip_ws(p, end);
            if (p < end && *p == ',') {
                p = skip_ws(p + 1, end);
                continue;
            }
            if (p < end && *p == '}') {
                p++;
                break;
            }
            goto bad;
        }
    }
    p = skip_ws(p, end);
    if (p < end) {
        char where[64];
        vt_describe_offset(buf, (size_t)(p - buf), where, sizeof where);
        vt_err_set(err, "%s: not valid JSON: data after the end of the snapshot at %s", path,
                   where);
        vt_members_free(items, count);
        return -1;
    }
    *members = items;
    *n = count;
    return 0;

bad:
    syntax_error(path, buf, p ? p : end, end, what, err);
failed:
    vt_members_free(items, count);
    return -1;
}
