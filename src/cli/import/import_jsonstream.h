/* Reading a large JSON document one value at a time (see import_jsonstream.c). */
#ifndef VT_IMPORT_JSONSTREAM_H
#define VT_IMPORT_JSONSTREAM_H

#include <stdint.h>

#include <jansson.h>
#include <zlib.h>

#include "snapshot.h" /* vt_err */

typedef struct vt_jstream vt_jstream;

#define VT_JS_END (-1)
#define VT_JS_ERROR (-2)

/* Called with each element of an array; v is borrowed. Non-zero stops the walk and is
 * returned. */
typedef int (*vt_js_element_fn)(json_t *v, void *arg, vt_err *err);
/* Called with each member name of an object; it must consume the value (vt_js_value,
 * vt_js_array, vt_js_object or vt_js_skip). */
typedef int (*vt_js_member_fn)(const char *key, vt_jstream *js, void *arg, vt_err *err);

int vt_js_open(vt_jstream **js, const char *path, vt_err *err);
/* zlib's message for gz's last error (code: its Z_* code), without the file name it starts with */
const char *vt_gz_message(gzFile gz, const char *path, int *code);
void vt_js_close(vt_jstream *js);
/* The next byte after white space, without consuming it; VT_JS_END or VT_JS_ERROR. */
int vt_js_peek(vt_jstream *js, vt_err *err);
/* Up to n bytes from the current position, without consuming them; their count or -1. */
int vt_js_head(vt_jstream *js, char *out, size_t n, vt_err *err);
uint64_t vt_js_offset(const vt_jstream *js);
int vt_js_expect(vt_jstream *js, char c, vt_err *err);
/* The next value (new reference), or NULL with err. */
json_t *vt_js_value(vt_jstream *js, vt_err *err);
int vt_js_skip(vt_jstream *js, vt_err *err);
int vt_js_array(vt_jstream *js, vt_js_element_fn fn, void *arg, vt_err *err);
int vt_js_object(vt_jstream *js, vt_js_member_fn fn, void *arg, vt_err *err);

#endif
