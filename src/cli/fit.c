/* `vramtap fit`: several runs of one job that differ in one dimension X (batch size, sequence
 * length, resolution) turned into a memory budget: how each category and each phase's peak
 * grows with X, the largest X that fits a capacity, the bill at a given X, and what that
 * assumes. The arithmetic is in model/fit.c; docs/fit.md explains it to users. */
#include <errno.h>
#include <stdarg.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "model/fit.h"
#include "grow.h"
#include "report.h"
#include "snapshot_keys.h"

#define DEFAULT_HEADROOM_PCT 5.0
#define MAX_X_ARG INT64_C(1000000000000)

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vramtap fit [OPTIONS] SNAPSHOT[=X] SNAPSHOT[=X] ...\n"
            "\n"
            "Two or more snapshots of the same job that differ in one dimension X (batch size,\n"
            "sequence length, resolution): for each device, how each category and each phase's\n"
            "peak grows with X (a fixed part and a part per unit of X), the largest X that fits\n"
            "the device, the bill at a given X, and what the prediction assumes. X is a whole\n"
            "number; without '=X' it is the batch size the PyTorch hooks recorded.\n"
            "\n"
            "options:\n"
            "  --capacity SIZE  memory to fit in (default: the device's total memory); bytes, or\n"
            "                   with a unit: 80GiB, 81920MiB, 80G (binary), 80GB (decimal)\n"
            "  --headroom PCT   share of the capacity kept free (default %g%%)\n"
            "  --predict X      the predicted peak and bill at X\n"
            "  --device N       only device N\n"
            "  --json           the same facts as JSON (docs/fit.md)\n"
            "\n"
            "Exit status: 0, or 2 for bad usage or a file that is not a readable snapshot.\n",
            DEFAULT_HEADROOM_PCT);
}

typedef struct {
    int64_t capacity; /* -1: the device's */
    double headroom_pct;
    int64_t predict; /* -1: none */
    int device;      /* -1: every device */
    bool json;
} fit_opts;

typedef struct {
    const char *path;
    int64_t x;
    bool x_from_record;
    const char *kind_note; /* why this run's peak may not be the run's, or NULL */
} fit_run;

/* One device over the runs. */
typedef struct {
    int device;
    char name[128];
    int64_t total_bytes; /* the first run's; -1 unknown */
    bool total_differs;
    vt_fit_point *pts; /* one per run */
    vt_fit fit;
} fit_device;

/* --- options and operands ------------------------------------------------------------------ */

static int parse_whole(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_headroom(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end != s && *end == '%')
        end++;
    if (end == s || *end || !(v >= 0 && v < 100))
        return -1;
    *out = v;
    return 0;
}

static int parse_opts(int argc, char **argv, fit_opts *o)
{
    static const struct option longopts[] = {{"capacity", required_argument, NULL, 'c'},
                                             {"headroom", required_argument, NULL, 'r'},
                                             {"predict", required_argument, NULL, 'p'},
                                             {"device", required_argument, NULL, 'd'},
                                             {"json", no_argument, NULL, 'j'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    *o = (fit_opts){-1, DEFAULT_HEADROOM_PCT, -1, -1, false};
    opterr = 0;
    optind = 1;
    int c;
    int64_t v;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'c':
            if (vt_parse_bytes(optarg, &o->capacity) || o->capacity == 0) {
                fprintf(stderr,
                        "vramtap fit: --capacity needs a size such as 80GiB or 85899345920, not "
                        "'%s'\n",
                        optarg);
                return -1;
            }
            break;
        case 'r':
            if (parse_headroom(optarg, &o->headroom_pct)) {
                fprintf(stderr,
                        "vramtap fit: --headroom needs a percentage from 0 to 99.9, not '%s'\n",
                        optarg);
                return -1;
            }
            break;
        case 'p':
        case 'd':
            if (parse_whole(optarg, c == 'p' ? 1 : 0, c == 'p' ? MAX_X_ARG : 1023, &v)) {
                fprintf(stderr, "vramtap fit: --%s needs a whole number from %d to %s, not '%s'\n",
                        c == 'p' ? "predict" : "device", c == 'p' ? 1 : 0,
                        c == 'p' ? "10^12" : "1023", optarg);
                return -1;
            }
            if (c == 'p')
                o->predict = v;
            else
                o->device = (int)v;
            break;
        case 'j':
            o->json = true;
            break;
        case 'h':
            usage(stdout);
            return -2;
        case ':':
            fprintf(stderr, "vramtap fit: '%s' needs a value (try 'vramtap fit --help')\n",
                    argv[optind - 1]);
            return -1;
        default:
            if (optopt)
                fprintf(stderr, "vramtap fit: unknown option '-%c' (try 'vramtap fit --help')\n",
                        optopt);
            else
                fprintf(stderr, "vramtap fit: unknown option '%s' (try 'vramtap fit --help')\n",
                        argv[optind - 1]);
            return -1;
        }
    }
    return optind;
}

