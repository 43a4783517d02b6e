/* What `vramtap view` and `vramtap export --perfetto` draw for one device (pictures.c), and the
 * two renderers over it. */
#ifndef VT_PICTURES_H
#define VT_PICTURES_H

#include "bymodule.h"
#include "report.h"

/* Points per series and window: a few thousand keep a page small and every extremum exact. */
#define VT_VIEW_POINTS 3000
#define VT_TRACE_POINTS 20000

/* module_groups.c: the few module paths a picture stacks apart (slots of a vt_point), each the
 * path and everything below it but the groups deeper down ("rest": some are). */
typedef struct {
    bool any; /* the snapshot names module paths */
    /* slots used: the paths, "other modules" (when some path is in none), "(path not
     * recorded)" (history allocations of a file that names no path for them), outside */
    size_t n;
    char *path[VT_NCATS];
    bool rest[VT_NCATS];
    int other, unknown, outside; /* their slots; other and unknown -1 when none */
    int64_t peak_bytes[VT_NCATS];
    int *slot_of_path; /* per snapshot module path */
    vt_slot_fn slot;   /* for vt_series_build_by, with the groups as ctx */
} vt_module_groups;

int vt_module_groups_build(vt_snapshot *snap, const vt_bill *bill, vt_module_groups *g,
                           vt_err *err);
void vt_module_groups_free(vt_module_groups *g);
/* "enc.layers.2", "enc (rest)", "other modules", "(path not recorded)", "(outside modules)"
 * (buf: the first two) */
const char *vt_module_group_label(const vt_module_groups *g, size_t i, char *buf, size_t len);
const char *vt_module_group_color(const vt_module_groups *g, size_t i);

typedef struct {
    const vt_bill *bill; /* the device and what was live at its peak */
    vt_series *series;   /* one per history window */
    size_t nseries;
    vt_module_groups groups; /* with by_module: */
    vt_series *mseries;      /* the same windows stacked by those groups */
    vt_tl_span *timeline;
    size_t ntimeline;
} vt_picture;

/* by_module: also the module groups and their series (none when the snapshot has no paths). */
int vt_picture_build(vt_loaded *l, const vt_bill *bill, size_t max_points, bool by_module,
                     vt_picture *p, vt_err *err);
void vt_picture_free(vt_picture *p);
const char *vt_category_color(vt_category c);
const char *vt_window_label(const vt_window *w);
/* The last moment any part of the snapshot speaks of. */
double vt_picture_end(const vt_snapshot *s);

/* A verb that draws one snapshot: `vramtap VERB [--FORMAT] [--by category|module] [-o FILE]
 * SNAPSHOT`. Without -o the file is the snapshot's base name with ext instead of .json, in the
 * working directory; "-" is standard output. --by module: grouped by nn.Module path, refused
 * for a snapshot that names none. */
typedef struct {
    const char *name, *ext;
    const char *format; /* a --FORMAT option that must be given, or NULL */
    void (*usage)(FILE *out);
    int (*render)(FILE *out, vt_loaded *l, bool by_module, vt_err *err);
} vt_picture_verb;

/* Parses the arguments, loads the snapshot, renders it and says where; the exit status. */
int vt_picture_command(int argc, char **argv, const vt_picture_verb *verb);

/* render_html.c: the self-contained page */
int vt_render_html(FILE *out, vt_loaded *l, bool by_module, vt_err *err);
/* render_perfetto.c: Chrome trace-event JSON; by_module: counters by module group */
int vt_render_perfetto(FILE *out, vt_loaded *l, bool by_module, vt_err *err);
/* export_json.c: a loaded snapshot as the format's JSON document */
int vt_export_json(FILE *out, const vt_snapshot *s, vt_err *err);

#endif
