/* Copies between host and device as the report, its --json and diff give them (copies.c). */
#ifndef VT_REPORT_COPIES_H
#define VT_REPORT_COPIES_H

#include <stdio.h>

#include <jansson.h>

#include "snapshot.h"

/* What the report says of a run's copies: a typical step (`step`, the median of the `steps`
 * completed ones by bytes uploaded; -1 and the whole run when none completed) and the advice
 * it calls for. */
typedef struct {
    bool present, any; /* any: the run made a copy */
    int64_t step, steps;
    vt_copy_counts typical;
    int64_t up, up_pageable;
    double pageable_share;
    bool advise_pin;  /* half or more of its upload bytes came from pageable memory */
    bool advise_sync; /* it waited for the GPU at least once to download */
} vt_copy_summary;

vt_copy_summary vt_copy_summarize(const vt_snapshot *s);
/* The report's copies lines and their advice; nothing for a file without copies. */
void vt_print_copies(FILE *out, const vt_snapshot *s);
/* --json's "copies": null for a file without them. */
json_t *vt_copies_json(const vt_snapshot *s);

#endif
