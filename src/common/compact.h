/* The compact snapshot container (docs/snapshot-format.md, "The compact file"), one layout for
 * its writer (the library) and its readers (the command's loader and `vramtap export --json`).
 *
 * A file is the magic line, the head (the snapshot's JSON document without its three big arrays,
 * plus the `compact` member naming the values records refer to by index) ended by a NUL byte,
 * then sections: a 4-byte tag, a LEB128 length and that many bytes. Records are LEB128 varints,
 * most of them differences from the record before (zigzag when signed): a million live
 * allocations take 27 bytes each with their history events, encoded in about 0.15 s of CPU;
 * deflate would add twice that for a file a third the size. */
#ifndef VT_COMPACT_H
#define VT_COMPACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The first line: a byte no text file starts with, the name, the container's version. */
#define VT_COMPACT_MAGIC "\x89VTSNAP 2\n"
#define VT_COMPACT_MAGIC_LEN 10
#define VT_COMPACT_VERSION 2

/* Section tags. Readers skip tags they do not know; END. closes the file. */
#define VT_SEC_ALLOCATIONS "ALOC"
#define VT_SEC_HISTORY_ALLOCATIONS "HALC"
#define VT_SEC_HISTORY_EVENTS "HEVT"
#define VT_SEC_END "END."

#define VT_CREC_NO_SITE UINT64_MAX

/* A growing byte buffer; `failed` once memory ran out (the content is then incomplete). */
typedef struct {
    uint8_t *p;
    size_t len, cap;
    bool failed;
} vt_cbuf;

void vt_cbuf_put(vt_cbuf *b, const void *data, size_t n);
void vt_cbuf_varint(vt_cbuf *b, uint64_t v);
void vt_cbuf_free(vt_cbuf *b);

typedef struct {
    uint64_t off, bytes, cat; /* cat: index into the head's compact.categories */
} vt_clabel;

/* One allocation record. api, kind, phases: indexes into the head's name tables. Times are
 * microseconds since the library started. A new per-allocation field takes a new flag bit
 * (compact.c) with its value after the others, and raises VT_COMPACT_VERSION: readers refuse
 * flags they do not know, and so a file from a newer library is refused by version, clearly. */
typedef struct {
    uint64_t id, device, size, address; /* address 0: none */
    uint64_t api, kind;
    uint64_t birth_us, birth_seq, birth_phase, birth_step, birth_instance;
    bool dead;
    uint64_t death_us, death_seq, death_phase, death_step, death_instance;
    uint64_t site; /* VT_CREC_NO_SITE: none */
    size_t nlabels;
    const vt_clabel *labels;
    uint64_t mpath;  /* 0: made under no nn.Module, else index into module_paths + 1 */
    bool recomputed; /* made by a forward run again inside backward */
} vt_crec;

/* One event of the allocation history: bytes > 0 allocates, < 0 frees. */
typedef struct {
    uint64_t time_us, id;
    int64_t bytes;
} vt_cevent;

/* What a record is written relative to: the record before it in its section. */
typedef struct {
    uint64_t id, address, birth_us, birth_seq, step, instance;
} vt_cdelta;

/* A section's payload is its record count, then the records. */
void vt_crec_put(vt_cbuf *b, vt_cdelta *d, const vt_crec *r);
void vt_cevent_put(vt_cbuf *b, vt_cdelta *d, const vt_cevent *e);
/* What comes before `count` records of `len` bytes: the tag, the payload's length, the count.
 * Returns its length in out. */
#define VT_CSECTION_HEAD_MAX 24
size_t vt_csection_head(uint8_t out[VT_CSECTION_HEAD_MAX], const char tag[4], uint64_t count,
                        size_t len);
/* The section that ends the file. */
#define VT_CSECTION_END VT_SEC_END "\0"

/* Reading: a cursor over a section's payload. `bad` is set at the first error and stays. */
typedef struct {
    const uint8_t *p, *end;
    bool bad;
    vt_clabel *labels; /* the current record's, owned by the cursor */
    size_t labels_cap;
} vt_creader;

uint64_t vt_creader_varint(vt_creader *r);
/* 0, or -1 when the record is cut short, malformed or out of memory (r->bad). */
int vt_crec_get(vt_creader *r, vt_cdelta *d, vt_crec *out);
int vt_cevent_get(vt_creader *r, vt_cdelta *d, vt_cevent *out);
void vt_creader_free(vt_creader *r);

typedef struct {
    const char *head; /* NUL-terminated JSON text */
    size_t head_len;
    /* each section's payload, NULL when absent */
    const uint8_t *allocations, *history_allocations, *history_events;
    size_t allocations_len, history_allocations_len, history_events_len;
} vt_compact;

/* buf[0..len) starts with the magic line. */
bool vt_compact_is(const char *buf, size_t len);
/* Finds the head and sections of a compact file; -1 with why (a sentence fragment) when it is
 * not well formed. */
int vt_compact_open(const char *buf, size_t len, vt_compact *c, char *why, size_t whylen);

#endif
