/* `vramtap report`: the memory bill at the peak of one snapshot, the post-mortem of an
 * out-of-memory snapshot, or one line per process for several. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "copies.h"
#include "grow.h"
#include "offload.h"
#include "record.h"
#include "theory.h"
#include "report.h"
#include "snapshot_keys.h"

#define BAR_WIDTH 20

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vramtap report [OPTIONS] SNAPSHOT...\n"
            "\n"
            "The memory bill at each device's peak: parameters, gradients, optimizer state,\n"
            "activations and temporaries, the gap from tensors to what the allocator reserved\n"
            "to what the device used, and the allocation sites behind each category.\n"
            "On a vramtap.*.oomN.json file: what was asked, what was live, what to try first.\n"
            "A run's snapshot with its post-mortems (vramtap.prog.*.json after an OOM): the\n"
            "bill, then each post-mortem (--json: the bill's document, with \"postmortems\").\n"
            "Several runs' snapshots, or a directory of them: one line per process (rank),\n"
            "the heaviest and the spread.\n"
            "\n"
            "options:\n"
            "  --json       the same facts as JSON (docs/report-json.md)\n"
            "  --folded     bytes live at the peak as folded stacks, for flamegraph.pl and\n"
            "               speedscope: 'cuda:D;category;outermost;...;innermost BYTES'\n"
            "  --record     the run record (GPU, framework, model, optimizer, batch, AMP,\n"
            "               checkpointing, peaks) as a Markdown table\n"
            "  --top N      sites shown per category (default %d)\n"
            "  --ascii      the line of live bytes per phase in plain characters\n"
            "  --modules all  every nn.Module path in the bill by module (default: the\n"
            "               heaviest)\n"
            "  --device N   only device N\n"
            "  --all-frames site labels and a post-mortem's stack keep the frames of the C\n"
            "               library, CUDA, vramtap and the framework's allocator, folded by\n"
            "               default\n"
            "\n"
            "Site labels fit COLUMNS (or the terminal). Exit status: 0, or 2 for bad usage or a "
            "file that is not a readable snapshot.\n",
            VT_DEFAULT_TOP);
}

static int parse_count(const char *s, long max, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 0 || v > max)
        return -1;
    *out = v;
    return 0;
}

int vt_parse_opts(int argc, char **argv, vt_report_opts *o, bool allow_folded,
                  void (*usage_fn)(FILE *out))
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},          {"folded", no_argument, NULL, 'f'},
        {"top", required_argument, NULL, 't'},     {"device", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},          {"all-frames", no_argument, NULL, 'a'},
        {"ascii", no_argument, NULL, 'A'},         {"record", no_argument, NULL, 'r'},
        {"modules", required_argument, NULL, 'm'}, {NULL, 0, NULL, 0}};
    *o = (vt_report_opts){.top_n = VT_DEFAULT_TOP, .device = -1};
    vt_labels_all_frames(false);
    opterr = 0;
    optind = 1;
    int c;
    long v;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'j':
            o->json = true;
            break;
        case 'a':
            vt_labels_all_frames(true);
            break;
        case 'f':
        case 'r':
            if (!allow_folded)
                goto unknown;
            *(c == 'f' ? &o->folded : &o->record) = true;
            break;
        case 't':
        case 'd':
            if (parse_count(optarg, c == 't' ? 1000000 : 1023, &v)) {
                fprintf(stderr, "vramtap %s: --%s needs a number from 0 to %s, not '%s'\n", argv[0],
                        c == 't' ? "top" : "device", c == 't' ? "1000000" : "1023", optarg);
                return -1;
            }
            if (c == 't')
                o->top_n = (size_t)v;
            else
                o->device = (int)v;
            break;
        case 'A':
            o->ascii = true;
            break;
        case 'm':
            if (strcmp(optarg, "all")) {
                fprintf(stderr, "vramtap %s: --modules takes 'all', not '%s'\n", argv[0], optarg);
                return -1;
            }
            o->modules_all = true;
            break;
        case 'h':
            usage_fn(stdout);
            return -2;
        case ':':
            fprintf(stderr, "vramtap %s: '%s' needs a value (try 'vramtap %s --help')\n", argv[0],
                    argv[optind - 1], argv[0]);
            return -1;
        default:
            goto unknown;
        }
    }
    if (o->json + o->folded + o->record > 1) {
        fprintf(stderr, "vramtap %s: --json, --folded and --record exclude each other\n", argv[0]);
        return -1;
    }
    return optind;
unknown:
    /* an unknown short option is known by optopt, a long one only by its argument */
    if (c == '?' && optopt)
        fprintf(stderr, "vramtap %s: unknown option '-%c' (try 'vramtap %s --help')\n", argv[0],
                optopt, argv[0]);
    else
        fprintf(stderr, "vramtap %s: unknown option '%s' (try 'vramtap %s --help')\n", argv[0],
                argv[optind - 1], argv[0]);
    return -1;
}

