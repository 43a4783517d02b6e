/* vramtap import: PyTorch traces become vramtap snapshots.
 *
 * Each reader (Kineto JSON, snapshot pickle through the Python helper, memory-timeline raw)
 * turns its file into the same neutral record, a vt_trace: memory events with what the source
 * says about them (address, running total, stack, phase evidence), step spans and explicit
 * phase spans. One replay (import_replay.c) then derives phases, steps and the peak for every
 * source alike, and snapshot_write.c emits the format of docs/snapshot-format.md. */
#ifndef VT_IMPORT_H
#define VT_IMPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "snapshot.h" /* vt_err, vt_phase */

/* Says "out of memory" in err; returns -1. */
int vt_imp_nomem(vt_err *err);
/* obj[key] as an integer (a real is truncated: older traces write some counts as reals). */
bool vt_json_i64(json_t *obj, const char *key, int64_t *out);

/* --- import_sites.c: interned strings, frames and stacks ------------------------------- */

/* Phase evidence a frame carries. An op is weak evidence: it means "model work", which is
 * forward only inside a profiler step and before backward. */
enum {
    VT_EV_FORWARD = 1,
    VT_EV_BACKWARD = 2,
    VT_EV_OPTIMIZER = 4,
    VT_EV_ZERO_GRAD = 8,
    VT_EV_OP = 16,
};

typedef enum { VT_FRAME_PYTHON, VT_FRAME_NATIVE, VT_FRAME_OP } vt_frame_type;

typedef struct {
    uint8_t type;     /* vt_frame_type */
    uint8_t evidence; /* VT_EV_* */
    int32_t line;     /* python; -1 unknown */
    const char *a;    /* python: file; native: module (NULL unknown); op: name */
    const char *b;    /* python: function; native: symbol; op: NULL */
} vt_iframe;

typedef struct vt_str_ent vt_str_ent;
typedef struct vt_frame_ent vt_frame_ent;
typedef struct vt_site_ent vt_site_ent;

typedef struct {
    vt_str_ent *strs;
    vt_frame_ent *frame_index;
    vt_iframe *frames;
    size_t nframes, frames_cap;
    vt_site_ent *site_index;
    vt_site_ent **sites; /* by id */
    size_t nsites, sites_cap;
} vt_isites;

/* Interned copy of s[0..len), or NULL when out of memory. */
const char *vt_intern(vt_isites *s, const char *str, size_t len);
/* Frame id (>= 0) or -1 when out of memory. Strings need not be interned. */
int32_t vt_iframe_python(vt_isites *s, const char *file, const char *function, int32_t line);
int32_t vt_iframe_native(vt_isites *s, const char *module, const char *symbol);
int32_t vt_iframe_op(vt_isites *s, const char *name);
/* A Kineto python_function name: "file.py(12): fn" is a Python frame, anything else ("<built-in
 * method ...>", "nn.Module: Linear_0") an op; object addresses are dropped so that the same
 * code gets the same frame in every run. */
int32_t vt_iframe_kineto_python(vt_isites *s, const char *name);
/* Site id (>= 0) for frames[0..n), innermost first, or -1 when out of memory. */
int32_t vt_isite(vt_isites *s, const int32_t *frames, size_t n);
const int32_t *vt_isite_frames(const vt_isites *s, int32_t site, size_t *n);
uint8_t vt_isite_evidence(const vt_isites *s, int32_t site);
bool vt_isite_has_python(const vt_isites *s, int32_t site);
/* 16 hex digits naming the site's code path, the same in every run. */
void vt_isite_signature(const vt_isites *s, int32_t site, char out[17]);
void vt_isites_free(vt_isites *s);

/* --- the neutral trace ------------------------------------------------------------------ */

#define VT_NO_TOTAL INT64_MIN
#define VT_NO_CATEGORY 0xff

typedef struct {
    double t;       /* seconds from the trace's origin */
    int64_t bytes;  /* > 0 allocation, < 0 free, 0 a phase marker (see vt_span) */
    uint64_t addr;  /* 0: the source records none; frees pair by size then */
    int64_t total;  /* allocator's live bytes after the event, VT_NO_TOTAL if not recorded */
    int32_t site;   /* -1: no stack */
    int32_t device; /* CUDA ordinal */
    uint32_t order; /* position in the source: breaks ties in time */
    uint32_t mpath; /* 1 + index into vt_trace.mpaths: the nn.Module it was made under; 0 none */
    uint8_t evidence;
    /* the source's own category label, VT_NO_CATEGORY if none; for a phase marker (bytes
     * 0), 0 at a span's start and 2 at its end */
    uint8_t category;
} vt_mev;

typedef enum {
    VT_SPAN_STEP,      /* a profiler step; n is its number */
    VT_SPAN_OPTIMIZER, /* an optimizer step, even one that allocates nothing */
    VT_SPAN_ZERO_GRAD,
} vt_span_kind;

typedef struct {
    double start, end;
    int kind; /* vt_span_kind */
    int64_t n;
} vt_span;

/* A block the source knows was live at the window's start or at its end. */
typedef struct {
    int32_t device;
    uint64_t addr;
    int64_t size;
    int32_t site;
    uint8_t category;
} vt_block;

typedef struct {
    int32_t device;
    const char *name; /* interned; NULL unknown */
    int64_t total_bytes;
    int64_t reserved_peak, reserved_end; /* -1 unknown */
} vt_devinfo;

typedef struct {
    double t;
    int32_t device;
    int64_t size;
    int32_t site;
} vt_ioom;