/* SNAPSHOT=X, or SNAPSHOT alone (X from its run record). A path that exists is a path even
 * when it holds '='. The argument's text is split in place. */
static int parse_operand(char *arg, fit_run *run)
{
    struct stat st;
    char *eq = strrchr(arg, '=');
    *run = (fit_run){arg, -1, false, NULL};
    if (!eq || !stat(arg, &st))
        return 0;
    if (parse_whole(eq + 1, 1, MAX_X_ARG, &run->x)) {
        fprintf(stderr, "vramtap fit: '%s': X after '=' must be a whole number from 1 to 10^12\n",
                arg);
        return -1;
    }
    *eq = '\0';
    return 0;
}

/* --- the runs ----------------------------------------------------------------------------- */

static int x_from_record(const vt_snapshot *s, fit_run *run, vt_err *err)
{
    json_t *record = json_object_get(s->root, VT_K_RUN_RECORD);
    json_t *bs = json_object_get(record, "batch_size");
    if (!json_is_integer(bs) || json_integer_value(bs) < 1 || json_integer_value(bs) > MAX_X_ARG) {
        vt_err_set(err,
                   "%s: no X given and the run record has no batch size: write %s=X, X being "
                   "the value of the dimension that differs between the runs",
                   run->path, run->path);
        return -1;
    }
    run->x = json_integer_value(bs);
    run->x_from_record = true;
    return 0;
}

/* The categories at each phase's largest live bytes that the allocation history shows: the
 * first moment of an exact window, inside one of the phase's instances, where the live bytes
 * equal that phase's peak. */
static int history_cats(vt_snapshot *s, const vt_bill *bill, vt_fit_point *p, vt_err *err)
{
    vt_tl_span *spans;
    size_t nspans;
    if (vt_timeline_load(s, bill->dev->device, &spans, &nspans, err))
        return -1;
    int r = 0;
    for (size_t w = 0; w < s->nwindows && !r; w++) {
        vt_series sr;
        if ((r = vt_series_build(s, &s->windows[w], bill->dev->device, false, SIZE_MAX / 2, &sr,
                                 err)))
            break;
        /* points and phase instances both in time order */
        for (size_t k = 0, j = 0; sr.exact && k < sr.npts; k++) {
            const vt_point *pt = &sr.pts[k];
            while (j < nspans && spans[j].end_s < pt->t)
                j++;
            for (size_t i = j; i < nspans && spans[i].start_s <= pt->t; i++) {
                vt_phase ph = spans[i].phase;
                if (pt->t > spans[i].end_s || p->phase_cats[ph][0] >= 0 ||
                    vt_point_total(pt) != p->phase_bytes[ph])
                    continue;
                for (int c = 0; c < VT_FIT_NCATS; c++)
                    p->phase_cats[ph][c] = pt->cat[c];
                p->phase_cats[ph][VT_FIT_UNATTRIBUTED] += pt->cat[VT_CAT_UNATTRIBUTED_TRANSIENT];
            }
        }
        vt_series_free(&sr);
    }
    free(spans);
    return r;
}

static int take_point(vt_snapshot *s, const vt_bill *bill, int64_t x, vt_fit_point *p, vt_err *err)
{
    vt_phase_peaks peaks;
    if (vt_phase_peaks_load(s, bill->dev, &peaks, err))
        return -1;
    const vt_device *d = bill->dev;
    *p = (vt_fit_point){.x = x,
                        .peak_phase = d->peak_phase,
                        .peak_bytes = d->peak_bytes,
                        .reserved_bytes = d->reserved_source ? d->reserved_peak_bytes : -1,
                        .used_bytes = d->used_at_peak_bytes};
    for (int c = 0; c < VT_FIT_NCATS; c++)
        p->cat_bytes[c] = bill->native ? -1 : bill->cat_bytes[c];
    if (!bill->native)
        p->cat_bytes[VT_FIT_UNATTRIBUTED] += bill->cat_bytes[VT_CAT_UNATTRIBUTED_TRANSIENT];
    memcpy(p->phase_bytes, peaks.bytes, sizeof p->phase_bytes);
    for (int ph = 0; ph < VT_FIT_NPHASES; ph++)
        p->phase_cats[ph][0] = -1;
    memcpy(p->phase_cats[d->peak_phase], p->cat_bytes, sizeof p->cat_bytes);
    return bill->native || !s->phase_markers ? 0 : history_cats(s, bill, p, err);
}

