/* Copies between host and device in the report, its --json and diff: uploads and downloads per
 * step with the share from pageable memory, the downloads that waited for the GPU, and advice
 * in the terms of the user's framework. */
#include <stdio.h>
#include <stdlib.h>

#include "copies.h"

/* At or above this share of upload bytes from pageable memory, pinning is advised. */
#define PAGEABLE_ADVICE 0.5

static int64_t up(const vt_copy_counts *c)
{
    return c->bytes[VT_CP_H2D_PAGEABLE] + c->bytes[VT_CP_H2D_PINNED];
}

static int64_t down(const vt_copy_counts *c)
{
    return c->bytes[VT_CP_D2H_PAGEABLE] + c->bytes[VT_CP_D2H_PINNED];
}

static int by_upload(const void *a, const void *b)
{
    const vt_copy_step *x = a, *y = b;
    int64_t ux = up(&x->c), uy = up(&y->c);
    return ux < uy ? -1 : ux > uy ? 1 : x->step < y->step ? -1 : x->step > y->step;
}

vt_copy_summary vt_copy_summarize(const vt_snapshot *s)
{
    vt_copy_summary m = {.present = s->copies.present, .step = -1};
    if (!m.present)
        return m;
    for (int k = 0; k < VT_CP_KINDS; k++)
        m.any |= s->copies.total.calls[k] > 0;
    /* A typical step: the median of the completed steps by bytes uploaded (a step without copies
     * counts as one that uploaded nothing), so that loading the model in step 0 does not stand
     * for the loop. Without a completed step, the whole run. */
    int64_t n = s->steps < 256 ? s->steps : 256;
    vt_copy_step *all = n > 0 ? calloc((size_t)n, sizeof *all) : NULL;
    if (all) {
        for (int64_t i = 0; i < n; i++)
            all[i].step = i;
        for (size_t i = 0; i < s->copies.nsteps; i++)
            if (s->copies.steps[i].step < n)
                all[s->copies.steps[i].step].c = s->copies.steps[i].c;
        qsort(all, (size_t)n, sizeof *all, by_upload);
        m.typical = all[(n - 1) / 2].c;
        m.step = all[(n - 1) / 2].step;
        m.steps = n;
        free(all);
    } else {
        m.typical = s->copies.total;
    }
    m.up = up(&m.typical);
    m.up_pageable = m.typical.bytes[VT_CP_H2D_PAGEABLE];
    m.pageable_share = m.up > 0 ? (double)m.up_pageable / (double)m.up : 0;
    m.advise_pin = m.up > 0 && m.pageable_share >= PAGEABLE_ADVICE;
    m.advise_sync = m.step >= 0 && m.typical.sync_d2h >= 1;
    return m;
}

static double share(int64_t part, int64_t whole)
{
    return whole > 0 ? 100.0 * (double)part / (double)whole : 0;
}

void vt_print_copies(FILE *out, const vt_snapshot *s)
{
    vt_copy_summary m = vt_copy_summarize(s);
    const vt_copy_counts *t = &s->copies.total;
    if (!m.any)
        return;
    char a[32], b[32], c[32];
    fprintf(out,
            "  copies     uploads %s in %lld calls (%.0f%% from pageable memory); downloads %s in "
            "%lld calls, %lld waited for; device to device %s\n",
            vt_fmt_bytes(a, up(t)),
            (long long)(t->calls[VT_CP_H2D_PAGEABLE] + t->calls[VT_CP_H2D_PINNED]),
            share(t->bytes[VT_CP_H2D_PAGEABLE], up(t)), vt_fmt_bytes(b, down(t)),
            (long long)(t->calls[VT_CP_D2H_PAGEABLE] + t->calls[VT_CP_D2H_PINNED]),
            (long long)t->sync_d2h, vt_fmt_bytes(c, t->bytes[VT_CP_D2D]));
    char when[96] = "the whole run, no step completed";
    if (m.step >= 0)
        snprintf(when, sizeof when, "step %lld, the median of %lld by bytes uploaded",
                 (long long)m.step, (long long)m.steps);
    fprintf(out,
            "             a typical step (%s): uploads %s (%.0f%% pageable), downloads %s, %lld "
            "synchronous download%s\n",
            when, vt_fmt_bytes(a, m.up), 100.0 * m.pageable_share,
            vt_fmt_bytes(b, down(&m.typical)), (long long)m.typical.sync_d2h,
            m.typical.sync_d2h == 1 ? "" : "s");
    if (m.advise_pin)
        fprintf(out,
                "  advice: %.0f%% of the bytes a step uploads (%s of %s) come from pageable "
                "memory: the driver stages each such copy through a pinned buffer of its own and "
                "the copy cannot overlap the GPU's work. Load batches with "
                "DataLoader(pin_memory=True) and move them with .to(device, non_blocking=True)\n",
                100.0 * m.pageable_share, vt_fmt_bytes(a, m.up_pageable), vt_fmt_bytes(b, m.up));
    if (m.advise_sync)
        fprintf(out,
                "  advice: %lld synchronous download%s a step: each one waits for the GPU to "
                "finish all the work queued before it (loss.item(), .cpu(), .tolist(), printing "
                "a tensor, an if on a GPU value). Read such values every N steps, or keep them on "
                "the GPU\n",
                (long long)m.typical.sync_d2h, m.typical.sync_d2h == 1 ? "" : "s");
}

