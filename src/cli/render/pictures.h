/* What `vramtap view` and `vramtap export --perfetto` draw for one device (pictures.c), and the
 * two renderers over it. */
#ifndef VT_PICTURES_H
#define VT_PICTURES_H

#include "report.h"

/* Points per series and window: a few thousand keep a page small and every extremum exact. */
#define VT_VIEW_POINTS 3000
#define VT_TRACE_POINTS 20000

typedef struct {
    const vt_bill *bill; /* the device and what was live at its peak */
    vt_series *series;   /* one per history window */
    size_t nseries;
    vt_tl_span *timeline;
    size_t ntimeline;
} vt_picture;

int vt_picture_build(vt_loaded *l, const vt_bill *bill, size_t max_points, vt_picture *p,
                     vt_err *err);
void vt_picture_free(vt_picture *p);
const char *vt_category_color(vt_category c);
const char *vt_window_label(const vt_window *w);
/* The last moment any part of the snapshot speaks of. */
double vt_picture_end(const vt_snapshot *s);

/* A verb that draws one snapshot: `vramtap VERB [--FORMAT] [-o FILE] SNAPSHOT`. Without -o the
 * file is the snapshot's base name with ext instead of .json, in the working directory; "-" is
 * standard output. */
typedef struct {
    const char *name, *ext;
    const char *format; /* a --FORMAT option that must be given, or NULL */
    void (*usage)(FILE *out);
    int (*render)(FILE *out, vt_loaded *l, vt_err *err);
} vt_picture_verb;

/* Parses the arguments, loads the snapshot, renders it and says where; the exit status. */
int vt_picture_command(int argc, char **argv, const vt_picture_verb *verb);

/* render_html.c: the self-contained page */
int vt_render_html(FILE *out, vt_loaded *l, vt_err *err);
/* render_perfetto.c: Chrome trace-event JSON */
int vt_render_perfetto(FILE *out, vt_loaded *l, vt_err *err);
/* export_json.c: a loaded snapshot as the format's JSON document */
int vt_export_json(FILE *out, const vt_snapshot *s, vt_err *err);

#endif