/* The first run decides which devices are fitted; every other run must have them. */
static int add_run(vt_loaded *l, size_t run, size_t nruns, int64_t x, fit_device **devs,
                   size_t *ndevs, vt_err *err)
{
    if (run == 0) {
        *devs = calloc(l->nbills ? l->nbills : 1, sizeof **devs);
        if (!*devs)
            goto nomem;
        for (size_t i = 0; i < l->nbills; i++) {
            const vt_device *d = l->bills[i].dev;
            fit_device *fd = &(*devs)[(*ndevs)++];
            fd->device = d->device;
            snprintf(fd->name, sizeof fd->name, "%s", d->name ? d->name : "");
            fd->total_bytes = d->total_bytes;
            fd->pts = calloc(nruns, sizeof *fd->pts);
            if (!fd->pts)
                goto nomem;
        }
    }
    for (size_t i = 0; i < *ndevs; i++) {
        fit_device *fd = &(*devs)[i];
        const vt_bill *bill = NULL;
        for (size_t j = 0; j < l->nbills; j++)
            if (l->bills[j].dev->device == fd->device)
                bill = &l->bills[j];
        if (!bill) {
            vt_err_set(err,
                       "%s: no device %d, which the first snapshot has: fit runs of the same "
                       "job (or choose one device with --device)",
                       l->snap.path, fd->device);
            return -1;
        }
        fd->total_differs |= bill->dev->total_bytes != fd->total_bytes;
        if (take_point(&l->snap, bill, x, &fd->pts[run], err))
            return -1;
    }
    return 0;
nomem:
    vt_err_set(err, "out of memory");
    return -1;
}

static int load_runs(fit_run *runs, size_t n, const fit_opts *o, fit_device **devs, size_t *ndevs,
                     vt_err *err)
{
    vt_report_opts load = {.top_n = 0, .device = o->device};
    for (size_t i = 0; i < n; i++) {
        vt_loaded l;
        if (vt_loaded_open(runs[i].path, &load, &l, err))
            return -1;
        int r = runs[i].x < 0 ? x_from_record(&l.snap, &runs[i], err) : 0;
        if (!r && l.snap.kind == VT_SNAP_OOM)
            runs[i].kind_note = "an out-of-memory post-mortem: its peak is the peak before the "
                                "failure, not the run's";
        else if (!r && l.snap.kind == VT_SNAP_INTERIM)
            runs[i].kind_note = "an interim snapshot of a job that did not finish: its peak is "
                                "the peak so far";
        else if (!r && l.snap.dropped > 0)
            runs[i].kind_note = "events were dropped: its figures are a lower bound";
        if (!r)
            r = add_run(&l, i, n, runs[i].x, devs, ndevs, err);
        vt_loaded_close(&l);
        if (r)
            return -1;
    }
    for (size_t i = 1; i < n; i++)
        if (runs[i].x != runs[0].x)
            return 0;
    vt_err_set(err, "every run has X = %lld: the runs must differ in X (write SNAPSHOT=X)",
               (long long)runs[0].x);
    return -1;
}

/* --- sentences shared by the text and the JSON --------------------------------------------- */

typedef struct {
    char text[512];
} line;

typedef struct {
    line *v;
    size_t n, cap;
} lines;

__attribute__((format(printf, 2, 3))) static void say(lines *ls, const char *fmt, ...)
{
    if (vt_grow(&ls->v, &ls->cap, ls->n + 1, sizeof *ls->v, 16))
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ls->v[ls->n++].text, sizeof ls->v[0].text, fmt, ap);
    va_end(ap);
}

static const char *phase_label(int p)
{
    return p == VT_NOPHASE ? "whole run" : vt_phase_name((vt_phase)p);
}

/* "X=4, X=8" for the runs whose peak fell in phase p (any phase: p < 0). */
static void runs_in(const vt_fit *f, int p, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < f->n && used < len; i++)
        if (p < 0 || (int)f->pts[i].peak_phase == p)
            used += (size_t)snprintf(buf + used, len - used, "%sX=%lld", used ? ", " : "",
                                     (long long)f->pts[i].x);
}

