/* The pieces of `vramtap report` and `vramtap diff`: options, the per-device bills of one
 * snapshot, and the outputs built from them. */
#ifndef VT_REPORT_H
#define VT_REPORT_H

#include "snapshot.h"

#define VT_DEFAULT_TOP 5

typedef struct {
    size_t top_n;
    int device;                /* -1: every device */
    bool json, folded, record; /* folded and record: report only */
    bool ascii;                /* the sparkline in plain characters */
    bool modules_all;          /* --modules all: every path of the bill by module */
} vt_report_opts;

/* A snapshot with the bills of the devices the options select, and each one's phase peaks. */
typedef struct {
    vt_snapshot snap;
    vt_bill *bills;
    vt_phase_peaks *phase_peaks;
    size_t nbills;
    bool ascii, modules_all;
} vt_loaded;

/* Loads path and builds its bills; -1 with err when the file or --device is bad. */
int vt_loaded_open(const char *path, const vt_report_opts *o, vt_loaded *l, vt_err *err);
void vt_loaded_close(vt_loaded *l);
/* Parses the options shared by report and diff; returns the index of the first operand, or -1
 * after printing the problem (with `usage` on --help, returning -2). */
int vt_parse_opts(int argc, char **argv, vt_report_opts *o, bool allow_folded,
                  void (*usage)(FILE *out));

/* the human report of one snapshot, and its parts that other outputs share (report.c) */
void vt_print_report(FILE *out, vt_loaded *l);
/* unnamed: the snapshot does not say which device (an imported timeline: a GPU or the CPU) */
void vt_print_device_title(FILE *out, const vt_device *d, bool unnamed);
/* with_time: the snapshot's times are real (not an import's invented order) */
void vt_print_peak(FILE *out, const char *label, const vt_device *d, bool with_time);
void vt_print_categories(FILE *out, const vt_snapshot *s, const vt_bill *bill);
void vt_print_site_rows(FILE *out, const vt_snapshot *s, const vt_site_total *t, size_t n);
/* Names the modules of shown frames that have no file and line, and why. */
void vt_print_lines_missing(FILE *out, const vt_snapshot *s);
/* live bytes per phase instance as one line of blocks, the peak marked (sparkline.c) */
void vt_print_sparkline(FILE *out, const vt_snapshot *s, const vt_device *d, bool ascii);
/* How the snapshot was recorded and the coverage check (coverage.c): vt_coverage_check fails
 * (err set) on a malformed member; the line of the report; the report JSON's "attach" and
 * "coverage". */
int vt_coverage_check(const vt_snapshot *s, vt_err *err);
void vt_print_coverage(FILE *out, const vt_snapshot *s);
void vt_coverage_add_json(json_t *doc, const vt_snapshot *s);
/* the bill by nn.Module path (modules_out.c): the heaviest paths, or all; nothing when the
 * snapshot names none. JSON: every path, an empty array when none. */
void vt_print_modules(FILE *out, vt_snapshot *s, const vt_bill *bill, bool all);
json_t *vt_modules_json(vt_snapshot *s, const vt_bill *bill);
/* diff: by module path, A against B (a NULL bill: the device is on one side only) */
void vt_print_modules_diff(FILE *out, vt_snapshot *sa, const vt_bill *ba, vt_snapshot *sb,
                           const vt_bill *bb, bool all);
json_t *vt_modules_diff_json(vt_snapshot *sa, const vt_bill *ba, vt_snapshot *sb,
                             const vt_bill *bb);
/* the post-mortem of a kind "oom" snapshot (postmortem.c) */
void vt_print_postmortem(FILE *out, vt_loaded *l);
/* What to try first after an out-of-memory failure, given the category that dominates the
 * live memory: the remedies that act on it, in the order the seeds give (postmortem.c). */
typedef struct {
    char text[384];
} vt_advice;
size_t vt_advise(const vt_snapshot *snap, const vt_bill *bill, vt_advice *items, size_t max);
/* Device memory in use at the failure beyond the allocations listed; -1 when unknown. */
int64_t vt_oom_outside(const vt_snapshot *snap, const vt_bill *bill);
/* What an imported recording could not tell (gaps.c); all false for a run's own snapshot. */
typedef struct {
    bool import;
    bool times_invented;         /* no timestamps: times are the events' order, not shown */
    bool device_unnamed;         /* a GPU or the CPU: the source does not say */
    bool misses_memory;          /* memory live in the recording may be missing from it */
    int64_t before_window_bytes; /* live when the recording began, all devices */
} vt_gaps;
void vt_gaps_of(const vt_snapshot *s, vt_gaps *g);
/* What a device is called, before its number: "cuda:", or "device " in an import that does not
 * say whether it was a GPU or the CPU. */
const char *vt_device_word(const vt_snapshot *s);
/* Every figure is a lower bound: events were dropped, or an import began after the program
 * had allocated (its peak may have come earlier) or may miss memory. */
bool vt_lower_bound(const vt_snapshot *s);
/* What the trace lacks and why the figures are a lower bound, under the report's run line. */
void vt_print_gaps(FILE *out, const vt_snapshot *s);
/* --json's "import": null for a run's own snapshot */
json_t *vt_gaps_json(const vt_snapshot *s);
/* --json (report_json.c, docs/report-json.md) */
json_t *vt_report_json(vt_loaded *l);
json_t *vt_categories_json(const vt_bill *bill);
json_t *vt_site_json(const vt_snapshot *snap, const vt_site_total *t);
json_t *vt_peak_json(const vt_device *dev);
/* The process's host RAM as the report gives it; null for a file without those figures. */
json_t *vt_host_ram_json(const vt_snapshot *s);
void vt_print_json(FILE *out, json_t *doc);
/* --folded (folded.c): -1 with err when a stack cannot be read */
int vt_print_folded(FILE *out, vt_loaded *l, vt_err *err);
/* several processes (ranks.c) */
int vt_report_ranks(char **paths, size_t n, const vt_report_opts *o);

/* the gradients / parameters and optimizer state / parameters checks; NAN without parameters */
double vt_ratio(const vt_bill *bill, vt_category c);
/* What a ratio means, given what the run record says (the optimizer, frozen parameters) and
 * whether timing alone decided the categories compared: causes the record rules out are not
 * offered. */
const char *vt_ratio_meaning(const vt_snapshot *s, const vt_bill *bill, vt_category c, double r);

#endif
