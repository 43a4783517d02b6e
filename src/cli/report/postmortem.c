/* The out-of-memory post-mortem: what was asked, what was live, what to try first. */
#include <string.h>

#include "report.h"

#define STACK_LINES 16

enum {
    P = 1 << VT_CAT_PARAMETERS,
    G = 1 << VT_CAT_GRADIENTS,
    O = 1 << VT_CAT_OPTIMIZER_STATE,
    A = 1 << VT_CAT_ACTIVATIONS,
    T = 1 << VT_CAT_TEMPORARY,
};

/* The seeds' order; each remedy lists the categories it shrinks. Fragmentation comes last,
 * always: it is the usual suspect and rarely the cause. */
static const struct {
    unsigned shrinks;
    const char *text;
} remedies[] = {
    {A | T, "a smaller micro-batch or a shorter sequence: activations, and the temporaries of "
            "each operation, grow with both"},
    {A | T, "gradient accumulation over several micro-batches, to keep the effective batch "
            "while the micro-batch shrinks"},
    {A | P | G, "mixed precision (bf16 or fp16 autocast, half-precision weights): halves "
                "activations, and parameters and gradients kept in half precision"},
    {A, "activation checkpointing (torch.utils.checkpoint): recompute activations in backward "
        "instead of keeping them from forward"},
    {G | O, "fewer trainable parameters (LoRA adapters, freezing layers): frozen parameters "
            "need neither gradients nor optimizer state"},
};

size_t vt_advise(const vt_snapshot *snap, const vt_bill *bill, vt_advice *items, size_t max)
{
    char b[32], f[32];
    size_t n = 0;
    const vt_oom *o = &snap->oom;
    vt_category dominant = bill ? vt_bill_dominant(bill) : VT_CAT_UNATTRIBUTED_PERSISTENT;
    bool unknown = dominant >= VT_CAT_UNATTRIBUTED_PERSISTENT;
    /* no remedy shrinks enough for a request larger than the device: the size is the bug */
    if (o->total_bytes > 0 && o->size > o->total_bytes && n < max)
        snprintf(items[n++].text, sizeof items->text,
                 "the request alone (%s) is larger than the device (%s): check the size the "
                 "code computed (a shape, a dtype or a count far from the intended one)",
                 vt_fmt_bytes(b, o->size), vt_fmt_bytes(f, o->total_bytes));
    /* memory vramtap did not see allocated outweighs what it did: no remedy below reaches it */
    int64_t outside = vt_oom_outside(snap, bill), seen = bill ? bill->dev->listed_bytes : 0;
    if (outside > seen && n < max)
        snprintf(items[n++].text, sizeof items->text,
                 "%s of the %s in use on the device is outside what vramtap saw allocated: "
                 "other processes on the GPU (nvidia-smi lists them), the CUDA context, libraries "
                 "that allocated before vramtap loaded; free that first, the remedies below act "
                 "only on the rest",
                 vt_fmt_bytes(b, outside), vt_fmt_bytes(f, outside + seen));
    if (unknown && n < max)
        snprintf(items[n++].text, sizeof items->text,
                 "mark the phases ('vramtap run' for PyTorch, NVTX ranges named forward, "
                 "backward and optimizer, or include/vramtap.h): without them vramtap cannot "
                 "tell which of the remedies below applies");
    for (size_t i = 0; i < sizeof remedies / sizeof remedies[0] && n < max; i++)
        if (unknown || (remedies[i].shrinks & (1u << dominant)))
            snprintf(items[n++].text, sizeof items->text, "%s", remedies[i].text);
    if (n == max)
        return n;
    if (o->free_bytes >= 0 && o->free_bytes >= o->size)
        snprintf(items[n++].text, sizeof items->text,
                 "fragmentation: the device reported %s free, more than the %s asked, so the "
                 "free memory is in pieces or held by another pool; with PyTorch's caching "
                 "allocator try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
                 vt_fmt_bytes(f, o->free_bytes), vt_fmt_bytes(b, o->size));
    else
        snprintf(items[n++].text, sizeof items->text,
                 "fragmentation, last: only when the live memory is well below the device's "
                 "capacity is space lost between blocks (PyTorch: "
                 "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)");
    return n;
}

static const vt_bill *oom_bill(const vt_loaded *l)
{
    for (size_t i = 0; i < l->nbills; i++)
        if (l->bills[i].dev->device == l->snap.oom.device)
            return &l->bills[i];
    return NULL;
}