static void assumptions(const fit_device *fd, const vt_fit_prediction *const *preds, size_t npred,
                        lines *ls)
{
    const vt_fit *f = &fd->fit;
    char buf[256], b[32];
    if (f->n == 2)
        say(ls, "two runs: every figure is taken to grow linearly with X (the straight line "
                "through both runs); growth faster than linear, as attention's over a sequence "
                "length, shows only with three runs or more");
    else
        say(ls,
            "%zu runs: every figure follows the least-squares line through them, or a parabola "
            "(growth faster than linear, as attention's X^2 is) where the line misses a run by "
            "more than %.0f%% and an upward parabola misses none",
            f->n, 100 * VT_FIT_TOLERANCE);
    char modelled[128] = "";
    size_t used = 0;
    for (int ph = 0; ph < VT_FIT_NPHASES; ph++)
        if (f->phase_modelled[ph])
            used += (size_t)snprintf(modelled + used, sizeof modelled - used, "%s%s",
                                     used ? ", " : "", phase_label(ph));
    say(ls, "the peak is modelled per phase (%s) and the predicted peak is the largest of them",
        modelled);
    if (!f->peak_moved) {
        say(ls, "in every run the peak fell in %s", phase_label(f->pts[0].peak_phase));
    } else {
        char list[256];
        used = 0;
        for (int ph = 0; ph < VT_FIT_NPHASES; ph++) {
            runs_in(f, ph, buf, sizeof buf);
            if (buf[0])
                used += (size_t)snprintf(list + used, sizeof list - used, "%s%s at %s",
                                         used ? "; " : "", phase_label(ph), buf);
        }
        say(ls, "the peak moved between phases: %s", list);
    }
    if (f->have_cats) {
        size_t used_runs = 0;
        buf[0] = '\0';
        for (size_t i = 0; i < f->n && used_runs < sizeof buf; i++)
            if (vt_fit_run_has_cats(f, i))
                used_runs += (size_t)snprintf(
                    buf + used_runs, sizeof buf - used_runs, "%sX=%lld%s", used_runs ? ", " : "",
                    (long long)f->pts[i].x,
                    f->pts[i].peak_phase == f->cat_phase ? "" : " from its allocation history");
        say(ls, "categories are fitted at the %s peak (%s)", phase_label(f->cat_phase), buf);
        char fixed[256] = "";
        used = 0;
        for (int c = 0; c < VT_FIT_NCATS; c++)
            if (f->cat[c].kind == VT_GROW_FIXED && f->cat[c].a > 0)
                used += (size_t)snprintf(fixed + used, sizeof fixed - used, "%s%s",
                                         used ? ", " : "", vt_fit_cat_label(c));
        if (used)
            say(ls, "treated as fixed, because they were the same in every run: %s", fixed);
        for (int c = 0; c < VT_FIT_NCATS; c++)
            if (f->cat[c].kind == VT_GROW_QUADRATIC)
                say(ls,
                    "%s: superlinear, growing faster than linearly with X (quadratic), as "
                    "attention scores over a sequence do",
                    vt_fit_cat_label(c));
    } else {
        say(ls, "categories are not fitted: %s",
            f->pts[0].cat_bytes[0] < 0
                ? "the runs recorded allocator segments (native mode), not tensors"
                : "fewer than two runs know them at the peak of the phase that dominates at "
                  "the largest X (at their own peak, or from their allocation history)");
    }
    for (int ph = 0; ph < VT_FIT_NPHASES; ph++)
        if (f->phase_modelled[ph] && f->phase[ph].kind == VT_GROW_QUADRATIC)
            say(ls, "the %s peak: superlinear, growing faster than linearly with X (quadratic)",
                phase_label(ph));
    for (size_t i = 0; i < npred; i++)
        if (preds[i] && f->have_cats && !preds[i]->have_cats)
            say(ls,
                "at X=%lld the peak is predicted in %s, where no run measured categories: only "
                "its total is predicted",
                (long long)preds[i]->x, phase_label(preds[i]->phase));
    if (!isnan(f->reserved_ratio) && f->used_extra >= 0)
        say(ls,
            "allocator reserved = tensors + %.1f%% and device used = reserved + %s (the CUDA "
            "context, other processes), the largest of the runs",
            100 * f->reserved_ratio, vt_fmt_bytes(b, f->used_extra));
    else if (f->used_extra >= 0)
        say(ls,
            "device used = tensors + %s (the CUDA context, other processes), the largest of the "
            "runs; what fits is judged on device used",
            vt_fmt_bytes(b, f->used_extra));
    else if (!isnan(f->reserved_ratio))
        say(ls,
            "allocator reserved = tensors + %.1f%%, the largest of the runs; device used was not "
            "recorded, so what fits is judged on reserved memory: leave room for the CUDA context",
            100 * f->reserved_ratio);
    else
        say(ls, "neither allocator reserved nor device used was recorded: what fits is judged "
                "on the tensors' peak, so leave room for the CUDA context and the allocator's "
                "cache");
}