int vt_loaded_open(const char *path, const vt_report_opts *o, vt_loaded *l, vt_err *err)
{
    memset(l, 0, sizeof *l);
    l->ascii = o->ascii;
    l->modules_all = o->modules_all;
    if (vt_snapshot_load(path, &l->snap, err))
        return -1;
    vt_snapshot *s = &l->snap;
    if (vt_coverage_check(s, err)) {
        vt_snapshot_free(s);
        return -1;
    }
    if (o->device >= 0 && !vt_snapshot_device(s, o->device)) {
        char list[256] = "";
        size_t used = 0;
        for (size_t i = 0; i < s->ndevices && used < sizeof list; i++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%d", i ? ", " : "",
                                     s->devices[i].device);
        vt_err_set(err, "%s: no device %d in this snapshot (devices: %s)", path, o->device,
                   s->ndevices ? list : "none");
        vt_snapshot_free(s);
        return -1;
    }
    l->bills = calloc(s->ndevices ? s->ndevices : 1, sizeof *l->bills);
    l->phase_peaks = calloc(s->ndevices ? s->ndevices : 1, sizeof *l->phase_peaks);
    if (!l->bills || !l->phase_peaks) {
        free(l->bills);
        free(l->phase_peaks);
        vt_err_set(err, "%s: out of memory", path);
        vt_snapshot_free(s);
        return -1;
    }
    for (size_t i = 0; i < s->ndevices; i++) {
        if (o->device >= 0 && s->devices[i].device != o->device)
            continue;
        /* folded stacks keep every site apart: no rows are shown, none merged */
        if (vt_bill_build(s, &s->devices[i], o->folded ? 0 : o->top_n, &l->bills[l->nbills], err)) {
            vt_loaded_close(l);
            return -1;
        }
        l->nbills++;
        if (vt_phase_peaks_load(s, &s->devices[i], &l->phase_peaks[l->nbills - 1], err)) {
            vt_loaded_close(l);
            return -1;
        }
    }
    /* the failed request's stack is printed with the post-mortem */
    if (s->has_oom && s->oom.site >= 0 && vt_site_load(s, (size_t)s->oom.site, err)) {
        vt_loaded_close(l);
        return -1;
    }
    return 0;
}

void vt_loaded_close(vt_loaded *l)
{
    for (size_t i = 0; i < l->nbills; i++)
        vt_bill_free(&l->bills[i]);
    free(l->bills);
    free(l->phase_peaks);
    vt_snapshot_free(&l->snap);
    memset(l, 0, sizeof *l);
}

/* --- checks --------------------------------------------------------------------------- */

double vt_ratio(const vt_bill *bill, vt_category c)
{
    int64_t params = bill->cat_bytes[VT_CAT_PARAMETERS];
    return params > 0 ? (double)bill->cat_bytes[c] / (double)params : NAN;
}

/* What the record and the evidence say about the causes a ratio could have. */
typedef struct {
    bool frozen_ruled_out; /* the record counts every parameter as trainable */
    bool sgd_plain;        /* the optimizer is SGD without momentum */
    const char *optimizer; /* the record's optimizer, or NULL */
    bool by_timing;        /* no byte of the bill was labelled: setup memory is "parameters" */
} ratio_context;

static ratio_context context_of(const vt_snapshot *s, const vt_bill *bill)
{
    ratio_context x = {0};
    json_t *rec = json_object_get(s->root, VT_K_RUN_RECORD);
    json_t *all = json_object_get(rec, "parameters"),
           *tr = json_object_get(rec, "trainable_parameters");
    x.frozen_ruled_out = json_is_integer(all) && json_is_integer(tr) &&
                         json_integer_value(all) == json_integer_value(tr);
    json_t *opt = json_object_get(rec, "optimizer");
    x.optimizer = json_is_string(opt) ? json_string_value(opt) : NULL;
    x.sgd_plain = vt_optimizer_buffers(x.optimizer) == 0;
    x.by_timing = true;
    for (int c = 0; c < VT_NCATS; c++)
        x.by_timing &= bill->evidence[c][VT_EV_IDENTITY] == 0;
    return x;
}

const char *vt_ratio_meaning(const vt_snapshot *s, const vt_bill *bill, vt_category c, double r)
{
    static char text[640];
    ratio_context x = context_of(s, bill);
    const char *frozen =
        x.frozen_ruled_out ? "" : "frozen parameters (LoRA, partial fine-tuning), ";
    const char *setup = x.by_timing ? "; or memory made before training (a flat gradient buffer, "
                                      "state created up front) that the timing rules bill as "
                                      "parameters: the PyTorch hooks or vramtap_label tell them "
                                      "apart"
                                    : "";
    bool none = bill->cat_bytes[c] == 0;
    if (c == VT_CAT_GRADIENTS) {
        if (none)
            snprintf(text, sizeof text,
                     "about 0: no gradients were live at the peak (freed by zero_grad, or the peak "
                     "came before backward)%s%s",
                     x.frozen_ruled_out ? "" : ", or every parameter is frozen", setup);
        else if (r < 0.85)
            snprintf(text, sizeof text, "below 1: %sgradients sharded (FSDP, ZeRO-2)%s", frozen,
                     setup);
        else if (r <= 1.15)
            snprintf(text, sizeof text,
                     "about 1, as usual: one gradient per trainable parameter, same precision");
        else if (r <= 2.2)
            snprintf(text, sizeof text,
                     "above 1: gradients in higher precision than the parameters (fp32 gradients "
                     "for bf16 weights) or a second copy (DDP buckets, accumulation buffers)");
        else
            snprintf(text, sizeof text,
                     "far above 1: several gradient copies are live (DDP buckets, accumulation "
                     "buffers, retained graphs)");
        return text;
    }
    if (none) {
        if (x.sgd_plain)
            snprintf(text, sizeof text, "about 0, as expected: plain SGD keeps no state");
        else if (x.optimizer)
            snprintf(text, sizeof text,
                     "about 0: %s had not made its state by the peak (the peak came before the "
                     "first step)%s",
                     x.optimizer, setup);
        else
            snprintf(text, sizeof text,
                     "about 0: plain SGD keeps no state, or the optimizer had not taken its first "
                     "step by the peak%s",
                     setup);
    } else if (r < 0.85) {
        snprintf(text, sizeof text,
                 "below 1: state for part of the parameters only (%sstate sharded by ZeRO or "
                 "FSDP, or created lazily)%s",
                 frozen, setup);
    } else if (r <= 1.15) {
        snprintf(text, sizeof text,
                 "about 1: one buffer per parameter (SGD with momentum, Adagrad, RMSprop)");
    } else if (r < 1.8) {
        snprintf(text, sizeof text,
                 "between 1 and 2: Adam-style state for part of the parameters, or mixed "
                 "optimizers%s",
                 setup);
    } else if (r <= 2.2) {
        snprintf(text, sizeof text,
                 "about 2, as usual for Adam and AdamW: two moments per parameter in the "
                 "parameters' precision");
    } else if (r < 3.6) {
        snprintf(text, sizeof text,
                 "between 2 and 4: Adam-style state partly in higher precision than the "
                 "parameters");
    } else if (r <= 4.4) {
        snprintf(text, sizeof text,
                 "about 4: Adam-style state in fp32 for bf16 or fp16 parameters");
    } else if (r >= 5.5 && r <= 6.5) {
        snprintf(text, sizeof text,
                 "about 6: fp32 master weights plus fp32 Adam-style state for half-precision "
                 "parameters");
    } else {
        snprintf(text, sizeof text,
                 "unusual: Adam-style optimizers keep 2 buffers per parameter, SGD with momentum "
                 "1, plain SGD 0; see the optimizer-state sites");
    }
    return text;
}

