#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "copies.h"
#include "history.h"
#include "phase.h"
#include "sample.h"
#include "snapshot.h"
#include "table.h"
#include "vramtap.h"

#define MAX_ALIASES 32
#define MAX_OPEN 64

static struct {
    char name[32];
    int phase;
} aliases[MAX_ALIASES];
static int naliases;

/* The phases begun and not yet ended, outermost first. A phase instance lasts while the stack
 * is not empty; its kind is the outermost. Anything begun inside it (a forward recomputed by
 * activation checkpointing inside backward, an NVTX range nested in another) does not start a
 * new instance. Guarded by the state lock. */
static uint8_t open_phases[MAX_OPEN];
static int nopen;

static const char *const phase_names[] = {"setup", "forward", "backward", "optimizer", "other"};

const char *vt_phase_name(vt_phase p)
{
    return (unsigned)p < sizeof phase_names / sizeof phase_names[0] ? phase_names[p] : "other";
}

void vt_phase_init(void)
{
    const char *spec = getenv("VRAMTAP_PHASES");
    if (!spec)
        return;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        int phase = -1;
        if (eq) {
            *eq = 0;
            for (int p = VT_PHASE_FORWARD; p <= VT_PHASE_OPTIMIZER; p++)
                if (!strcasecmp(eq + 1, phase_names[p]))
                    phase = p;
        }
        if (phase < 0 || !*item || strlen(item) >= sizeof aliases[0].name) {
            vt_log("VRAMTAP_PHASES: ignoring '%s' (expected NAME=forward|backward|optimizer)",
                   item);
            continue;
        }
        if (naliases == MAX_ALIASES) {
            vt_log("VRAMTAP_PHASES: more than %d aliases, the rest are ignored", MAX_ALIASES);
            break;
        }
        snprintf(aliases[naliases].name, sizeof aliases[0].name, "%s", item);
        aliases[naliases++].phase = phase;
    }
}

int vt_phase_lookup(const char *name)
{
    if (!name)
        return -1;
    /* the three names begin with three letters: one comparison, not up to three (the hooks ask
     * at every optimizer step) */
    for (int p = VT_PHASE_FORWARD; p <= VT_PHASE_OPTIMIZER; p++)
        if (tolower((unsigned char)name[0]) == phase_names[p][0] &&
            !strcasecmp(name, phase_names[p]))
            return p;
    for (int i = 0; i < naliases; i++)
        if (!strcasecmp(name, aliases[i].name))
            return aliases[i].phase;
    return -1;
}

int vt_phase_begin(int phase)
{
    int rc = VRAMTAP_OK;
    vt_lock();
    if (nopen++ > 0) {
        if (nopen <= MAX_OPEN)
            open_phases[nopen - 1] = (uint8_t)phase;
        rc = VRAMTAP_ENESTED;
    } else {
        open_phases[0] = (uint8_t)phase;
        vt_state.instance++;
        vt_state.phase = (uint8_t)phase;
        vt_copies_moment_locked();
        vt_state.markers = 1;
        vt_span_open_locked((uint8_t)phase, vt_clock());
    }
    vt_unlock();
    if (rc == VRAMTAP_OK)
        vt_sample_phase();
    return rc;
}

int vt_phase_end(int phase)
{
    int rc = VRAMTAP_OK, closed = 0;
    vt_lock();
    /* Past the stored depth the names cannot be checked; the count still pairs them. */
    if (!nopen || (nopen <= MAX_OPEN && open_phases[nopen - 1] != phase)) {
        rc = VRAMTAP_ENOTOPEN;
    } else if (--nopen == 0) {
        vt_span_close_locked(vt_clock());
        vt_state.phase = VT_PHASE_OTHER;
        if (phase == VT_PHASE_OPTIMIZER) {
            vt_state.step++;
            vt_history_step_locked();
        }
        vt_copies_moment_locked();
        closed = 1;
    }
    vt_unlock();
    if (closed)
        vt_sample_phase();
    if (closed && phase == VT_PHASE_OPTIMIZER)
        vt_snapshot_write_interim();
    return rc;
}

VT_EXPORT int vramtap_phase_begin(const char *name)
{
    int phase = vt_phase_lookup(name);
    return phase < 0 ? VRAMTAP_EUNKNOWN : vt_phase_begin(phase);
}

VT_EXPORT int vramtap_phase_end(const char *name)
{
    int phase = vt_phase_lookup(name);
    return phase < 0 ? VRAMTAP_EUNKNOWN : vt_phase_end(phase);
}

VT_EXPORT int vramtap_step_mark(void)
{
    vt_lock();
    vt_state.step++;
    vt_history_step_locked();
    vt_copies_moment_locked();
    vt_unlock();
    vt_snapshot_write_interim();
    return VRAMTAP_OK;
}

VT_EXPORT int vramtap_is_loaded(void)
{
    return !vt_cfg.disabled;
}
