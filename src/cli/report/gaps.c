/* What an imported recording could not tell, from the snapshot's import object: what the trace
 * lacks, memory live before the recording began (the run's peak may have come before it), memory
 * the recording may miss, times the importer had to invent and a device it could not name.
 * `vramtap report` says them (text and --json) and counts the first two as a lower bound. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "report.h"

static json_t *import_of(const vt_snapshot *s)
{
    json_t *o = s->kind == VT_SNAP_IMPORT ? json_object_get(s->root, "import") : NULL;
    return json_is_object(o) ? o : NULL;
}

/* Snapshots imported before these keys existed say nothing: nothing is assumed missing. */
static bool flag(json_t *o, const char *key, bool absent)
{
    json_t *v = json_object_get(o, key);
    return json_is_boolean(v) ? json_is_true(v) : absent;
}

void vt_gaps_of(const vt_snapshot *s, vt_gaps *g)
{
    json_t *o = import_of(s), *devs = json_object_get(o, "devices"), *d;
    *g = (vt_gaps){.import = o != NULL};
    if (!o)
        return;
    g->times_invented = !flag(o, "times_recorded", true);
    g->device_unnamed = !flag(o, "device_named", true);
    g->misses_memory = flag(o, "misses_memory", false);
    size_t i;
    json_array_foreach(devs, i, d)
    {
        json_t *b = json_object_get(d, "before_window_bytes");
        if (json_is_integer(b) && json_integer_value(b) > 0)
            g->before_window_bytes += json_integer_value(b);
    }
}

const char *vt_device_word(const vt_snapshot *s)
{
    vt_gaps g;
    vt_gaps_of(s, &g);
    return g.device_unnamed ? "device " : "cuda:";
}

bool vt_lower_bound(const vt_snapshot *s)
{
    vt_gaps g;
    vt_gaps_of(s, &g);
    return s->dropped > 0 || g.misses_memory || g.before_window_bytes > 0;
}

void vt_print_gaps(FILE *out, const vt_snapshot *s)
{
    vt_gaps g;
    vt_gaps_of(s, &g);
    if (!g.import)
        return;
    json_t *lacks = json_object_get(import_of(s), "lacks"), *v;
    size_t i;
    bool said = false;
    json_array_foreach(lacks, i, v)
    {
        if (!json_is_string(v))
            continue;
        if (!said)
            fprintf(out, "  the trace lacks (so vramtap import said)\n");
        said = true;
        vt_print_wrapped(out, fprintf(out, "    - "), 6, json_string_value(v));
    }
    if (!g.before_window_bytes && !g.misses_memory)
        return;
    char b[32], text[640];
    int n = 0;
    if (g.before_window_bytes)
        n = snprintf(text, sizeof text,
                     "the recording began with %s already live (allocated before it), so the "
                     "run's peak may have come before the recording%s",
                     vt_fmt_bytes(b, g.before_window_bytes), g.misses_memory ? "; and " : "");
    if (g.misses_memory)
        snprintf(text + n, sizeof text - (size_t)n,
                 "memory live in the recording may be missing from it (what the trace lacks, "
                 "above)");
    vt_print_wrapped(
        out, fprintf(out, "  %swarning%s: ", vt_on(VT_STYLE_WARN), vt_off()), 2,
        strncat(text, ": every figure below is a lower bound", sizeof text - strlen(text) - 1));
}

json_t *vt_gaps_json(const vt_snapshot *s)
{
    json_t *o = import_of(s);
    if (!o)
        return json_null();
    vt_gaps g;
    vt_gaps_of(s, &g);
    json_t *lacks = json_array(), *v;
    size_t i;
    json_array_foreach(json_object_get(o, "lacks"), i, v) if (json_is_string(v))
        json_array_append(lacks, v);
    json_t *source = json_object_get(o, "source"), *format = json_object_get(o, "format");
    return json_pack("{s:O, s:O, s:o, s:b, s:b, s:b, s:I}", "source",
                     json_is_string(source) ? source : json_null(), "format",
                     json_is_string(format) ? format : json_null(), "lacks", lacks,
                     "times_recorded", !g.times_invented, "device_named", !g.device_unnamed,
                     "misses_memory", g.misses_memory, "before_window_bytes",
                     (json_int_t)g.before_window_bytes);
}