static json_t *counts_json(const vt_copy_counts *c)
{
    return json_pack(
        "{s:{s:I, s:I, s:I, s:I, s:I}, s:{s:I, s:I, s:I, s:I, s:I}, s:{s:I, s:I}, s:{s:I, s:I}, "
        "s:I}",
        "h2d", "bytes", (json_int_t)up(c), "pageable_bytes",
        (json_int_t)c->bytes[VT_CP_H2D_PAGEABLE], "pinned_bytes",
        (json_int_t)c->bytes[VT_CP_H2D_PINNED], "pageable_calls",
        (json_int_t)c->calls[VT_CP_H2D_PAGEABLE], "pinned_calls",
        (json_int_t)c->calls[VT_CP_H2D_PINNED], "d2h", "bytes", (json_int_t)down(c),
        "pageable_bytes", (json_int_t)c->bytes[VT_CP_D2H_PAGEABLE], "pinned_bytes",
        (json_int_t)c->bytes[VT_CP_D2H_PINNED], "pageable_calls",
        (json_int_t)c->calls[VT_CP_D2H_PAGEABLE], "pinned_calls",
        (json_int_t)c->calls[VT_CP_D2H_PINNED], "d2d", "bytes", (json_int_t)c->bytes[VT_CP_D2D],
        "calls", (json_int_t)c->calls[VT_CP_D2D], "h2h", "bytes", (json_int_t)c->bytes[VT_CP_H2H],
        "calls", (json_int_t)c->calls[VT_CP_H2H], "sync_d2h_calls", (json_int_t)c->sync_d2h);
}

json_t *vt_copies_json(const vt_snapshot *s)
{
    vt_copy_summary m = vt_copy_summarize(s);
    if (!m.present)
        return json_null();
    json_t *doc = counts_json(&s->copies.total);
    json_t *phases = json_object();
    for (int p = 0; p < VT_NPHASES; p++)
        json_object_set_new(phases, vt_phase_name((vt_phase)p), counts_json(&s->copies.phase[p]));
    json_t *steps = json_array();
    for (size_t i = 0; i < s->copies.nsteps; i++) {
        json_t *st = counts_json(&s->copies.steps[i].c);
        json_object_set_new(st, "step", json_integer(s->copies.steps[i].step));
        json_array_append_new(steps, st);
    }
    json_t *later = json_null();
    if (s->copies.has_later) {
        later = counts_json(&s->copies.later);
        json_object_set_new(later, "first", json_integer(s->copies.later_first));
        json_object_set_new(later, "last", json_integer(s->copies.later_last));
    }
    json_t *advice = json_array();
    if (m.advise_pin)
        json_array_append_new(advice, json_string("pin_memory"));
    if (m.advise_sync)
        json_array_append_new(advice, json_string("sync_download"));
    json_object_set_new(doc, "phases", phases);
    json_object_set_new(doc, "steps", steps);
    json_object_set_new(doc, "later_steps", later);
    json_object_set_new(doc, "typical_step",
                        json_pack("{s:o, s:I, s:I, s:I, s:I, s:f, s:I}", "step",
                                  m.step >= 0 ? json_integer(m.step) : json_null(), "of_steps",
                                  (json_int_t)m.steps, "h2d_bytes", (json_int_t)m.up,
                                  "h2d_pageable_bytes", (json_int_t)m.up_pageable, "d2h_bytes",
                                  (json_int_t)down(&m.typical), "pageable_share", m.pageable_share,
                                  "sync_d2h_calls", (json_int_t)m.typical.sync_d2h));
    json_object_set_new(doc, "advice", advice);
    return doc;
}
