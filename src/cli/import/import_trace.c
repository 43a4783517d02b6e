/* The neutral trace every reader fills. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "import.h"

int vt_imp_nomem(vt_err *err)
{
    vt_err_set(err, "out of memory");
    return -1;
}

bool vt_json_i64(json_t *obj, const char *key, int64_t *out)
{
    json_t *v = json_object_get(obj, key);
    if (json_is_integer(v))
        *out = json_integer_value(v);
    else if (json_is_real(v) && fabs(json_real_value(v)) < 9e18)
        *out = (int64_t)json_real_value(v);
    else
        return false;
    return true;
}

int vt_trace_add_ev(vt_trace *tr, const vt_mev *ev, vt_err *err)
{
    if (vt_grow(&tr->ev, &tr->ev_cap, tr->nev + 1, sizeof *tr->ev, 16))
        return vt_imp_nomem(err);
    if (tr->nev >= UINT32_MAX) {
        vt_err_set(err, "%s: more than %u memory events", tr->source, UINT32_MAX);
        return -1;
    }
    tr->ev[tr->nev] = *ev;
    tr->ev[tr->nev].order = (uint32_t)tr->nev;
    tr->nev++;
    return 0;
}

int vt_trace_add_span(vt_trace *tr, const vt_span *sp, vt_err *err)
{
    if (vt_grow(&tr->spans, &tr->spans_cap, tr->nspans + 1, sizeof *tr->spans, 16))
        return vt_imp_nomem(err);
    tr->spans[tr->nspans++] = *sp;
    return 0;
}

int vt_trace_add_block(vt_trace *tr, bool at_end, const vt_block *b, vt_err *err)
{
    vt_block **arr = at_end ? &tr->end_blocks : &tr->start_blocks;
    size_t *n = at_end ? &tr->nend : &tr->nstart, *cap = at_end ? &tr->end_cap : &tr->start_cap;
    if (vt_grow(arr, cap, *n + 1, sizeof **arr, 16))
        return vt_imp_nomem(err);
    (*arr)[(*n)++] = *b;
    return 0;
}

vt_devinfo *vt_trace_dev(vt_trace *tr, int32_t device, vt_err *err)
{
    for (size_t i = 0; i < tr->ndevs; i++)
        if (tr->devs[i].device == device)
            return &tr->devs[i];
    if (vt_grow(&tr->devs, &tr->devs_cap, tr->ndevs + 1, sizeof *tr->devs, 16)) {
        vt_imp_nomem(err);
        return NULL;
    }
    vt_devinfo *d = &tr->devs[tr->ndevs++];
    *d = (vt_devinfo){.device = device, .total_bytes = -1, .reserved_peak = -1, .reserved_end = -1};
    return d;
}

int vt_trace_add_oom(vt_trace *tr, const vt_ioom *o, vt_err *err)
{
    if (vt_grow(&tr->ooms, &tr->ooms_cap, tr->nooms + 1, sizeof *tr->ooms, 16))
        return vt_imp_nomem(err);
    tr->ooms[tr->nooms++] = *o;
    return 0;
}

static int add_line(char ***arr, size_t *n, size_t *cap, vt_err *err, const char *fmt, va_list ap)
{
    char *line;
    if (vasprintf(&line, fmt, ap) < 0)
        return vt_imp_nomem(err);
    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*arr)[i], line)) {
            free(line);
            return 0;
        }
    if (vt_grow(arr, cap, *n + 1, sizeof **arr, 16)) {
        free(line);
        return vt_imp_nomem(err);
    }
    (*arr)[(*n)++] = line;
    return 0;
}

int vt_trace_lack(vt_trace *tr, vt_err *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = add_line(&tr->lacks, &tr->nlacks, &tr->lacks_cap, err, fmt, ap);
    va_end(ap);
    return r;
}

int vt_trace_note(vt_trace *tr, vt_err *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = add_line(&tr->notes, &tr->nnotes, &tr->notes_cap, err, fmt, ap);
    va_end(ap);
    return r;
}

void vt_trace_rebase(vt_trace *tr, double origin, double per_s)
{
    for (size_t i = 0; i < tr->nev; i++)
        tr->ev[i].t = (tr->ev[i].t - origin) / per_s;
    for (size_t i = 0; i < tr->nspans; i++) {
        tr->spans[i].start = (tr->spans[i].start - origin) / per_s;
        tr->spans[i].end = (tr->spans[i].end - origin) / per_s;
    }
    for (size_t i = 0; i < tr->nooms; i++)
        tr->ooms[i].t = (tr->ooms[i].t - origin) / per_s;
}

void vt_trace_free(vt_trace *tr)
{
    vt_isites_free(&tr->sites);
    free(tr->ev);
    free(tr->spans);
    free(tr->start_blocks);
    free(tr->end_blocks);
    free(tr->devs);
    free(tr->ooms);
    for (size_t i = 0; i < tr->nlacks; i++)
        free(tr->lacks[i]);
    for (size_t i = 0; i < tr->nnotes; i++)
        free(tr->notes[i]);
    free(tr->lacks);
    free(tr->notes);
    free(tr->mpaths);
    memset(tr, 0, sizeof *tr);
}