/* --- the human report ------------------------------------------------------------------- */

/* The share of its ceiling (the cgroup's limit, else the machine's RAM) at which host RAM is
 * worth a warning: past the ceiling the kernel's OOM killer ends the job. */
#define HOST_RAM_WARN 0.8

static void print_host_ram_advice(FILE *out, const vt_snapshot *s)
{
    int64_t ceiling = s->ram.cgroup_limit > 0 ? s->ram.cgroup_limit : s->ram.machine;
    int64_t own = s->ram.high_water >= 0 ? s->ram.high_water : s->ram.sampled;
    int64_t workers = s->ram.workers_high > 0 ? s->ram.workers_high : 0;
    if (ceiling <= 0 || own < 0 || (double)(own + workers) < HOST_RAM_WARN * (double)ceiling)
        return;
    char b[32], c[32], w[32];
    fprintf(out,
            "  %swarning%s: host RAM reached %.0f%% of %s (%s of %s, the process's high-water "
            "mark and its workers' together): past it the kernel's OOM killer ends the job with "
            "SIGKILL, and no snapshot is written at exit\n",
            vt_on(VT_STYLE_WARN), vt_off(), 100.0 * (double)(own + workers) / (double)ceiling,
            s->ram.cgroup_limit > 0 ? "its cgroup's limit" : "the machine's RAM",
            vt_fmt_bytes(b, own + workers), vt_fmt_bytes(c, ceiling));
    size_t n = json_array_size(s->ram.workers);
    if (workers)
        fprintf(out,
                "    %zu worker process%s held %s of it: fewer DataLoader workers (num_workers) "
                "or a smaller prefetch_factor lower it\n",
                n, n == 1 ? "" : "es", vt_fmt_bytes(w, workers));
}

/* The process's host RAM, beside the device figures: where it peaked and what limited it. */
static void print_host_ram(FILE *out, const vt_snapshot *s)
{
    if (s->ram.high_water < 0 && s->ram.sampled < 0)
        return;
    char b[32];
    fputs("  host RAM  ", out);
    if (s->ram.high_water >= 0)
        fprintf(out, " high-water %s", vt_fmt_bytes(b, s->ram.high_water));
    if (s->ram.sampled >= 0)
        fprintf(out, "%shighest when sampled %s in %s, step %lld%s",
                s->ram.high_water >= 0 ? " (" : " ", vt_fmt_bytes(b, s->ram.sampled),
                vt_phase_name(s->ram.sampled_phase), (long long)s->ram.sampled_step,
                s->ram.high_water >= 0 ? ")" : "");
    for (size_t i = 0; i < s->ndevices; i++)
        if (s->devices[i].rss_at_peak_bytes >= 0)
            fprintf(out, "; %s at the cuda:%d peak",
                    vt_fmt_bytes(b, s->devices[i].rss_at_peak_bytes), s->devices[i].device);
    if (s->ram.workers) {
        size_t n = json_array_size(s->ram.workers);
        fprintf(out, "; %zu worker process%s, %s together at most", n, n == 1 ? "" : "es",
                vt_fmt_bytes(b, s->ram.workers_high));
    }
    if (s->ram.cgroup_limit > 0)
        fprintf(out, "; cgroup limit %s", vt_fmt_bytes(b, s->ram.cgroup_limit));
    if (s->ram.machine > 0)
        fprintf(out, "; machine %s", vt_fmt_bytes(b, s->ram.machine));
    fputc('\n', out);
    print_host_ram_advice(out, s);
}

