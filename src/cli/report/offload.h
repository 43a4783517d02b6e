/* Offloaded state in the report, its --json and diff: what the framework labelled as
 * parameters, gradients or optimizer state in pinned host memory (offload.c). */
#ifndef VT_REPORT_OFFLOAD_H
#define VT_REPORT_OFFLOAD_H

#include <stdio.h>

#include <jansson.h>

#include "snapshot.h"

/* All the labelled bytes in pinned host memory; -1 for a file without the figures. */
int64_t vt_offloaded_bytes(const vt_snapshot *s);
/* The report's line, when any bytes were offloaded. */
void vt_print_offloaded(FILE *out, const vt_snapshot *s);
/* --json's "host_offloaded": the snapshot's, null for a file without it. */
json_t *vt_offloaded_json(const vt_snapshot *s);

#endif