static void print_request(FILE *out, const vt_snapshot *s, const vt_bill *bill)
{
    const vt_oom *o = &s->oom;
    char b[32], t[32], when[48];
    fprintf(out, "  %-11s %s%s%s via %s, %s, at %.2f s", "asked", vt_on(VT_STYLE_BOLD),
            vt_fmt_bytes(b, o->size), vt_off(), o->api, vt_fmt_when(when, o->phase, o->step),
            o->time_s);
    if (o->error >= 0)
        fprintf(out, " (error %lld)", (long long)o->error);
    fputc('\n', out);
    if (o->site >= 0) {
        const vt_site *site = &s->sites[o->site];
        char name[512];
        size_t shown = 0, hidden = 0, more = 0;
        for (size_t i = 0; i < site->nframes; i++) {
            /* the user's frames: start-up, CUDA, vramtap and allocator plumbing as in labels */
            if (vt_frame_folded(&site->frames[i])) {
                hidden++;
            } else if (shown == STACK_LINES) {
                more++;
            } else {
                vt_frame_name(&site->frames[i], name, sizeof name);
                fprintf(out, "  %-11s %s\n", shown++ ? "" : "from", name);
            }
        }
        if (more)
            fprintf(out, "  %-11s ... %zu more frames\n", "", more);
        if (hidden)
            fprintf(out,
                    "  %-11s (%zu frame%s of the C library, CUDA, vramtap or the allocator "
                    "folded: --all-frames shows them)\n",
                    shown ? "" : "from", hidden, hidden == 1 ? "" : "s");
    }
    if (o->free_bytes >= 0)
        fprintf(out, "  %-11s %s free%s%s\n", "device", vt_fmt_bytes(b, o->free_bytes),
                o->total_bytes >= 0 ? " of " : "",
                o->total_bytes >= 0 ? vt_fmt_bytes(t, o->total_bytes) : "");
    int64_t outside = vt_oom_outside(s, bill);
    if (outside >= 0) {
        char why[160];
        snprintf(why, sizeof why,
                 "%s in use that vramtap did not see allocated (the CUDA context, other "
                 "processes, memory allocated before vramtap loaded)",
                 vt_fmt_bytes(b, outside));
        vt_print_wrapped(out, fprintf(out, "  %-11s ", "elsewhere"), 14, why);
    }
}

int64_t vt_oom_outside(const vt_snapshot *s, const vt_bill *bill)
{
    const vt_oom *o = &s->oom;
    if (o->free_bytes < 0 || o->total_bytes < 0)
        return -1;
    int64_t outside = o->total_bytes - o->free_bytes - (bill ? bill->dev->listed_bytes : 0);
    /* managed memory can be oversubscribed: then the figure means nothing */
    return outside >= 0 ? outside : -1;
}

void vt_print_postmortem(FILE *out, vt_loaded *l)
{
    const vt_snapshot *s = &l->snap;
    const vt_bill *bill = oom_bill(l);
    char b[32];
    fprintf(out, "%svramtap report%s  %s  (out-of-memory post-mortem)\n", vt_on(VT_STYLE_BOLD),
            vt_off(), s->path);
    if (s->argc) {
        fputs("  command    ", out);
        vt_print_command(out, s->argv, s->argc);
        fputc('\n', out);
    }
    fprintf(out, "\n%sout of memory on cuda:%d%s\n", vt_on(VT_STYLE_BAD), s->oom.device, vt_off());
    print_request(out, s, bill);
    if (bill)
        vt_print_peak(out, "peak so far", bill->dev, true);

    if (!bill || !bill->dev->listed_count) {
        fputs("\n  nothing vramtap saw was live on the device: the memory is held by the CUDA "
              "context or by other processes\n",
              out);
    } else {
        fprintf(out, "\n  %slive at the failure%s\n", vt_on(VT_STYLE_BOLD), vt_off());
        vt_print_categories(out, s, bill);
        fprintf(out, "\n  %slargest sites live at the failure%s\n", vt_on(VT_STYLE_BOLD), vt_off());
        vt_print_site_rows(out, s, bill->top_all, bill->ntop_all);
    }

    vt_advice items[8];
    size_t n = vt_advise(s, bill, items, 8);
    fprintf(out, "\n  %swhat to try first%s", vt_on(VT_STYLE_BOLD), vt_off());
    if (bill && bill->dev->listed_bytes > 0) {
        vt_category d = vt_bill_dominant(bill);
        int64_t bytes =
            bill->cat_bytes[d] + (d == VT_CAT_UNATTRIBUTED_PERSISTENT ? bill->cat_bytes[d + 1] : 0);
        fprintf(out, "  (%s hold %s, %.1f%% of the live memory)",
                d == VT_CAT_UNATTRIBUTED_PERSISTENT ? "unattributed allocations"
                                                    : vt_category_label(d),
                vt_fmt_bytes(b, bytes), 100.0 * (double)bytes / (double)bill->dev->listed_bytes);
    }
    fputc('\n', out);
    for (size_t i = 0; i < n; i++)
        vt_print_wrapped(out, fprintf(out, "    %zu. ", i + 1), 7, items[i].text);
    vt_print_lines_missing(out, s);
}