typedef struct {
    const char *format; /* "kineto", "pytorch-snapshot", "memory-timeline" */
    const char *source; /* the file given on the command line */
    vt_isites sites;
    vt_mev *ev;
    size_t nev, ev_cap;
    vt_span *spans;
    size_t nspans, spans_cap;
    vt_block *start_blocks, *end_blocks;
    size_t nstart, start_cap, nend, end_cap;
    vt_devinfo *devs;
    size_t ndevs, devs_cap;
    vt_ioom *ooms;
    size_t nooms, ooms_cap;
    /* what the source lacks and anything else a reader of the figures should know */
    char **lacks, **notes;
    size_t nlacks, nnotes, lacks_cap, notes_cap;
    const char *const *category_names; /* the source's labels, indexed by vt_mev.category */
    size_t ncategories;
    const char **mpaths; /* nn.Module paths the source names (interned in sites) */
    size_t nmpaths, mpaths_cap;
    int64_t pid;        /* -1 unknown */
    int64_t rank;       /* -1 unknown */
    double start_unix;  /* NAN unknown */
    bool python_stacks; /* the source recorded Python frames */
    /* what the report must say (the snapshot's import object): */
    bool times_invented; /* no timestamps: times are the events' order */
    bool device_unnamed; /* which device (a GPU, or the CPU) is not said */
    bool misses_memory;  /* memory live in the window may be missing: a lower bound */
} vt_trace;

int vt_trace_add_ev(vt_trace *tr, const vt_mev *ev, vt_err *err);
int vt_trace_add_span(vt_trace *tr, const vt_span *sp, vt_err *err);
int vt_trace_add_block(vt_trace *tr, bool at_end, const vt_block *b, vt_err *err);
vt_devinfo *vt_trace_dev(vt_trace *tr, int32_t device, vt_err *err);
int vt_trace_add_oom(vt_trace *tr, const vt_ioom *o, vt_err *err);
int vt_trace_lack(vt_trace *tr, vt_err *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int vt_trace_note(vt_trace *tr, vt_err *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Times from the source's clock to seconds after origin (same unit): t = (t - origin) / per_s. */
void vt_trace_rebase(vt_trace *tr, double origin, double per_s);
void vt_trace_free(vt_trace *tr);

/* --- readers ------------------------------------------------------------------------------ */

int vt_read_kineto(const char *path, vt_trace *tr, vt_err *err);
int vt_read_timeline(const char *path, vt_trace *tr, vt_err *err);
/* Returns 2 when the helper has already told the user why (one line on stderr). */
int vt_read_pickle(const char *path, vt_trace *tr, vt_err *err);

/* The records the pickle helper writes, one JSON object a line, read from in: 0, 1 when they
 * end before the helper's "end" record (err not set), or -1 with err for a bad record. */
int vt_pickle_records(FILE *in, const char *path, vt_trace *tr, vt_err *err);

/* --- import_replay.c ---------------------------------------------------------------------- */

typedef struct {
    uint8_t phase; /* vt_phase */
    int64_t step;
    int64_t instance;
} vt_when;

typedef struct {
    uint8_t phase;
    int64_t step;
    double start, end;
    size_t first, last; /* event indexes, inclusive */
} vt_inst;

typedef struct {
    int64_t size;
    uint64_t addr;
    int32_t device, site;
    uint32_t mpath; /* its birth event's */
    uint8_t category;
    bool before_window; /* live when the recording began; its birth is unknown */
    /* for allocations from before the window: the phase their birth is inferred to have had,
     * and from what (VT_BIRTH_*) */
    uint8_t birth_phase, birth_from;
    size_t birth, death; /* event indexes; VT_NONE: before the window / never freed */
} vt_ialloc;

enum { VT_BIRTH_UNKNOWN, VT_BIRTH_FROM_STACK, VT_BIRTH_FROM_FREE };

#define VT_NONE SIZE_MAX

/* Whether a is live just after event ev (VT_NONE: the window's start). */
bool vt_ialloc_live_at(const vt_ialloc *a, size_t ev);

typedef struct {
    int32_t device;
    int64_t peak, live_end, allocs, frees, unknown_frees;
    size_t peak_ev;              /* VT_NONE: the peak is the window's start */
    int64_t before_window_bytes; /* live at the window's start */
    int64_t unseen_bytes;        /* of those, bytes only the running total knows about */
    int64_t total_mismatches;    /* events whose running total disagrees with the replay */
    int64_t total_peak;          /* the source's own maximum running total, -1 none */
    int64_t unphased_allocs;     /* allocations with no phase evidence */
    int64_t unphased_outside;    /* of those, how many fell outside every phase instance */
    int64_t *cat_bytes_at_peak;  /* by the source's category, when it has them */
} vt_idev;

typedef struct {
    vt_trace *tr;
    vt_when *when; /* per event */
    vt_inst *inst;
    size_t ninst;
    vt_ialloc *allocs;
    size_t nallocs;
    vt_idev *devs;
    size_t ndevs;
    int64_t *inst_live; /* per instance and device: live bytes at its start, end, and most */
    int64_t steps;      /* the step counter at the end */
} vt_replay;

int vt_replay_run(vt_trace *tr, vt_replay *rp, vt_err *err);
void vt_replay_free(vt_replay *rp);

/* --- import.c ---------------------------------------------------------------------------- */

/* Reads path in the format its content has and replays it into tr and rp (both to be freed,
 * whatever the outcome): 0, 2 when the pickle helper has already told the user why, or -1 with
 * err. */
int vt_import_read(const char *path, vt_trace *tr, vt_replay *rp, vt_err *err);

/* --- snapshot_write.c --------------------------------------------------------------------- */

/* Writes the snapshot to path atomically ("-": stdout). */
int vt_snapshot_write(const vt_replay *rp, const char *path, vt_err *err);

#endif