static void print_run(FILE *out, const vt_snapshot *s, const vt_gaps *g)
{
    char b[32];
    fprintf(out, "%svramtap report%s  %s%s\n", vt_on(VT_STYLE_BOLD), vt_off(), s->path,
            s->kind == VT_SNAP_IMPORT    ? "  (imported from a PyTorch trace)"
            : s->kind == VT_SNAP_INTERIM ? "  (written during the run: the process never reached "
                                           "exit, e.g. killed; figures up to that moment)"
                                         : "");
    if (s->argc) {
        fputs("  command   ", out);
        vt_print_command(out, s->argv, s->argc);
        fputc('\n', out);
    }
    fputs("  run      ", out);
    if (!isnan(s->end_time_s) && !g->times_invented)
        fprintf(out, " %.2f s,", s->end_time_s);
    fprintf(out, " %lld step%s", (long long)s->steps, s->steps == 1 ? "" : "s");
    if (s->pid >= 0)
        fprintf(out, ", pid %lld", (long long)s->pid);
    if (s->rank >= 0)
        fprintf(out, ", rank %lld", (long long)s->rank);
    if (s->local_rank >= 0)
        fprintf(out, " (local %lld)", (long long)s->local_rank);
    fputc('\n', out);
    print_host_ram(out, s);
    vt_print_copies(out, s);
    vt_print_offloaded(out, s);
    if (s->host_peak_bytes >= 0)
        fprintf(out, "  pinned host memory peaked at %s (host RAM, not part of any device peak)\n",
                vt_fmt_bytes(b, s->host_peak_bytes));
    if (s->dropped > 0)
        fprintf(out,
                "  %swarning%s: vramtap dropped %lld events (it ran out of memory itself): every "
                "figure below is a lower bound\n",
                vt_on(VT_STYLE_WARN), vt_off(), (long long)s->dropped);
    if (s->unknown_frees > 0)
        fprintf(out,
                "  note: %lld frees of memory vramtap never saw allocated (made before it was "
                "loaded, or through an API it does not hook) were ignored\n",
                (long long)s->unknown_frees);
    vt_print_coverage(out, s);
    vt_print_gaps(out, s);
}

static void print_mode_notes(FILE *out, const vt_loaded *l)
{
    const vt_snapshot *s = &l->snap;
    bool native = false;
    for (size_t i = 0; i < l->nbills; i++)
        native |= l->bills[i].native;
    if (native) {
        fprintf(
            out,
            "\n  %snative mode%s: the framework's caching allocator was kept%s%s%s, so vramtap "
            "saw the\n  allocator's segments, not tensors. A segment holds tensors of every "
            "category: the split into\n  parameters, gradients, optimizer state, activations "
            "and temporaries needs tensor mode\n  (the default; run without VRAMTAP_MODE=native "
            "or 'vramtap run --mode native').\n",
            vt_on(VT_STYLE_WARN), vt_off(), s->pytorch_mode_reason ? " (" : "",
            s->pytorch_mode_reason ? s->pytorch_mode_reason : "",
            s->pytorch_mode_reason ? ")" : "");
    } else if (!s->phase_markers) {
        char text[600];
        /* the trace is what it is: markers cannot be added to it, only to the next run */
        bool imported = s->kind == VT_SNAP_IMPORT;
        snprintf(text, sizeof text,
                 "%sno phase markers%s in this %s, so nothing is guessed: memory alive at the end "
                 "is 'unattributed (persistent)', the rest 'unattributed (transient)'. To split it "
                 "into parameters, gradients, optimizer state, activations and temporaries, %s",
                 vt_on(VT_STYLE_WARN), vt_off(), imported ? "imported trace" : "run",
                 imported ? "import a recording that has phases (a Kineto trace with profiler "
                            "steps, a memory snapshot with Python stacks) or run the job under "
                            "'vramtap run'"
                          : "mark the phases with one of:");
        fputc('\n', out);
        vt_print_wrapped(out, fprintf(out, "  "), 2, text);
        if (imported)
            return;
        fputs("    - the C API in include/vramtap.h: vramtap_begin(VRAMTAP_FORWARD) ... "
              "vramtap_end(VRAMTAP_FORWARD),\n      the same for VRAMTAP_BACKWARD and "
              "VRAMTAP_OPTIMIZER\n"
              "    - NVTX ranges named forward, backward and optimizer\n"
              "    - 'vramtap run -- python train.py' for PyTorch: the phases are marked for you\n",
              out);
    }
}

static void print_category_row(FILE *out, const vt_bill *bill, vt_category c, int64_t whole)
{
    char b[32];
    int64_t bytes = bill->cat_bytes[c];
    fprintf(out, "    %s%-26s%s %12s %5.1f%%  %s", vt_cat_on(c), vt_category_label(c), vt_off(),
            vt_fmt_bytes(b, bytes), whole > 0 ? 100.0 * (double)bytes / (double)whole : 0.0,
            vt_cat_on(c));
    vt_print_bar(out, bytes, whole, BAR_WIDTH);
    fprintf(out, "%s\n", vt_off());
    if (c == VT_CAT_TEMPORARY && bill->workspace_bytes > 0)
        fprintf(out, "    %s %11s\n", "of which library workspaces",
                vt_fmt_bytes(b, bill->workspace_bytes));
}

