/* DESIGN.md's category table, applied to one allocation live at the peak. The snapshot gives
 * each allocation its birth and death as (phase, step, phase instance); docs/categories.md
 * explains the rules to users. */
#include "snapshot.h"

static bool in_phase(vt_phase p)
{
    return p == VT_FORWARD || p == VT_BACKWARD || p == VT_OPTIMIZER;
}

/* Freed inside the phase instance it was born in or, born outside phases, freed before the
 * next phase instance began: the two moments share an instance number and no instance started
 * between them (docs/snapshot-format.md). */
static bool dies_in_its_instance(const vt_alloc *a)
{
    return !a->alive_at_end && a->death.instance == a->birth.instance &&
           in_phase(a->death.phase) == in_phase(a->birth.phase);
}

/* Still alive when the step counter reached birth step + 2: it outlived the whole next
 * iteration. An allocation alive at the end counts only if the run got that far. */
static bool long_lived(const vt_alloc *a, int64_t final_steps)
{
    int64_t last_step = a->alive_at_end ? final_steps : a->death.step;
    return last_step >= a->birth.step + 2;
}

vt_category vt_classify(const vt_alloc *a, bool phase_markers, int64_t final_steps)
{
    if (!phase_markers)
        return a->alive_at_end ? VT_CAT_UNATTRIBUTED_PERSISTENT : VT_CAT_UNATTRIBUTED_TRANSIENT;
    if (dies_in_its_instance(a))
        return VT_CAT_TEMPORARY;
    switch (a->birth.phase) {
    case VT_BACKWARD:
        return VT_CAT_GRADIENTS;
    case VT_OPTIMIZER:
        return VT_CAT_OPTIMIZER_STATE;
    case VT_SETUP:
        /* built before training and kept to the end: the model, however short the run */
        if (a->alive_at_end)
            return VT_CAT_PARAMETERS;
        break;
    default:
        break;
    }
    return long_lived(a, final_steps) ? VT_CAT_PARAMETERS : VT_CAT_ACTIVATIONS;
}

static const char *const keys[VT_NCATS] = {
    "parameters",
    "gradients",
    "optimizer_state",
    "activations",
    "temporary",
    "unattributed_persistent",
    "unattributed_transient",
};
static const char *const labels[VT_NCATS] = {
    "parameters",
    "gradients",
    "optimizer state",
    "activations",
    "temporary",
    "unattributed (persistent)",
    "unattributed (transient)",
};

const char *vt_category_key(vt_category c)
{
    return keys[c];
}

const char *vt_category_label(vt_category c)
{
    return labels[c];
}
