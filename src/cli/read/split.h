/* Finds the boundaries of the top-level members of a JSON object and of the elements of an
 * array, without parsing them, so that a large snapshot can be parsed piece by piece and in
 * parallel (a whole-document parse of a 100 MB snapshot takes seconds and a gigabyte). Every
 * piece is then parsed by jansson or, for allocations, yajl (alloc_read.c), which reject any
 * piece that is not exactly one JSON value; together with the separators checked here, that
 * validates the whole document. */
#ifndef VT_SPLIT_H
#define VT_SPLIT_H

#include <stddef.h>

#include "snapshot.h"

typedef struct {
    const char *p;
    size_t len;
} vt_piece;

typedef struct {
    vt_piece key; /* the key's JSON text, quotes included */
    vt_piece value;
    vt_piece *elems; /* when the value is an array: its elements */
    size_t nelems;
} vt_member;

/* The members of the object that makes up buf[0..len): 0, or 1 when buf holds something other
 * than an object, or -1 with err set. */
int vt_split_object(const char *path, const char *buf, size_t len, vt_member **members, size_t *n,
                    vt_err *err);
void vt_members_free(vt_member *members, size_t n);
/* "line L, column C" of byte `offset` of buf, for messages. */
void vt_describe_offset(const char *buf, size_t offset, char *out, size_t outlen);

#endif
