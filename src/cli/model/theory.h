/* Theory beside measurement (theory.c): the standard rules' parameters, gradients and
 * optimizer state for the run record's model and optimizer, next to the bill at the peak. */
#ifndef VT_THEORY_H
#define VT_THEORY_H

#include "snapshot.h"

#define VT_THEORY_ROWS 3

typedef struct {
    vt_category cat;
    bool known; /* the record holds what this category's rule needs */
    int64_t expected, measured;
    char why[400]; /* empty when they agree within 1% */
} vt_theory_row;

typedef struct {
    bool any;                           /* some row is known */
    vt_theory_row rows[VT_THEORY_ROWS]; /* parameters, gradients, optimizer state */
    char optimizer_rule[96];            /* "Adam: 2 buffers per trainable parameter", or empty */
} vt_theory;

/* Nothing is known without a run record, without phase markers, or in native mode. */
void vt_theory_build(const vt_snapshot *s, const vt_bill *bill, vt_theory *t);
/* Buffers per trainable parameter the record's optimizer keeps by its settings ("SGD
 * (momentum=0.9, ...)": 1), -1 for several optimizers or one without a rule here. */
int vt_optimizer_buffers(const char *optimizer);

#endif