/* Where labels or stacks decided some bytes: which evidence established each category. */
static void print_evidence(FILE *out, const vt_bill *bill)
{
    static const char *const names[VT_NEVIDENCE] = {"by identity", "by stack", "by timing"};
    bool any = false;
    for (int c = 0; c < VT_NCATS; c++)
        any |= bill->evidence[c][VT_EV_IDENTITY] || bill->evidence[c][VT_EV_STACK];
    if (!any)
        return;
    fprintf(out, "\n  %show each category was established%s\n", vt_on(VT_STYLE_BOLD), vt_off());
    for (int e = 0; e < VT_NEVIDENCE; e++) {
        char text[512], b[32];
        size_t o = 0;
        for (int c = 0; c < VT_NCATS && o < sizeof text; c++)
            if (bill->evidence[c][e])
                o += (size_t)snprintf(text + o, sizeof text - o, "%s%s %s", o ? ", " : "",
                                      vt_category_label((vt_category)c),
                                      vt_fmt_bytes(b, bill->evidence[c][e]));
        if (o)
            vt_print_wrapped(out, fprintf(out, "    %-12s ", names[e]), 17, text);
    }
}

/* Labels and workspace stacks give categories even where no phase was marked. */
static bool has_categories(const vt_snapshot *s, const vt_bill *bill)
{
    if (s->phase_markers)
        return true;
    for (int c = 0; c < VT_CAT_UNATTRIBUTED_PERSISTENT; c++)
        if (bill->cat_bytes[c])
            return true;
    return false;
}

void vt_print_categories(FILE *out, const vt_snapshot *s, const vt_bill *bill)
{
    char b[32];
    int64_t whole = bill->dev->listed_bytes;
    bool five = has_categories(s, bill);
    for (int c = 0; c < VT_NCATS; c++) {
        bool unattributed = c >= VT_CAT_UNATTRIBUTED_PERSISTENT;
        /* the five with markers or labels, the unattributed ones when they hold anything */
        if (unattributed ? bill->cat_count[c] == 0 : !five)
            continue;
        print_category_row(out, bill, (vt_category)c, whole);
    }
    fprintf(out, "    %-26s %12s %5.1f%%  in %zu allocation%s\n", "total", vt_fmt_bytes(b, whole),
            whole > 0 ? 100.0 : 0.0, bill->dev->listed_count,
            bill->dev->listed_count == 1 ? "" : "s");
    print_evidence(out, bill);
}

/* One line of the three levels: a label, bytes, and why it differs from the level below. */
static void print_level(FILE *out, const char *label, int64_t bytes, const char *why)
{
    char b[32];
    int col = fprintf(out, "    %-20s %12s ", label, bytes >= 0 ? vt_fmt_bytes(b, bytes) : "-");
    vt_print_wrapped(out, col, col, why);
}

static void print_levels(FILE *out, const vt_bill *bill)
{
    const vt_device *d = bill->dev;
    char g[32], why[320];
    int64_t tensors = d->listed_bytes, below = tensors;
    fprintf(out, "\n  %sthree levels%s\n", vt_on(VT_STYLE_BOLD), vt_off());
    print_level(out, bill->native ? "segments" : "tensors", tensors,
                bill->native ? "the allocator's segments live at the peak"
                             : "live allocations at the peak (the bill above)");
    if (!d->reserved_source) {
        print_level(out, "allocator reserved", -1, "not recorded");
    } else {
        int64_t gap = d->reserved_peak_bytes - tensors;
        if (gap >= 0)
            snprintf(why, sizeof why,
                     "%s held by the allocator beyond the %s: cached blocks, rounding, "
                     "fragmentation (%s high-water mark)",
                     vt_fmt_delta(g, gap), bill->native ? "segments live at the peak" : "tensors",
                     d->reserved_source);
        else
            snprintf(why, sizeof why,
                     "%s less than the tensors: part of them were allocated outside the %s "
                     "(cudaMalloc, cuMemAlloc, VMM) (high-water mark)",
                     vt_fmt_bytes(g, -gap), d->reserved_source);
        print_level(out, "allocator reserved", d->reserved_peak_bytes, why);
        below = gap > 0 ? d->reserved_peak_bytes : tensors;
    }
    if (d->used_at_peak_bytes < 0) {
        print_level(out, "device used", -1, "not sampled");
        return;
    }
    int64_t gap = d->used_at_peak_bytes - below;
    if (gap >= 0)
        snprintf(why, sizeof why,
                 "%s beyond the allocator: the CUDA context and kernels, library workspaces "
                 "(cuBLAS, cuDNN, NCCL) and other processes (cuMemGetInfo at the peak)",
                 vt_fmt_delta(g, gap));
    else
        snprintf(why, sizeof why,
                 "%s below the level above: the allocator's high-water mark came at another "
                 "moment than the peak (cuMemGetInfo at the peak)",
                 vt_fmt_bytes(g, -gap));
    print_level(out, "device used", d->used_at_peak_bytes, why);
}

static void print_checks(FILE *out, const vt_snapshot *s, const vt_bill *bill)
{
    static const vt_category checked[] = {VT_CAT_GRADIENTS, VT_CAT_OPTIMIZER_STATE};
    fprintf(out, "\n  %schecks%s\n", vt_on(VT_STYLE_BOLD), vt_off());
    for (size_t i = 0; i < 2; i++) {
        double r = vt_ratio(bill, checked[i]);
        char label[40];
        snprintf(label, sizeof label, "%s / parameters", vt_category_label(checked[i]));
        int col = fprintf(out, "    %-30s %5.2f ", label, r);
        vt_print_wrapped(out, col, col, vt_ratio_meaning(s, bill, checked[i], r));
    }
}

