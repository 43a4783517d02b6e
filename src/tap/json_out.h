/* The few JSON writing helpers the library needs: it streams its snapshot straight to a file
 * instead of building a document in memory inside someone else's process. */
#ifndef VT_JSON_OUT_H
#define VT_JSON_OUT_H

#include <stdint.h>
#include <stdio.h>

#include "tap.h"

/* A JSON string, or null when s is NULL. */
VT_HIDDEN void vt_json_str(FILE *f, const char *s);
/* A string of `len` bytes. */
VT_HIDDEN void vt_json_strn(FILE *f, const char *s, size_t len);
/* A float with enough digits for microseconds, or null when negative. */
VT_HIDDEN void vt_json_time(FILE *f, double t);
/* v, or null when v < 0 (unknown) */
VT_HIDDEN void vt_json_int_or_null(FILE *f, int64_t v);

#endif
