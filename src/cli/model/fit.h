/* What fits: how each figure of a device's bill grows along one dimension X (batch size,
 * sequence length, resolution) over several runs of the same job, and what that predicts.
 * Pure arithmetic over figures the caller took from the snapshots; docs/fit.md explains the
 * model to users. */
#ifndef VT_MODEL_FIT_H
#define VT_MODEL_FIT_H

#include "snapshot.h"

/* A run is off a model when |measured - model| exceeds this fraction of the measured figure. */
#define VT_FIT_TOLERANCE 0.02

typedef enum { VT_GROW_FIXED, VT_GROW_LINEAR, VT_GROW_QUADRATIC } vt_grow_kind;

/* y = a + b X + c X² over the runs. */
typedef struct {
    vt_grow_kind kind;
    double a, b, c;
    bool off;         /* some run is off the chosen model by more than VT_FIT_TOLERANCE */
    double worst_off; /* the largest |measured - model| / measured, over the runs */
    size_t worst_run; /* which run that is */
} vt_growth;

/* Fixed when every run measured the same; otherwise the least-squares line, or (three or more
 * distinct X) the least-squares parabola when the line leaves a run off by more than the
 * tolerance and the parabola curves upward and leaves none off. x needs two distinct values. */
void vt_growth_fit(const int64_t *x, const int64_t *y, size_t n, vt_growth *g);
/* The model at x, to the byte, never below 0. */
int64_t vt_growth_at(const vt_growth *g, int64_t x);
const char *vt_grow_name(vt_grow_kind k);

/* The report's lines: the five categories, then unattributed (both kinds together). */
#define VT_FIT_NCATS (VT_CAT_UNATTRIBUTED_PERSISTENT + 1)
#define VT_FIT_UNATTRIBUTED VT_CAT_UNATTRIBUTED_PERSISTENT
const char *vt_fit_cat_key(int c);
const char *vt_fit_cat_label(int c);

/* One device in one run: the figures the model is fitted to. -1: unknown (cat_bytes[0] < 0:
 * no categories, as in native mode). */
typedef struct {
    int64_t x;
    vt_phase peak_phase;
    int64_t peak_bytes;
    int64_t cat_bytes[VT_FIT_NCATS];     /* at the peak */
    int64_t phase_bytes[VT_NPHASES + 1]; /* each phase's largest live bytes */
    /* the categories at each phase's largest live bytes: at the peak's phase the bill, at the
     * others what the allocation history shows at that moment; [0] -1 where unknown */
    int64_t phase_cats[VT_NPHASES + 1][VT_FIT_NCATS];
    int64_t reserved_bytes, used_bytes; /* allocator reserved and device used at the peak */
} vt_fit_point;

/* The phases a prediction considers: those measured in every run (index VT_NOPHASE holds the
 * peak of runs without phase markers). */
#define VT_FIT_NPHASES (VT_NPHASES + 1)

typedef struct {
    const vt_fit_point *pts;
    size_t n;
    bool phase_modelled[VT_FIT_NPHASES];
    vt_growth phase[VT_FIT_NPHASES];
    /* Categories are fitted at one phase's peak, cat_phase: that of the run with the largest
     * X, over the runs that know the categories there (at their own peak, or from the
     * allocation history at that phase's peak), when those have two distinct X. */
    bool have_cats, peak_moved;
    vt_phase cat_phase;
    size_t cat_runs;
    vt_growth cat[VT_FIT_NCATS];
    /* parameters, gradients or optimizer state differ between the runs fitted: they depend on
     * the model, not on X, so the runs may not be of the same job */
    bool fixed_changed[VT_FIT_NCATS];
    /* the gaps above the tensors, the largest of the runs: reserved = tensors × (1 + ratio),
     * device used = reserved + extra (or tensors + extra without a reserved figure) */
    double reserved_ratio; /* NAN: not recorded in every run */
    int64_t used_extra;    /* -1: not recorded in every run */
} vt_fit;

void vt_fit_build(const vt_fit_point *pts, size_t n, vt_fit *f);
/* Whether run i knows the categories at cat_phase's peak (and so was fitted). */
bool vt_fit_run_has_cats(const vt_fit *f, size_t i);

typedef struct {
    int64_t x;
    int64_t peak_bytes;                  /* the largest of the phase peaks */
    vt_phase phase;                      /* where it falls */
    int64_t phase_bytes[VT_FIT_NPHASES]; /* -1: not modelled */
    bool have_cats; /* the categories were fitted at the peak of the phase predicted to dominate */
    int64_t cat_bytes[VT_FIT_NCATS];
    int64_t reserved_bytes, used_bytes; /* -1: unknown */
    int64_t compared_bytes; /* what must fit: device used, else reserved, else the peak */
} vt_fit_prediction;

void vt_fit_predict(const vt_fit *f, int64_t x, vt_fit_prediction *p);

/* The largest X ≥ 1 whose compared figure is at most budget; 0 when not even X = 1 fits, -1
 * when nothing grows with X (every X fits, or none). */
int64_t vt_fit_largest(const vt_fit *f, int64_t budget);

#endif
