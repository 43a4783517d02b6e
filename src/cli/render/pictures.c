/* What the pictures draw, shared by the HTML view and the Perfetto export: per device, the
 * history's series by category, the per-phase timeline, and the bytes live at the peak by
 * stack. Built once from a loaded snapshot and its bills. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pictures.h"

const char *vt_category_color(vt_category c)
{
    static const char *const colors[VT_NCATS] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1",
                                                 "#e15759", "#76b7b2", "#bab0ac"};
    return colors[c];
}

double vt_picture_end(const vt_snapshot *s)
{
    double end = isnan(s->end_time_s) ? 0 : s->end_time_s;
    for (size_t i = 0; i < s->ndevices; i++)
        end = fmax(end, s->devices[i].peak_time_s);
    for (size_t i = 0; i < s->nwindows; i++)
        end = fmax(end, s->windows[i].end_s);
    for (size_t i = 0; i < s->noom_events; i++)
        end = fmax(end, s->oom_events[i].time_s);
    if (s->has_oom)
        end = fmax(end, s->oom.time_s);
    return end;
}

int vt_picture_build(vt_loaded *l, const vt_bill *bill, size_t max_points, bool by_module,
                     vt_picture *p, vt_err *err)
{
    vt_snapshot *s = &l->snap;
    memset(p, 0, sizeof *p);
    p->bill = bill;
    p->series = calloc(s->nwindows + 1, sizeof *p->series);
    p->mseries = calloc(s->nwindows + 1, sizeof *p->mseries);
    if (!p->series || !p->mseries) {
        vt_err_set(err, "%s: out of memory", s->path);
        vt_picture_free(p);
        return -1;
    }
    if (by_module && vt_module_groups_build(s, bill, &p->groups, err)) {
        vt_picture_free(p);
        return -1;
    }
    int device = bill->dev->device;
    for (size_t w = 0; w < s->nwindows; w++) {
        if (vt_series_build(s, &s->windows[w], device, bill->native, max_points,
                            &p->series[p->nseries], err) ||
            (p->groups.any &&
             vt_series_build_by(s, &s->windows[w], device, bill->native, p->groups.slot, &p->groups,
                                max_points, &p->mseries[p->nseries], err))) {
            vt_picture_free(p);
            return -1;
        }
        p->nseries++;
    }
    if (vt_timeline_load(s, device, &p->timeline, &p->ntimeline, err)) {
        vt_picture_free(p);
        return -1;
    }
    return 0;
}

void vt_picture_free(vt_picture *p)
{
    /* the window being built when something failed counts too */
    for (size_t i = 0; i <= p->nseries && p->series && p->mseries; i++) {
        vt_series_free(&p->series[i]);
        vt_series_free(&p->mseries[i]);
    }
    free(p->series);
    free(p->mseries);
    vt_module_groups_free(&p->groups);
    free(p->timeline);
    memset(p, 0, sizeof *p);
}

const char *vt_window_label(const vt_window *w)
{
    static const char *const labels[] = {"first steps", "peak step", "recorded trace"};
    return labels[w->reason];
}

/* "dir/vramtap.x.42.json" -> "vramtap.x.42" + ext */
static char *default_output(const char *snapshot, const char *ext)
{
    const char *base = strrchr(snapshot, '/');
    base = base ? base + 1 : snapshot;
    size_t n = strlen(base);
    if (n > 5 && !strcmp(base + n - 5, ".json"))
        n -= 5;
    size_t len = n + strlen(ext) + 1;
    char *out = malloc(len);
    if (out)
        snprintf(out, len, "%.*s%s", (int)n, base, ext);
    return out;
}

static int write_picture(const vt_picture_verb *verb, const char *snapshot, const char *output,
                         bool by_module)
{
    vt_report_opts o = {.top_n = VT_DEFAULT_TOP * 2, .device = -1};
    vt_loaded l;
    vt_err err;
    if (vt_loaded_open(snapshot, &o, &l, &err)) {
        fprintf(stderr, "vramtap %s: %s\n", verb->name, err.msg);
        return 2;
    }
    if (by_module && !l.snap.nmpaths) {
        fprintf(stderr,
                "vramtap %s: %s names no nn.Module paths (recorded without the PyTorch hooks, or "
                "with VRAMTAP_MODULES=0): --by module has nothing to group\n",
                verb->name, snapshot);
        vt_loaded_close(&l);
        return 2;
    }
    char *path = output ? strdup(output) : default_output(snapshot, verb->ext);
    bool to_stdout = path && !strcmp(path, "-");
    FILE *f = !path ? NULL : to_stdout ? stdout : fopen(path, "w");
    int rc = 0;
    if (!f) {
        fprintf(stderr, "vramtap %s: %s: cannot create: %s\n", verb->name, path ? path : "?",
                strerror(path ? errno : ENOMEM));
        rc = 2;
    } else if (verb->render(f, &l, by_module, &err)) {
        fprintf(stderr, "vramtap %s: %s\n", verb->name, err.msg);
        rc = 2;
    }
    if (f && !to_stdout && fclose(f) && !rc) {
        fprintf(stderr, "vramtap %s: %s: cannot write: %s\n", verb->name, path, strerror(errno));
        rc = 2;
    }
    if (f && !to_stdout && rc)
        remove(path);
    else if (!rc && !to_stdout)
        printf("vramtap %s: wrote %s\n", verb->name, path);
    free(path);
    vt_loaded_close(&l);
    return rc;
}

int vt_picture_command(int argc, char **argv, const vt_picture_verb *verb)
{
    /* without a format, its entry's NULL name ends the list */
    const struct option longopts[] = {{"output", required_argument, NULL, 'o'},
                                      {"help", no_argument, NULL, 'h'},
                                      {"by", required_argument, NULL, 'b'},
                                      {verb->format, no_argument, NULL, 'f'},
                                      {NULL, 0, NULL, 0}};
    const char *output = NULL;
    bool format = false, by_module = false;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":ho:", longopts, NULL)) != -1) {
        switch (c) {
        case 'f':
            format = true;
            break;
        case 'o':
            output = optarg;
            break;
        case 'b':
            if (strcmp(optarg, "module") && strcmp(optarg, "category")) {
                fprintf(stderr, "vramtap %s: --by %s: expected category or module\n", verb->name,
                        optarg);
                return 2;
            }
            by_module = !strcmp(optarg, "module");
            break;
        case 'h':
            verb->usage(stdout);
            return 0;
        default:
            fprintf(stderr, "vramtap %s: bad option '%s' (try 'vramtap %s --help')\n", verb->name,
                    argv[optind - 1], verb->name);
            return 2;
        }
    }
    if (verb->format && !format) {
        fprintf(stderr, "vramtap %s: say which format: --%s\n", verb->name, verb->format);
        return 2;
    }
    if (argc - optind != 1) {
        verb->usage(stderr);
        return 2;
    }
    return write_picture(verb, argv[optind], output, by_module);
}