static void warnings(const fit_device *fd, const fit_run *runs, lines *ls)
{
    const vt_fit *f = &fd->fit;
    char a[32], b[32];
    for (size_t i = 0; i < f->n; i++) {
        if (runs[i].kind_note)
            say(ls, "%s (X=%lld) is %s", runs[i].path, (long long)runs[i].x, runs[i].kind_note);
        if (!f->phase_modelled[f->pts[i].peak_phase])
            say(ls,
                "at X=%lld the peak fell in %s, which not every run measured: it is left out of "
                "the model",
                (long long)f->pts[i].x, phase_label(f->pts[i].peak_phase));
    }
    for (int c = 0; c < VT_FIT_NCATS && f->have_cats; c++) {
        if (!f->fixed_changed[c])
            continue;
        size_t lo = 0, hi = 0;
        const int ph = f->cat_phase;
        while (lo < f->n && !vt_fit_run_has_cats(f, lo))
            lo++;
        hi = lo;
        for (size_t i = lo; i < f->n; i++) {
            if (!vt_fit_run_has_cats(f, i))
                continue;
            if (f->pts[i].phase_cats[ph][c] < f->pts[lo].phase_cats[ph][c])
                lo = i;
            if (f->pts[i].phase_cats[ph][c] > f->pts[hi].phase_cats[ph][c])
                hi = i;
        }
        say(ls,
            "%s changed between the runs (%s at X=%lld, %s at X=%lld): they depend on the model "
            "and the optimizer, not on X; are these runs of the same job?",
            vt_fit_cat_label(c), vt_fmt_bytes(a, f->pts[lo].phase_cats[ph][c]),
            (long long)f->pts[lo].x, vt_fmt_bytes(b, f->pts[hi].phase_cats[ph][c]),
            (long long)f->pts[hi].x);
    }
    for (int c = 0; c < VT_FIT_NCATS && f->have_cats; c++)
        if (f->cat[c].off && !f->fixed_changed[c])
            say(ls, "%s: the run at X=%lld is %.1f%% off the fitted line", vt_fit_cat_label(c),
                (long long)f->pts[f->cat[c].worst_run].x, 100 * f->cat[c].worst_off);
    for (int ph = 0; ph < VT_FIT_NPHASES; ph++)
        if (f->phase_modelled[ph] && f->phase[ph].off)
            say(ls, "the %s peak: the run at X=%lld is %.1f%% off the fitted line", phase_label(ph),
                (long long)f->pts[f->phase[ph].worst_run].x, 100 * f->phase[ph].worst_off);
    if (fd->total_differs)
        say(ls, "the runs ran on devices of different sizes: the capacity is the first run's");
}

/* A category's worst run was counted among the runs it was fitted over: make it an index into
 * all the runs. */
static void fix_worst_runs(vt_fit *f)
{
    for (int c = 0; c < VT_FIT_NCATS && f->have_cats; c++) {
        size_t k = 0;
        for (size_t i = 0; i < f->n; i++)
            if (vt_fit_run_has_cats(f, i) && k++ == f->cat[c].worst_run) {
                f->cat[c].worst_run = i;
                break;
            }
    }
}

/* --- text ------------------------------------------------------------------------------------ */

static void print_growth(FILE *out, const char *label, const vt_growth *g)
{
    char a[32], b[32], c[32];
    fprintf(out, "    %-26s %12s %14s   %s", label, vt_fmt_bytes(a, llround(g->a)),
            vt_fmt_bytes(b, llround(g->b)), vt_grow_name(g->kind));
    if (g->kind == VT_GROW_QUADRATIC)
        fprintf(out, ", %s per X^2", vt_fmt_delta(c, llround(g->c)));
    fputc('\n', out);
}

