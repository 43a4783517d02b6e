/* The run record (record.c): what ran, as rows of label and value. */
#ifndef VT_RECORD_H
#define VT_RECORD_H

#include "snapshot.h"

#define VT_RECORD_MAX 48

typedef struct {
    const char *key;   /* run_record key, or gpu / peak_allocated / peak_reserved */
    const char *label; /* for people */
    char value[320];
} vt_record_row;

typedef struct {
    vt_record_row rows[VT_RECORD_MAX];
    size_t n;
} vt_record;

void vt_record_build(const vt_snapshot *s, vt_record *r);
/* A run_record value: the string (NULL when absent or not a string), the integer (-1 when
 * absent, negative or not an integer). */
const char *vt_record_text(json_t *rec, const char *key);
int64_t vt_record_int(json_t *rec, const char *key);
/* The value of a row, NULL when the record lacks it. */
const char *vt_record_get(const vt_record *r, const char *key);
/* The record at the top of the report (nothing when the run kept none). */
void vt_print_record(FILE *out, const vt_snapshot *s);
/* `report --record`: a Markdown table to paste into an issue or a notebook. */
void vt_print_record_markdown(FILE *out, const vt_snapshot *s);
/* The snapshot's run_record object, or null. */
json_t *vt_run_record_json(const vt_snapshot *s);
/* What differs between a's and b's records, "label a → b" joined by ", " into buf; returns
 * how many rows differ. */
size_t vt_record_changes(const vt_snapshot *a, const vt_snapshot *b, char *buf, size_t len);
/* PyTorch's own categories at device's peak from an imported memory timeline: an object
 * name -> bytes, or NULL. */
json_t *vt_pytorch_categories_json(const vt_snapshot *s, int device);
void vt_print_pytorch_categories(FILE *out, const vt_snapshot *s, int device);

#endif
