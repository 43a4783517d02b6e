/* A loaded vramtap snapshot (docs/snapshot-format.md) and the analysis the reporter builds on
 * it. The loader validates everything it reads, so the rest of the command can trust these
 * structures: bytes are 0..VT_MAX_BYTES, steps and instances are ordered, site indexes are in
 * range. Unknown values are -1 (integers) or NAN (times), never zero. */
#ifndef VT_SNAPSHOT_H
#define VT_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

/* No device holds a petabyte; a larger figure means a corrupt or hostile file. The other bounds
 * a snapshot's figures keep, checked by the loader and by the importer before it writes one. */
#define VT_MAX_BYTES (INT64_C(1) << 50)
#define VT_MAX_COUNT (INT64_C(1) << 40) /* steps, instances, event numbers */
#define VT_MAX_DEVICE 1023
#define VT_MAX_TIME_S 1e9 /* thirty years of run time */

/* An error as a value: the one line the command prints on stderr. */
typedef struct {
    char msg[768];
} vt_err;

void vt_err_set(vt_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

typedef enum { VT_SETUP, VT_FORWARD, VT_BACKWARD, VT_OPTIMIZER, VT_OTHER, VT_NPHASES } vt_phase;

const char *vt_phase_name(vt_phase p);
/* Every phase of a run without phase markers: "setup" would claim a moment nobody marked. */
#define VT_NOPHASE VT_NPHASES
/* "backward of step 3", or "step 3" without a phase. */
const char *vt_fmt_when(char buf[48], vt_phase p, int64_t step);

/* Copies between host and device (the snapshot's "copies"): bytes and calls by kind, and the
 * downloads the calling thread waited for. */
typedef enum {
    VT_CP_H2D_PAGEABLE,
    VT_CP_H2D_PINNED,
    VT_CP_D2H_PAGEABLE,
    VT_CP_D2H_PINNED,
    VT_CP_D2D,
    VT_CP_H2H,
    VT_CP_KINDS
} vt_copy_kind;
typedef struct {
    int64_t bytes[VT_CP_KINDS], calls[VT_CP_KINDS], sync_d2h;
} vt_copy_counts;
typedef struct {
    int64_t step;
    vt_copy_counts c;
} vt_copy_step;

typedef struct {
    vt_phase phase;
    int64_t step, instance;
} vt_moment;

typedef enum {
    VT_KIND_DEVICE,
    VT_KIND_MANAGED,
    VT_KIND_POOL,
    VT_KIND_VMM,
    VT_KIND_SEGMENT,
    VT_KIND_OTHER /* a kind a newer library writes */
} vt_alloc_kind;

/* The categories a label can give: the first five of vt_category, in the same order. */
#define VT_NLABELLED 5

typedef struct {
    int64_t id;
    int64_t size;
    int64_t birth_seq, death_seq; /* event numbers; death_seq -1 when alive at the end */
    vt_moment birth, death;       /* death is meaningful only when !alive_at_end */
    int32_t site;                 /* index into sites, -1 when stacks were off */
    int32_t mpath;                /* index into mpaths, -1 when made under no nn.Module */
    int32_t device;
    uint8_t kind; /* vt_alloc_kind */
    bool alive_at_end;
    bool birth_from_stack; /* import: birth phase inferred from the allocation's own stack */
    bool before_window;    /* import: made before the recording began */
    bool recomputed;       /* made by a forward run again inside backward (checkpointing) */
    /* Identity evidence: bytes of this allocation labelled with each category (overlapping
     * labels counted once), or NULL when it has no label. */
    int64_t *labelled;
} vt_alloc;

typedef struct {
    int device;
    const char *name, *uuid, *pci_bus_id; /* NULL when unknown */
    int64_t total_bytes;                  /* -1 when unknown */
    int64_t peak_bytes;
    double peak_time_s;
    vt_phase peak_phase;
    int64_t peak_step;
    const char *reserved_source; /* NULL: no reserved figure */
    int64_t reserved_peak_bytes;
    int64_t used_at_peak_bytes;
    int64_t rss_at_peak_bytes; /* the process's resident host memory then, -1 unknown */
    /* filled by the loader from allocations[] */
    int64_t listed_bytes;
    size_t listed_count;
} vt_device;

/* One stack frame, innermost first as in the file. Strings point into the snapshot. A native
 * frame whose module has debug information also gets file, function and line (lines.c), and a
 * call inlined into it becomes a frame of its own before it, marked inlined. */
typedef struct {
    bool python;
    bool inlined;                         /* native: a call the compiler inlined here */
    const char *module, *symbol, *offset; /* native */
    int32_t module_id;                    /* native: index into modules, -1 when unknown */
    const char *file, *function;          /* python, and native with debug information */
    int64_t line;
} vt_frame;

/* A shared object or program as mapped in the profiled process: where the command finds its
 * debug information. */
typedef struct {
    int64_t id;
    const char *path, *build_id; /* build_id: lowercase hex, NULL when unknown */
} vt_module;

/* The resolver of native frames to file and line (lines.c), owned by the snapshot. */
typedef struct vt_lines vt_lines;

/* Sites are parsed on first use: a report prints a handful of them, and parsing all stacks of
 * a large snapshot would cost more than everything else together. */
typedef struct {
    const char *text; /* the element's JSON text in the file buffer */
    size_t len;
    json_t *json; /* NULL until parsed */
    const char *signature;
    vt_frame *frames;
    size_t nframes;
} vt_site;

typedef struct {
    int64_t n;
    double time_s;
    int device;
    int64_t size;
    const char *api;
    vt_phase phase;
    int64_t step;
    int32_t site;
    bool retry_succeeded;
    const char *file;
    /* only in the `oom` object of an oom file */
    int64_t error, free_bytes, total_bytes;
} vt_oom;

typedef enum { VT_SNAP_EXIT, VT_SNAP_OOM, VT_SNAP_IMPORT, VT_SNAP_INTERIM } vt_snap_kind;

/* The allocation history (docs/snapshot-format.md, `history`): every allocation and free in a
 * few windows of the run. */
typedef enum { VT_WIN_FIRST_STEPS, VT_WIN_PEAK_STEP, VT_WIN_TRACE } vt_window_reason;

typedef struct {
    vt_window_reason reason;
    double start_s, end_s;
    int64_t start_seq; /* allocations born before it and not dead were live at its start */
    size_t first, n;   /* its events: history.events[first .. first + n) */
    bool truncated;    /* the event cap cut it short: end_s is the last event kept */
    int devices[8];    /* the devices whose whole live set it knows: -1 ends the list */
} vt_window;

typedef struct {
    double t;
    int64_t bytes;  /* > 0 allocation, < 0 free */
    uint32_t alloc; /* index into vt_snapshot.hallocs: the allocation it allocates or frees */
} vt_hevent;

typedef struct {
    char *path;
    char *buf; /* the file's JSON text; sites point into it */
    size_t buflen;
    char *file; /* a compact file as read (buf is then its head), NULL for a JSON file */
    size_t filelen;
    json_t *root; /* every top-level member but allocations and sites */
    vt_snap_kind kind;
    const char *prog;
    int64_t pid;
    const char **argv;
    size_t argc;
    double end_time_s;
    int64_t rank, local_rank;
    const char *host;     /* host name, NULL when unknown */
    const char *launcher; /* "torchrun", "slurm", "mpi", "env", NULL when none */
    const char *job_id;   /* the launcher's job id, else Slurm's; NULL when none */
    int64_t world_size;   /* -1 when unknown */
    json_t *env;          /* object of strings, or NULL: not recorded (imports) */
    const char *pytorch_mode, *pytorch_mode_reason;
    bool phase_markers;
    int64_t steps;
    int64_t dropped, unknown_frees;
    int64_t host_peak_bytes; /* -1 when no pinned memory was seen */
    /* The process's resident host memory (all -1 when unknown; files from before it was
     * recorded have none): the kernel's high-water mark, the highest sample and its phase and
     * step, and the ceilings that applied. */
    struct {
        int64_t high_water, sampled, machine, cgroup_limit;
        vt_phase sampled_phase;
        int64_t sampled_step;
        /* child processes: an array of {"pid", "pss_high_bytes", "pss_last_bytes"} checked
         * by the loader (owned by root), NULL when none; their highest PSS summed, -1 */
        json_t *workers;
        int64_t workers_high;
    } ram;
    /* copies between host and device; `present` false in files without them */
    struct {
        bool present;
        vt_copy_counts total, phase[VT_NPHASES];
        vt_copy_step *steps; /* the first steps that had copies, in order */
        size_t nsteps;
        bool has_later; /* later steps, folded */
        int64_t later_first, later_last;
        vt_copy_counts later;
    } copies;
    /* labelled bytes in pinned host memory by category (parameters, gradients, optimizer state,
     * activations, temporary: the snapshot's order); `present` false in files without them */
    struct {
        bool present;
        int64_t pinned_bytes[5], ranges;
    } offloaded;
    vt_device *devices;
    size_t ndevices;
    vt_alloc *allocs;
    size_t nallocs;
    vt_site *sites;
    size_t nsites;
    vt_module *modules;
    size_t nmodules;
    const char **mpaths; /* nn.Module paths (`module_paths`), pointing into root */
    size_t nmpaths;
    vt_lines *lines;        /* NULL until a site with module ids is loaded */
    uint8_t *site_evidence; /* evidence.c's cache, per site */
    vt_oom *oom_events;
    size_t noom_events;
    bool has_oom;
    vt_oom oom;
    /* history: absent when the file has none (nwindows 0) */
    int64_t history_steps, history_max_events, history_dropped;
    bool history_module_paths; /* its allocations carry their module paths (older files: not) */
    vt_window *windows;
    size_t nwindows;
    vt_hevent *hevents;
    size_t nhevents;
    /* every allocation a history event names: those of allocations[] and of
     * history_allocations[] (pointers into allocs and hextra) */
    const vt_alloc **hallocs;
    size_t nhallocs;
    vt_alloc *hextra;
    size_t nhextra;
    char history_unused[192]; /* why a history in the file was set aside; "" when it was not */
} vt_snapshot;

/* Reads and validates PATH. On failure returns -1 with the reason in err (naming the file),
 * and leaves nothing to free. */
int vt_snapshot_load(const char *path, vt_snapshot *snap, vt_err *err);
void vt_snapshot_free(vt_snapshot *snap);
const vt_device *vt_snapshot_device(const vt_snapshot *snap, int device);
/* Parses site i on first use; -1 with err when its text is not a valid site. */
int vt_site_load(vt_snapshot *snap, size_t i, vt_err *err);
/* Parses every site, on every CPU (folded stacks and diffs need them all). */
int vt_sites_load_all(vt_snapshot *snap, vt_err *err);

/* --- lines.c: native frames to file and line ---------------------------------------------- */

/* Replaces the native frames of a site that name a module by what the module's DWARF says: the
 * function, file and line of the call, inlined calls first. Frames of modules without debug
 * information, or whose file changed since the run, stay as they are. Thread-safe. */
int vt_lines_expand(vt_snapshot *snap, vt_site *site, vt_err *err);
void vt_lines_free(vt_snapshot *snap);
/* A frame shown to the user had no line information: its module is named by vt_lines_missing. */
void vt_lines_note_shown(const vt_snapshot *snap, const vt_frame *f);
/* For the modules of shown frames that could not be resolved, what is missing and what to do:
 * "train_sim has no debug information (build it with -g, ...); libfoo.so changed since the
 * run (...)"; "" when none. */
const char *vt_lines_missing(const vt_snapshot *snap, char *buf, size_t len);

/* --- classify.c: DESIGN.md's category table --------------------------------------------- */

typedef enum {
    VT_CAT_PARAMETERS,
    VT_CAT_GRADIENTS,
    VT_CAT_OPTIMIZER_STATE,
    VT_CAT_ACTIVATIONS,
    VT_CAT_TEMPORARY,
    VT_CAT_UNATTRIBUTED_PERSISTENT,
    VT_CAT_UNATTRIBUTED_TRANSIENT,
    VT_NCATS
} vt_category;

vt_category vt_classify(const vt_alloc *a, bool phase_markers, int64_t final_steps);
/* key as in --json ("optimizer_state"), label for people ("optimizer state") */
const char *vt_category_key(vt_category c);
const char *vt_category_label(vt_category c);

/* --- evidence.c: what decided each byte's category ------------------------------------- */

/* Strongest first: the framework or the program said what the memory is; a stack names a
 * library workspace (or, in an imported recording, the optimizer or autograd's thread); the
 * timing rules of classify.c. */
typedef enum { VT_EV_IDENTITY, VT_EV_STACK, VT_EV_TIMING, VT_NEVIDENCE } vt_evidence;

const char *vt_evidence_key(vt_evidence e);
/* Splits allocation a's bytes into bytes[category][evidence] (added to); *workspace gets the
 * bytes that the stack names as a library workspace. In native mode what no label covers is
 * unattributed (a segment holds every category). -1 with err when a site cannot be read. */
/* One category for a, for the views that show one per allocation (history, the HTML page, the
 * trace export), by the bill's precedence: the label covering at least half of it, else a
 * library workspace named by its stack, else vt_classify; in native mode (segments shared by
 * every category) what no label decides is unattributed. The bill splits by byte instead
 * (vt_split_alloc). -1 with err when a site cannot be read. */
int vt_category_of(vt_snapshot *snap, const vt_alloc *a, bool native, vt_category *out,
                   vt_err *err);
int vt_split_alloc(vt_snapshot *snap, const vt_alloc *a, bool native,
                   int64_t bytes[VT_NCATS][VT_NEVIDENCE], int64_t *workspace, vt_err *err);

/* --- bill.c: the per-device bill at the peak -------------------------------------------- */

typedef struct {
    int32_t site; /* -1: no stack */
    int64_t bytes, count;
} vt_site_total;

/* Live allocations grouped by when they were born: the native-mode view of segments. */
typedef struct {
    vt_phase phase;
    int64_t step;
    int64_t bytes, count;
} vt_birth_group;

typedef struct {
    const vt_device *dev;
    bool native; /* segments, not tensors: no category split but by labels */
    int64_t cat_bytes[VT_NCATS], cat_count[VT_NCATS];
    int64_t evidence[VT_NCATS][VT_NEVIDENCE]; /* how cat_bytes were established */
    int64_t workspace_bytes;                  /* of temporary: library workspaces by stack */
    /* every site holding bytes of a category, largest first; the first ntop are shown and
     * their frames loaded */
    vt_site_total *top[VT_NCATS];
    size_t ntop[VT_NCATS], nsites_in[VT_NCATS];
    vt_site_total *top_all; /* across categories, for post-mortems */
    size_t ntop_all, nsites_all;
    vt_birth_group *groups; /* native only, in birth order */
    size_t ngroups;
} vt_bill;

int vt_bill_build(vt_snapshot *snap, const vt_device *dev, size_t top_n, vt_bill *bill,
                  vt_err *err);
void vt_bill_free(vt_bill *bill);
/* The category holding the most bytes, the two unattributed ones taken together (ties: the
 * earlier one in the table). */
vt_category vt_bill_dominant(const vt_bill *bill);
bool vt_snapshot_native(const vt_snapshot *snap);

/* --- history.c: live bytes over time, by category --------------------------------------- */

/* The live bytes of each category (or group) just after an event (or at a window's start). */
typedef struct {
    double t;
    int64_t cat[VT_NCATS];
} vt_point;

int64_t vt_point_total(const vt_point *p);

/* One device through one history window. Points are real moments, never interpolated: when
 * the window holds more events than max_points allows, each run of events keeps its lowest,
 * highest and last moments, so every extremum stays exact. */
typedef struct {
    const vt_window *win;
    int device;
    /* the window knows the device's whole live set: start figures and totals are exact */
    bool exact;
    size_t nevents; /* the device's events in the window */
    vt_point *pts;  /* pts[0] is the window's start */
    size_t npts;
    size_t peak_pt; /* the first point holding the window's most bytes */
} vt_series;

int vt_series_build(vt_snapshot *snap, const vt_window *win, int device, bool native,
                    size_t max_points, vt_series *out, vt_err *err);
/* Which of a point's VT_NCATS slots an allocation's bytes go to (vt_series_build: its
 * category); -1 with err when a site cannot be read. */
typedef int (*vt_slot_fn)(vt_snapshot *snap, const vt_alloc *a, bool native, const void *ctx,
                          int *slot, vt_err *err);
/* The same series stacked by another grouping (the pictures' module groups). The points kept
 * depend on the totals only, so both groupings keep the same moments. */
int vt_series_build_by(vt_snapshot *snap, const vt_window *win, int device, bool native,
                       vt_slot_fn slot, const void *ctx, size_t max_points, vt_series *out,
                       vt_err *err);
void vt_series_free(vt_series *s);

/* One phase instance of the per-phase timeline (top-level `timeline`). */
typedef struct {
    int64_t instance, step;
    vt_phase phase;
    double start_s, end_s;                  /* end_s NAN while open at the end */
    int64_t live_start, live_end, live_max; /* of the device asked for; -1 unknown */
} vt_tl_span;

/* The timeline's instances for one device; *n 0 when the file has none. */
int vt_timeline_load(const vt_snapshot *snap, int device, vt_tl_span **out, size_t *n, vt_err *err);

/* Each phase's peak on one device (model/phases.c): the largest live bytes in any instance of
 * the phase (the timeline holds the first 64 steps) and the step of that instance; the device's
 * own peak counts for the phase it fell in (index VT_NOPHASE without phase markers). -1: no
 * instance of that phase. */
typedef struct {
    int64_t bytes[VT_NPHASES + 1], step[VT_NPHASES + 1];
} vt_phase_peaks;

int vt_phase_peaks_load(const vt_snapshot *snap, const vt_device *dev, vt_phase_peaks *out,
                        vt_err *err);

/* --- units.c, term.c: text output -------------------------------------------------------- */

/* "512 B", "1.50 KiB", "20.00 MiB", "1.95 GiB": the units PyTorch prints. */
const char *vt_fmt_bytes(char buf[32], int64_t bytes);
/* The same with a sign: "+1.00 GiB", "-512 B", "0 B". */
const char *vt_fmt_delta(char buf[32], int64_t delta);
/* "80GiB", "81920 MiB", "80G" (binary), "80GB" (decimal) or bytes; -1 when not a size up to
 * VT_MAX_BYTES. */
int vt_parse_bytes(const char *s, int64_t *out);

typedef enum { VT_STYLE_BOLD, VT_STYLE_WARN, VT_STYLE_GOOD, VT_STYLE_BAD } vt_style;

/* Decides once whether stdout gets colour: a terminal, and NO_COLOR unset or empty. */
void vt_term_init(void);
const char *vt_on(vt_style s);
const char *vt_cat_on(vt_category c);
const char *vt_off(void);
/* Columns of the output: COLUMNS, else the terminal's width, else 100. */
int vt_term_width(void);
/* Prints text from column col (the caller has printed that much, a separating space included),
 * wrapped before column vt_term_width() with continuation lines indented to `indent`; ends the
 * line. */
void vt_print_wrapped(FILE *out, int col, int indent, const char *text);
/* A bar of `width` cells filled to part/whole. */
void vt_print_bar(FILE *out, int64_t part, int64_t whole, int width);

/* --- frames.c: naming sites ------------------------------------------------------------- */

/* A one-line label for a site: its innermost Python frames, else its innermost native frames
 * that are the user's (the C library's start-up, the CUDA libraries, vramtap and the framework's
 * allocator and dispatch plumbing are folded unless vt_labels_all_frames(true)). buf holds
 * VT_LABEL_MAX bytes. */
#define VT_LABEL_MAX 256
void vt_site_label(const vt_snapshot *snap, int32_t site, char buf[VT_LABEL_MAX]);
void vt_labels_all_frames(bool all);
/* The frame is one a label leaves out (never, after vt_labels_all_frames(true)). */
bool vt_frame_folded(const vt_frame *f);
/* What `diff` matches sites by: the label's frames by file and function (module and symbol
 * without debug information), so that a line moved in a caller keeps the match; their lines
 * apart, as a tie-break. Both "" without a stack. */
void vt_site_key(const vt_snapshot *snap, int32_t site, char *key, size_t keylen, char *lines,
                 size_t lineslen);
/* The site's label is on screen: the modules of its frames without lines get named. */
void vt_site_note_shown(const vt_snapshot *snap, int32_t site);
/* Cuts a label to `width` columns, ending it in "...". */
void vt_label_fit(char *buf, int width);
/* One frame as a folded-stack element (no ';' or newline). */
void vt_frame_name(const vt_frame *f, char *buf, size_t len);
/* "python train.py --bs 8", arguments quoted for a shell when needed. */
void vt_print_command(FILE *out, const char *const *argv, size_t argc);

#endif