static void print_prediction(FILE *out, const char *what, const vt_fit_prediction *p,
                             int64_t budget)
{
    char b[32], r[32], u[32];
    fprintf(out, "  %s%s%s: peak %s%s%s in %s", vt_on(VT_STYLE_BOLD), what, vt_off(),
            vt_on(VT_STYLE_BOLD), vt_fmt_bytes(b, p->peak_bytes), vt_off(), phase_label(p->phase));
    if (p->reserved_bytes >= 0)
        fprintf(out, ", reserved %s", vt_fmt_bytes(r, p->reserved_bytes));
    if (p->used_bytes >= 0)
        fprintf(out, ", device used %s", vt_fmt_bytes(u, p->used_bytes));
    if (budget > 0)
        fprintf(out, " (%s)", p->compared_bytes <= budget ? "fits" : "does not fit");
    fputc('\n', out);
    if (!p->have_cats)
        return;
    for (int c = 0; c < VT_FIT_NCATS; c++)
        if (p->cat_bytes[c] > 0)
            fprintf(out, "    %s%-26s%s %12s\n", vt_cat_on((vt_category)c), vt_fit_cat_label(c),
                    vt_off(), vt_fmt_bytes(b, p->cat_bytes[c]));
}

static void print_lines(FILE *out, const char *title, vt_style style, const lines *ls)
{
    if (!ls->n)
        return;
    fprintf(out, "\n  %s%s%s\n", vt_on(style), title, vt_off());
    for (size_t i = 0; i < ls->n; i++) {
        fputs("    - ", out);
        vt_print_wrapped(out, 6, 6, ls->v[i].text);
    }
}

typedef struct {
    int64_t capacity, budget, largest;
    vt_fit_prediction at_largest, at_predict;
    bool have_largest, have_predict;
} fit_answer;

static void print_device(FILE *out, const fit_device *fd, const fit_run *runs, const fit_opts *o,
                         const fit_answer *ans)
{
    const vt_fit *f = &fd->fit;
    char b[32], c[32], head[64];
    fprintf(out, "\n%scuda:%d%s", vt_on(VT_STYLE_BOLD), fd->device, vt_off());
    if (fd->name[0])
        fprintf(out, "  %s", fd->name);
    if (fd->total_bytes >= 0)
        fprintf(out, "%s%s", fd->name[0] ? ", " : "  ", vt_fmt_bytes(b, fd->total_bytes));
    fputs("\n  measured peaks: ", out);
    for (size_t i = 0; i < f->n; i++)
        fprintf(out, "%sX=%lld %s (%s)", i ? ", " : "", (long long)f->pts[i].x,
                vt_fmt_bytes(b, f->pts[i].peak_bytes), phase_label(f->pts[i].peak_phase));
    fprintf(out, "\n\n    %-26s %12s %14s   %s\n", "", "fixed", "per unit of X", "growth");
    if (f->have_cats) {
        snprintf(head, sizeof head, "at the %s peak", phase_label(f->cat_phase));
        fprintf(out, "  %s%s%s\n", vt_on(VT_STYLE_BOLD), head, vt_off());
        for (int k = 0; k < VT_FIT_NCATS; k++)
            if (f->cat[k].kind != VT_GROW_FIXED || f->cat[k].a > 0)
                print_growth(out, vt_fit_cat_label(k), &f->cat[k]);
    }
    fprintf(out, "  %speak of each phase%s\n", vt_on(VT_STYLE_BOLD), vt_off());
    for (int ph = 0; ph < VT_FIT_NPHASES; ph++)
        if (f->phase_modelled[ph])
            print_growth(out, phase_label(ph), &f->phase[ph]);
    fputc('\n', out);
    if (ans->capacity > 0) {
        fprintf(out, "  capacity %s (%s), headroom %g%%: budget %s\n",
                vt_fmt_bytes(b, ans->capacity), o->capacity > 0 ? "--capacity" : "the device",
                o->headroom_pct, vt_fmt_bytes(c, ans->budget));
        if (ans->have_largest) {
            snprintf(head, sizeof head, "largest X that fits: %lld", (long long)ans->largest);
            print_prediction(out, head, &ans->at_largest, ans->budget);
        } else if (ans->largest == 0) {
            fprintf(out, "  %slargest X that fits: none%s: not even X=1 fits\n",
                    vt_on(VT_STYLE_BAD), vt_off());
        } else {
            fprintf(out, "  largest X that fits: no limit: no peak grows with X\n");
        }
    } else {
        fprintf(out, "  the device's capacity is not recorded: pass --capacity SIZE for the "
                     "largest X that fits\n");
    }
    if (ans->have_predict) {
        snprintf(head, sizeof head, "at X=%lld", (long long)o->predict);
        print_prediction(out, head, &ans->at_predict, ans->budget);
    }
    const vt_fit_prediction *preds[2] = {ans->have_largest ? &ans->at_largest : NULL,
                                         ans->have_predict ? &ans->at_predict : NULL};
    lines as = {0}, ws = {0};
    assumptions(fd, preds, 2, &as);
    warnings(fd, runs, &ws);
    print_lines(out, "assumptions", VT_STYLE_BOLD, &as);
    print_lines(out, "warnings", VT_STYLE_WARN, &ws);
    free(as.v);
    free(ws.v);
}