/* The standard rules' figures beside the measured ones, when the run record allows. */
static void print_theory(FILE *out, const vt_snapshot *s, const vt_bill *bill)
{
    vt_theory t;
    vt_theory_build(s, bill, &t);
    if (!t.any)
        return;
    char m[32], e[32];
    fprintf(out, "\n  %stheory beside measurement%s  %s\n", vt_on(VT_STYLE_BOLD), vt_off(),
            t.optimizer_rule[0] ? t.optimizer_rule : "the standard rules for the run record");
    for (int i = 0; i < VT_THEORY_ROWS; i++) {
        const vt_theory_row *row = &t.rows[i];
        if (!row->known)
            continue;
        int col =
            fprintf(out, "    %-16s %11s measured %11s expected  ", vt_category_label(row->cat),
                    vt_fmt_bytes(m, row->measured), vt_fmt_bytes(e, row->expected));
        vt_print_wrapped(out, col, col, row->why[0] ? row->why : "as expected");
    }
}

void vt_print_site_rows(FILE *out, const vt_snapshot *s, const vt_site_total *t, size_t n)
{
    char b[32], label[VT_LABEL_MAX];
    for (size_t i = 0; i < n; i++) {
        vt_site_label(s, t[i].site, label);
        vt_site_note_shown(s, t[i].site);
        int col = fprintf(out, "      %12s %7lld x  ", vt_fmt_bytes(b, t[i].bytes),
                          (long long)t[i].count);
        vt_label_fit(label, vt_term_width() - col);
        fprintf(out, "%s\n", label);
    }
}

static void print_sites(FILE *out, const vt_snapshot *s, const vt_bill *bill)
{
    if (!bill->ntop_all)
        return;
    fprintf(out,
            "\n  %stop sites%s  (bytes live at the peak, allocations, innermost frame first)\n",
            vt_on(VT_STYLE_BOLD), vt_off());
    for (int c = 0; c < VT_NCATS; c++) {
        if (!bill->ntop[c])
            continue;
        fprintf(out, "    %s%s%s  (%zu site%s)\n", vt_cat_on((vt_category)c),
                bill->native ? "segments" : vt_category_label((vt_category)c), vt_off(),
                bill->nsites_in[c], bill->nsites_in[c] == 1 ? "" : "s");
        vt_print_site_rows(out, s, bill->top[c], bill->ntop[c]);
    }
}

static void print_segments(FILE *out, const vt_bill *bill)
{
    char b[32], when[48];
    fprintf(out, "  %ssegments live at the peak, by when they were created%s\n",
            vt_on(VT_STYLE_BOLD), vt_off());
    for (size_t i = 0; i < bill->ngroups; i++) {
        const vt_birth_group *g = &bill->groups[i];
        if (g->phase == VT_SETUP)
            snprintf(when, sizeof when, "setup");
        else if (g->phase == VT_OTHER)
            snprintf(when, sizeof when, "step %lld, between phases", (long long)g->step);
        else
            vt_fmt_when(when, g->phase, g->step);
        fprintf(out, "    %-26s %12s  %lld segment%s\n", when, vt_fmt_bytes(b, g->bytes),
                (long long)g->count, g->count == 1 ? "" : "s");
    }
    fprintf(out, "    %-26s %12s  in %zu segment%s\n", "total",
            vt_fmt_bytes(b, bill->dev->listed_bytes), bill->dev->listed_count,
            bill->dev->listed_count == 1 ? "" : "s");
}

void vt_print_device_title(FILE *out, const vt_device *d, bool unnamed)
{
    char b[32];
    if (unnamed)
        fprintf(out, "\n%sdevice %d%s  (a GPU or the CPU: the trace does not say)",
                vt_on(VT_STYLE_BOLD), d->device, vt_off());
    else
        fprintf(out, "\n%scuda:%d%s", vt_on(VT_STYLE_BOLD), d->device, vt_off());
    if (d->name)
        fprintf(out, "  %s", d->name);
    if (d->total_bytes >= 0)
        fprintf(out, "%s%s", d->name ? ", " : "  ", vt_fmt_bytes(b, d->total_bytes));
    fputc('\n', out);
}

void vt_print_peak(FILE *out, const char *label, const vt_device *d, bool with_time)
{
    char b[32], when[48];
    fprintf(out, "  %-11s %s%s%s", label, vt_on(VT_STYLE_BOLD), vt_fmt_bytes(b, d->peak_bytes),
            vt_off());
    if (with_time)
        fprintf(out, " at %.2f s", d->peak_time_s);
    fprintf(out, ", %s", vt_fmt_when(when, d->peak_phase, d->peak_step));
    if (d->total_bytes > 0)
        fprintf(out, " (%.1f%% of the device)",
                100.0 * (double)d->peak_bytes / (double)d->total_bytes);
    fputc('\n', out);
}

/* The forward pass, backward and the optimizer step ask different questions: does a forward
 * fit (with autograd's saved activations, so an upper bound for inference), does a training
 * step fit, does the optimizer's extra fit. */
static void print_phase_peaks(FILE *out, const vt_device *d, const vt_phase_peaks *pp)
{
    static const struct {
        vt_phase phase;
        const char *label, *question;
    } rows[] = {{VT_FORWARD, "forward", "the forward pass (inference needs at most this)"},
                {VT_BACKWARD, "backward", "forward and backward: a training step"},
                {VT_OPTIMIZER, "optimizer step", "the optimizer's state and workspace on top"}};
    size_t seen = 0;
    for (size_t i = 0; i < 3; i++)
        seen += pp->bytes[rows[i].phase] >= 0;
    if (seen < 2)
        return;
    char b[32];
    fprintf(out, "  %sby phase%s    the largest live bytes in each phase\n", vt_on(VT_STYLE_BOLD),
            vt_off());
    for (size_t i = 0; i < 3; i++) {
        int64_t v = pp->bytes[rows[i].phase];
        if (v < 0)
            continue;
        fprintf(out, "    %-15s %12s  step %-4lld %s%s\n", rows[i].label, vt_fmt_bytes(b, v),
                (long long)pp->step[rows[i].phase], rows[i].question,
                rows[i].phase == d->peak_phase ? "  <- the peak" : "");
    }
}

