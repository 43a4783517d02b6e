/* Reading a large JSON document one value at a time. Profiler traces reach hundreds of MB;
 * a whole-document jansson tree costs about ten times the text, so the reader walks the
 * top-level object and array punctuation itself and hands every value to jansson on its own
 * (JSON_DISABLE_EOF_CHECK stops jansson at the value's end and tells how far it read). Input may
 * be gzip-compressed or plain: zlib's gzread passes plain files through. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "import_jsonstream.h"
#include "grow.h"

#define CHUNK (1u << 20)

struct vt_jstream {
    gzFile gz;
    const char *path;
    char *buf;
    size_t cap, pos, len; /* unread bytes are buf[pos..len) */
    uint64_t consumed;    /* bytes before buf[pos] */
    bool eof;
};

static int fill(vt_jstream *js, vt_err *err)
{
    if (js->eof)
        return 0;
    if (js->pos > 0) {
        memmove(js->buf, js->buf + js->pos, js->len - js->pos);
        js->consumed += js->pos;
        js->len -= js->pos;
        js->pos = 0;
    }
    if (vt_grow(&js->buf, &js->cap, js->len + CHUNK / 2, 1, CHUNK)) {
        vt_err_set(err, "out of memory");
        return -1;
    }
    size_t want = js->cap - js->len;
    if (want > INT32_MAX)
        want = INT32_MAX;
    int n = gzread(js->gz, js->buf + js->len, (unsigned)want);
    int code;
    const char *msg = vt_gz_message(js->gz, js->path, &code);
    if (n <= 0 && code != Z_OK) {
        vt_err_set(err, "%s: %s at byte %llu: %s", js->path,
                   code == Z_ERRNO ? "cannot read" : "damaged compressed data",
                   (unsigned long long)(js->consumed + js->len),
                   code == Z_ERRNO ? strerror(errno) : msg);
        return -1;
    }
    js->eof = n == 0;
    js->len += (size_t)n;
    return 0;
}

int vt_js_open(vt_jstream **out, const char *path, vt_err *err)
{
    vt_jstream *js = calloc(1, sizeof *js);
    if (!js || !(js->buf = malloc(CHUNK))) {
        free(js);
        vt_err_set(err, "out of memory");
        return -1;
    }
    js->cap = CHUNK;
    js->path = path;
    js->gz = gzopen(path, "rb");
    if (!js->gz) {
        vt_err_set(err, "%s: cannot open: %s", path, errno ? strerror(errno) : "out of memory");
        free(js->buf);
        free(js);
        return -1;
    }
    gzbuffer(js->gz, 256 * 1024);
    *out = js;
    return 0;
}

void vt_js_close(vt_jstream *js)
{
    if (!js)
        return;
    gzclose(js->gz);
    free(js->buf);
    free(js);
}

const char *vt_gz_message(gzFile gz, const char *path, int *code)
{
    const char *msg = gzerror(gz, code);
    size_t n = strlen(path);
    /* zlib starts its messages with the file's name, which the caller already says */
    if (!strncmp(msg, path, n) && !strncmp(msg + n, ": ", 2))
        msg += n + 2;
    return msg;
}

uint64_t vt_js_offset(const vt_jstream *js)
{
    return js->consumed + js->pos;
}

int vt_js_peek(vt_jstream *js, vt_err *err)
{
    for (;;) {
        while (js->pos < js->len && strchr(" \t\r\n", js->buf[js->pos]) && js->buf[js->pos])
            js->pos++;
        if (js->pos < js->len)
            return (unsigned char)js->buf[js->pos];
        if (js->eof)
            return VT_JS_END;
        if (fill(js, err))
            return VT_JS_ERROR;
    }
}

int vt_js_head(vt_jstream *js, char *out, size_t n, vt_err *err)
{
    while (!js->eof && js->len - js->pos < n)
        if (fill(js, err))
            return -1;
    size_t have = js->len - js->pos < n ? js->len - js->pos : n;
    memcpy(out, js->buf + js->pos, have);
    return (int)have;
}