/* --- JSON ----------------------------------------------------------------------------------- */

/* Bytes as an integer when whole, else a real: a slope need not be a whole number of bytes. */
static json_t *bytes_json(double v)
{
    return v == floor(v) && fabs(v) < 9e15 ? json_integer((json_int_t)v) : json_real(v);
}

static json_t *int_or_null(int64_t v)
{
    return v < 0 ? json_null() : json_integer(v);
}

static json_t *growth_json(const vt_growth *g)
{
    return json_pack("{s:o, s:o, s:o, s:s}", "fixed_bytes", bytes_json(g->a), "per_unit_bytes",
                     bytes_json(g->b), "per_unit2_bytes", bytes_json(g->c), "growth",
                     vt_grow_name(g->kind));
}

static json_t *prediction_json(const vt_fit_prediction *p)
{
    json_t *cats = json_null(), *phases = json_object();
    if (p->have_cats) {
        cats = json_object();
        for (int c = 0; c < VT_FIT_NCATS; c++)
            json_object_set_new(cats, vt_fit_cat_key(c), json_integer(p->cat_bytes[c]));
    }
    for (int ph = 0; ph < VT_FIT_NPHASES; ph++)
        if (p->phase_bytes[ph] >= 0)
            json_object_set_new(phases, phase_label(ph), json_integer(p->phase_bytes[ph]));
    return json_pack("{s:I, s:I, s:s, s:o, s:o, s:o, s:o}", "x", (json_int_t)p->x, "peak_bytes",
                     (json_int_t)p->peak_bytes, "phase", phase_label(p->phase), "phases", phases,
                     "categories", cats, "reserved_bytes", int_or_null(p->reserved_bytes),
                     "used_bytes", int_or_null(p->used_bytes));
}

static json_t *lines_json(const lines *ls)
{
    json_t *a = json_array();
    for (size_t i = 0; i < ls->n; i++)
        json_array_append_new(a, json_string(ls->v[i].text));
    return a;
}

static json_t *device_json(const fit_device *fd, const fit_run *runs, const fit_opts *o,
                           const fit_answer *ans)
{
    const vt_fit *f = &fd->fit;
    json_t *cats = json_object(), *phases = json_object(), *measured = json_array();
    for (int c = 0; c < VT_FIT_NCATS && f->have_cats; c++)
        json_object_set_new(cats, vt_fit_cat_key(c), growth_json(&f->cat[c]));
    for (int ph = 0; ph < VT_FIT_NPHASES; ph++)
        if (f->phase_modelled[ph])
            json_object_set_new(phases, phase_label(ph), growth_json(&f->phase[ph]));
    for (size_t i = 0; i < f->n; i++)
        json_array_append_new(measured, json_pack("{s:s, s:I, s:I, s:s}", "file", runs[i].path, "x",
                                                  (json_int_t)f->pts[i].x, "peak_bytes",
                                                  (json_int_t)f->pts[i].peak_bytes, "phase",
                                                  phase_label(f->pts[i].peak_phase)));
    const vt_fit_prediction *preds[2] = {ans->have_largest ? &ans->at_largest : NULL,
                                         ans->have_predict ? &ans->at_predict : NULL};
    lines as = {0}, ws = {0};
    assumptions(fd, preds, 2, &as);
    warnings(fd, runs, &ws);
    json_t *predicted = ans->have_predict   ? prediction_json(&ans->at_predict)
                        : ans->have_largest ? prediction_json(&ans->at_largest)
                                            : json_null();
    json_t *j = json_pack(
        "{s:i, s:o, s:o, s:o, s:o, s:o, s:o, s:{s:o, s:o}, s:o, s:f, s:o, s:o, s:o, s:o, s:o, "
        "s:o}",
        "device", fd->device, "name", fd->name[0] ? json_string(fd->name) : json_null(), "runs",
        measured, "fit", cats, "fit_phase",
        f->have_cats ? json_string(phase_label(f->cat_phase)) : json_null(), "phases", phases,
        "peak_moved", json_boolean(f->peak_moved), "gaps", "reserved_ratio",
        isnan(f->reserved_ratio) ? json_null() : json_real(f->reserved_ratio), "used_extra_bytes",
        int_or_null(f->used_extra), "capacity_bytes", int_or_null(ans->capacity), "headroom_pct",
        o->headroom_pct, "budget_bytes", int_or_null(ans->budget), "largest_fitting",
        ans->have_largest ? json_integer(ans->largest) : json_null(), "at_largest_fitting",
        ans->have_largest ? prediction_json(&ans->at_largest) : json_null(), "predicted", predicted,
        "assumptions", lines_json(&as), "warnings", lines_json(&ws));
    free(as.v);
    free(ws.v);
    return j;
}