static void print_device(FILE *out, vt_loaded *l, const vt_bill *bill, const vt_gaps *g)
{
    vt_snapshot *s = &l->snap;
    const vt_device *d = bill->dev;
    char b[32], p[32];
    vt_print_device_title(out, d, g->device_unnamed);
    vt_print_peak(out, "peak", d, !g->times_invented);
    print_phase_peaks(out, d, &l->phase_peaks[bill - l->bills]);
    vt_print_sparkline(out, s, d, l->ascii);
    if (d->listed_bytes != d->peak_bytes)
        fprintf(out,
                "  %snote%s: the allocations listed add up to %s, not the peak %s (an imported "
                "trace, or events were dropped)\n",
                vt_on(VT_STYLE_WARN), vt_off(), vt_fmt_bytes(b, d->listed_bytes),
                vt_fmt_bytes(p, d->peak_bytes));
    fputc('\n', out);
    if (bill->native) {
        print_segments(out, bill);
        if (has_categories(s, bill)) {
            fprintf(out, "\n  %sat the peak, by labels%s\n", vt_on(VT_STYLE_BOLD), vt_off());
            vt_print_categories(out, s, bill);
        }
    } else {
        fprintf(out, "  %sat the peak%s\n", vt_on(VT_STYLE_BOLD), vt_off());
        vt_print_categories(out, s, bill);
    }
    vt_print_pytorch_categories(out, s, d->device);
    print_levels(out, bill);
    if (!bill->native && s->phase_markers && bill->cat_bytes[VT_CAT_PARAMETERS] > 0) {
        /* ratios of zero say nothing about an inference run: say what they would mean */
        if (bill->cat_bytes[VT_CAT_GRADIENTS] || bill->cat_bytes[VT_CAT_OPTIMIZER_STATE])
            print_checks(out, s, bill);
        else {
            /* a peak in or after a backward did not come before it */
            bool after = bill->dev->peak_phase == VT_BACKWARD ||
                         bill->dev->peak_phase == VT_OPTIMIZER || bill->dev->peak_step > 0;
            fputc('\n', out);
            vt_print_wrapped(out, fprintf(out, "  "), 2,
                             after ? "no gradients and no optimizer state were live at the peak: "
                                     "an inference run"
                                   : "no gradients and no optimizer state were live at the peak: "
                                     "an inference run, or the peak came before the first "
                                     "backward");
        }
        print_theory(out, s, bill);
    }
    vt_print_modules(out, s, bill, l->modules_all);
    print_sites(out, s, bill);
}

static void print_oom_events(FILE *out, const vt_snapshot *s, const vt_gaps *g)
{
    char b[32], when[48], line[512];
    if (!s->noom_events)
        return;
    fprintf(out, "\n%sout-of-memory events%s\n", vt_on(VT_STYLE_BAD), vt_off());
    for (size_t i = 0; i < s->noom_events; i++) {
        const vt_oom *e = &s->oom_events[i];
        int n = snprintf(line, sizeof line, "%s asked on cuda:%d via %s, %s: %s",
                         vt_fmt_bytes(b, e->size), e->device, e->api,
                         vt_fmt_when(when, e->phase, e->step),
                         e->retry_succeeded ? "a retry succeeded (the caching allocator freed "
                                              "its cache and tried again)"
                                            : "no retry succeeded");
        /* the file is named relative to the snapshot's folder: a path to paste is relative to
         * where the command runs */
        const char *slash = strrchr(s->path, '/');
        if (e->file && n > 0 && (size_t)n < sizeof line)
            snprintf(line + n, sizeof line - (size_t)n, "; post-mortem: vramtap report %.*s%s",
                     slash && e->file[0] != '/' ? (int)(slash - s->path + 1) : 0, s->path, e->file);
        int col = g->times_invented
                      ? fprintf(out, "  #%lld: ", (long long)e->n)
                      : fprintf(out, "  #%lld at %.2f s: ", (long long)e->n, e->time_s);
        vt_print_wrapped(out, col, 4, line);
    }
}

void vt_print_report(FILE *out, vt_loaded *l)
{
    const vt_snapshot *s = &l->snap;
    vt_gaps g;
    vt_gaps_of(s, &g);
    print_run(out, s, &g);
    vt_print_record(out, s);
    print_mode_notes(out, l);
    if (!s->ndevices)
        fputs("\n  no device memory was allocated\n", out);
    for (size_t i = 0; i < l->nbills; i++)
        print_device(out, l, &l->bills[i], &g);
    print_oom_events(out, s, &g);
    vt_print_lines_missing(out, s);
}

void vt_print_lines_missing(FILE *out, const vt_snapshot *s)
{
    char list[1024];
    if (!*vt_lines_missing(s, list, sizeof list))
        return;
    vt_print_wrapped(out, fprintf(out, "\nsites without file and line: "), 2, list);
}

/* --- the command ------------------------------------------------------------------------ */

