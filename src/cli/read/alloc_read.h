/* Reading one element of `allocations` or `history_allocations` (load.c, alloc_sax.c). */
#ifndef VT_ALLOC_READ_H
#define VT_ALLOC_READ_H

#include "snapshot.h"

/* What an element is checked against. */
typedef struct {
    int64_t steps;               /* the largest step a moment may name */
    size_t nsites;               /* site must index sites[] */
    size_t nmpaths;              /* module_path must index module_paths[] */
    const int16_t *device_index; /* ordinal -> index in devices, -1 when not listed */
} vt_alloc_limits;

/* One identity label: bytes [off, end) of the allocation are category cat (< VT_NLABELLED). */
typedef struct {
    int64_t off, end;
    int cat;
} vt_label_range;

/* The labelled category of a label's `category` (n bytes), -1 for one this reader does not know
 * (a newer library's: ignored). */
int vt_label_category(const char *name, size_t n);
/* a->labelled from r[0..n) (reordered): each byte counted once, for the first label over it in
 * offset order; NULL when n is 0. -1 when memory runs out. */
int vt_labels_sum(vt_label_range *r, size_t n, vt_alloc *a);
vt_alloc_kind vt_alloc_kind_of(const char *name, size_t n);
/* -1 with err when a's death (a->death, set) comes before its birth. */
int vt_alloc_death_check(const vt_alloc *a, vt_err *err);
/* phase by name, VT_NPHASES when the name is none */
vt_phase vt_phase_of(const char *name, size_t n);

/* The fast reader, on yajl's events, without building a tree: true when it read text[0..len)
 * into *a. It takes only elements it can read with certainty (no escapes, ASCII strings, no
 * unknown nested values, every check passed): for any other it returns false and leaves *a to
 * the tree reader of load.c, which decides and says what is wrong. An element it takes, the tree
 * reader takes too, with the same result. */
bool vt_alloc_sax(const vt_alloc_limits *lim, const char *text, size_t len, vt_alloc *a);
/* Every field alike, byte for byte (both from zeroed memory: a field one reader sets and the
 * other does not differs), and the labelled bytes alike. */
bool vt_alloc_same(const vt_alloc *a, const vt_alloc *b);
/* Set in the environment (the test suite sets it), every element the fast reader takes is read
 * by the tree reader too, and a difference fails the load: a field added to one reader and not
 * the other shows in every test that reads a file with it. */
#define VT_CHECK_READERS "VT_CHECK_READERS"
/* the message that fails the load then (after the element's place) */
#define VT_READERS_DIFFER "the fast reader read it otherwise"

#endif