/* --- the command ---------------------------------------------------------------------------- */

static void answer(const fit_device *fd, const fit_opts *o, fit_answer *ans)
{
    memset(ans, 0, sizeof *ans);
    ans->capacity = o->capacity > 0 ? o->capacity : fd->total_bytes;
    ans->budget = -1;
    ans->largest = -1;
    if (ans->capacity > 0) {
        ans->budget = ans->capacity - (int64_t)ceil((double)ans->capacity * o->headroom_pct / 100);
        ans->largest = vt_fit_largest(&fd->fit, ans->budget);
        ans->have_largest = ans->largest > 0;
        if (ans->have_largest)
            vt_fit_predict(&fd->fit, ans->largest, &ans->at_largest);
    }
    ans->have_predict = o->predict > 0;
    if (ans->have_predict)
        vt_fit_predict(&fd->fit, o->predict, &ans->at_predict);
}

int vt_cmd_fit(int argc, char **argv)
{
    fit_opts o;
    int first = parse_opts(argc, argv, &o);
    if (first < 0)
        return first == -2 ? 0 : 2;
    size_t n = (size_t)(argc - first);
    if (n < 2) {
        fprintf(stderr, "vramtap fit: needs two or more snapshots of the same job that differ in "
                        "one dimension X (try 'vramtap fit --help')\n");
        return 2;
    }
    vt_term_init();
    fit_run *runs = calloc(n, sizeof *runs);
    fit_device *devs = NULL;
    size_t ndevs = 0;
    vt_err err;
    int rc = 2;
    if (!runs) {
        fprintf(stderr, "vramtap fit: out of memory\n");
        return 2;
    }
    for (size_t i = 0; i < n; i++)
        if (parse_operand(argv[first + (int)i], &runs[i]))
            goto done;
    if (load_runs(runs, n, &o, &devs, &ndevs, &err)) {
        fprintf(stderr, "vramtap fit: %s\n", err.msg);
        goto done;
    }
    for (size_t i = 0; i < ndevs; i++) {
        vt_fit_build(devs[i].pts, n, &devs[i].fit);
        fix_worst_runs(&devs[i].fit);
        bool any = false;
        for (int ph = 0; ph < VT_FIT_NPHASES; ph++)
            any |= devs[i].fit.phase_modelled[ph];
        if (!any) {
            fprintf(stderr,
                    "vramtap fit: cuda:%d: no phase was measured in every run (some runs have "
                    "phase markers, others not): fit runs of the same job\n",
                    devs[i].device);
            goto done;
        }
    }
    rc = 0;
    json_t *doc = o.json ? json_array() : NULL;
    if (!o.json) {
        fputs("vramtap fit: ", stdout);
        for (size_t i = 0; i < n; i++)
            printf("%sX=%lld %s%s", i ? ", " : "", (long long)runs[i].x, runs[i].path,
                   runs[i].x_from_record ? " (batch size from the run record)" : "");
        fputc('\n', stdout);
    }
    for (size_t i = 0; i < ndevs; i++) {
        fit_answer ans;
        answer(&devs[i], &o, &ans);
        if (o.json)
            json_array_append_new(doc, device_json(&devs[i], runs, &o, &ans));
        else
            print_device(stdout, &devs[i], runs, &o, &ans);
    }
    if (o.json) {
        json_t *top =
            json_pack("{s:s, s:i, s:o}", "format", "vramtap-fit", "version", 1, "devices", doc);
        vt_print_json(stdout, top);
        json_decref(top);
    }
done:
    for (size_t i = 0; i < ndevs; i++)
        free(devs[i].pts);
    free(devs);
    free(runs);
    return rc;
}