static int report_one(const char *path, const vt_report_opts *o)
{
    vt_loaded l;
    vt_err err;
    if (vt_loaded_open(path, o, &l, &err)) {
        fprintf(stderr, "vramtap report: %s\n", err.msg);
        return 2;
    }
    int rc = 0;
    if (o->record) {
        vt_print_record_markdown(stdout, &l.snap);
    } else if (o->folded) {
        if (vt_print_folded(stdout, &l, &err)) {
            fprintf(stderr, "vramtap report: %s\n", err.msg);
            rc = 2;
        }
    } else if (o->json) {
        json_t *doc = vt_report_json(&l);
        vt_print_json(stdout, doc);
        json_decref(doc);
    } else if (l.snap.kind == VT_SNAP_OOM) {
        vt_print_postmortem(stdout, &l);
    } else {
        vt_print_report(stdout, &l);
    }
    vt_loaded_close(&l);
    return rc;
}

/* vramtap.<...>.oom<N>.json: what the library names a post-mortem. */
static bool postmortem_name(const char *path)
{
    const char *base = strrchr(path, '/'), *p;
    base = base ? base + 1 : path;
    size_t len = strlen(base);
    if (len < 10 || strcmp(base + len - 5, ".json"))
        return false;
    for (p = base + len - 5; p > base && isdigit((unsigned char)p[-1]); p--)
        ;
    return p < base + len - 5 && p - base >= 4 && !strncmp(p - 4, ".oom", 4);
}

static int json_of(const char *path, const vt_report_opts *o, json_t **doc)
{
    vt_loaded l;
    vt_err err;
    if (vt_loaded_open(path, o, &l, &err)) {
        fprintf(stderr, "vramtap report: %s\n", err.msg);
        return 2;
    }
    *doc = vt_report_json(&l);
    vt_loaded_close(&l);
    return 0;
}

/* --json of one run's bill and its post-mortems: the bill's document, as for the bill alone,
 * with each post-mortem's in "postmortems" */
static int run_json(char **paths, size_t n, const vt_report_opts *o)
{
    json_t *doc = NULL, *pms = json_array();
    int rc = pms ? 0 : 2;
    for (size_t i = 0; i < n && rc == 0; i++) {
        json_t *one = NULL;
        rc = json_of(paths[i], o, &one);
        if (rc == 0 && postmortem_name(paths[i]))
            json_array_append_new(pms, one);
        else if (rc == 0)
            doc = one;
    }
    if (rc == 0 && doc) {
        json_object_set_new(doc, "postmortems", pms);
        vt_print_json(stdout, doc);
    } else {
        json_decref(pms);
    }
    json_decref(doc);
    return rc;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int push_path(char ***paths, size_t *n, size_t *cap, char *path)
{
    if (vt_grow(paths, cap, *n + 1, sizeof **paths, 16))
        return -1;
    (*paths)[(*n)++] = path;
    return 0;
}

/* Snapshot files in a directory: vramtap.*.json, in name order. */
static int list_dir(const char *dir, char ***paths, size_t *n, size_t *cap)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "vramtap report: %s: cannot open: %s\n", dir, strerror(errno));
        return -1;
    }
    size_t before = *n;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "vramtap.", 8) || len < 13 || strcmp(e->d_name + len - 5, ".json"))
            continue;
        size_t plen = strlen(dir) + len + 2;
        char *path = malloc(plen);
        if (!path || push_path(paths, n, cap, path)) {
            free(path);
            closedir(d);
            fprintf(stderr, "vramtap report: out of memory\n");
            return -1;
        }
        snprintf(path, plen, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (*n == before) {
        fprintf(stderr, "vramtap report: %s: no vramtap.*.json snapshots in this directory\n", dir);
        return -1;
    }
    qsort(*paths + before, *n - before, sizeof **paths, by_name);
    return 0;
}

int vt_cmd_report(int argc, char **argv)
{
    vt_report_opts o;
    int first = vt_parse_opts(argc, argv, &o, true, usage);
    if (first < 0)
        return first == -2 ? 0 : 2;
    if (first == argc) {
        fprintf(stderr, "vramtap report: no snapshot given (try 'vramtap report --help')\n");
        return 2;
    }
    vt_term_init();
    char **paths = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (int i = first; i < argc && rc == 0; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            rc = list_dir(argv[i], &paths, &n, &cap) ? 2 : 0;
            continue;
        }
        char *path = strdup(argv[i]);
        if (!path || push_path(&paths, &n, &cap, path)) {
            free(path);
            fprintf(stderr, "vramtap report: out of memory\n");
            rc = 2;
        }
    }
    size_t bills = 0;
    for (size_t i = 0; i < n; i++)
        bills += !postmortem_name(paths[i]);
    if (rc == 0) {
        if (n > 1 && bills == 1 && o.json) {
            rc = run_json(paths, n, &o);
        } else if (n > 1 && bills <= 1 && !o.folded && !o.json) {
            /* one run's bill and its post-mortems (vramtap.python.*.json after an OOM): each
             * read as what it is, the bill first */
            bool printed = false;
            for (int pm = 0; pm < 2 && rc == 0; pm++)
                for (size_t i = 0; i < n && rc == 0; i++)
                    if (postmortem_name(paths[i]) == pm) {
                        if (printed)
                            fputc('\n', stdout);
                        rc = report_one(paths[i], &o);
                        printed = true;
                    }
        } else if (n == 1) {
            rc = report_one(paths[0], &o);
        } else if (o.folded || o.record) {
            fprintf(stderr, "vramtap report: --%s reads one snapshot, not %zu\n",
                    o.folded ? "folded" : "record", n);
            rc = 2;
        } else {
            rc = vt_report_ranks(paths, n, &o);
        }
    }
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
    return rc;
}