static int syntax(vt_jstream *js, vt_err *err, const char *what)
{
    vt_err_set(err, "%s: not valid JSON at byte %llu: %s", js->path,
               (unsigned long long)vt_js_offset(js), what);
    return -1;
}

int vt_js_expect(vt_jstream *js, char c, vt_err *err)
{
    int p = vt_js_peek(js, err);
    if (p == VT_JS_ERROR)
        return -1;
    if (p != (unsigned char)c) {
        char what[40];
        snprintf(what, sizeof what, "'%c' expected", c);
        return syntax(js, err, what);
    }
    js->pos++;
    return 0;
}

json_t *vt_js_value(vt_jstream *js, vt_err *err)
{
    int p = vt_js_peek(js, err);
    if (p == VT_JS_ERROR)
        return NULL;
    if (p == VT_JS_END) {
        syntax(js, err, "premature end of input");
        return NULL;
    }
    if (p != '{' && p != '[' && p != '"') {
        /* A bare number or literal: jansson would read one byte past it, so cut it out first. */
        for (;;) {
            size_t i = js->pos;
            while (i < js->len && !strchr(",]} \t\r\n", js->buf[i]) && js->buf[i])
                i++;
            if (i < js->len || js->eof) {
                json_error_t je;
                json_t *v = json_loadb(js->buf + js->pos, i - js->pos, JSON_DECODE_ANY, &je);
                if (!v) {
                    syntax(js, err, je.text);
                    return NULL;
                }
                js->pos = i;
                return v;
            }
            if (fill(js, err))
                return NULL;
        }
    }
    for (;;) {
        json_error_t je;
        size_t avail = js->len - js->pos;
        json_t *v =
            json_loadb(js->buf + js->pos, avail, JSON_DISABLE_EOF_CHECK | JSON_DECODE_ANY, &je);
        if (v) {
            js->pos += (size_t)je.position;
            return v;
        }
        /* An error at the very end of what is buffered means the value goes on past it. */
        if ((size_t)je.position < avail || js->eof) {
            js->pos += (size_t)je.position < avail ? (size_t)je.position : avail;
            syntax(js, err, je.text);
            return NULL;
        }
        if (fill(js, err))
            return NULL;
    }
}

int vt_js_array(vt_jstream *js, vt_js_element_fn fn, void *arg, vt_err *err)
{
    if (vt_js_expect(js, '[', err))
        return -1;
    int p = vt_js_peek(js, err);
    if (p == VT_JS_ERROR)
        return -1;
    if (p == ']') {
        js->pos++;
        return 0;
    }
    for (;;) {
        json_t *v = vt_js_value(js, err);
        if (!v)
            return -1;
        int r = fn(v, arg, err);
        json_decref(v);
        if (r)
            return r;
        p = vt_js_peek(js, err);
        if (p == VT_JS_ERROR)
            return -1;
        js->pos += p == ',' || p == ']';
        if (p == ']')
            return 0;
        if (p != ',')
            return syntax(js, err, "',' or ']' expected");
    }
}

int vt_js_object(vt_jstream *js, vt_js_member_fn fn, void *arg, vt_err *err)
{
    if (vt_js_expect(js, '{', err))
        return -1;
    int p = vt_js_peek(js, err);
    if (p == VT_JS_ERROR)
        return -1;
    if (p == '}') {
        js->pos++;
        return 0;
    }
    for (;;) {
        p = vt_js_peek(js, err);
        if (p == VT_JS_ERROR)
            return -1;
        if (p != '"')
            return syntax(js, err, "member name expected");
        json_t *key = vt_js_value(js, err);
        if (!key)
            return -1;
        int r = vt_js_expect(js, ':', err);
        if (!r)
            r = fn(json_string_value(key), js, arg, err);
        json_decref(key);
        if (r)
            return r;
        p = vt_js_peek(js, err);
        if (p == VT_JS_ERROR)
            return -1;
        js->pos += p == ',' || p == '}';
        if (p == '}')
            return 0;
        if (p != ',')
            return syntax(js, err, "',' or '}' expected");
    }
}

int vt_js_skip(vt_jstream *js, vt_err *err)
{
    json_t *v = vt_js_value(js, err);
    if (!v)
        return -1;
    json_decref(v);
    return 0;
}
