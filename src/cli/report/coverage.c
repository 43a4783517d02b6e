/* How the snapshot was recorded (preloaded, or attached through CUPTI) and the coverage check's
 * figures, as the report shows them: one line, a loud one when interposition missed
 * allocations CUPTI saw, naming the calls. */
#include <string.h>

#include "cli.h"
#include "report.h"
#include "snapshot_keys.h"

typedef struct {
    int64_t allocs, bytes;
    json_t *by_api;
} side;

static int read_side(json_t *cov, const char *name, side *out, vt_err *err)
{
    json_t *o = json_object_get(cov, name);
    json_t *a = json_object_get(o, "allocations"), *b = json_object_get(o, "bytes");
    out->by_api = json_object_get(o, "by_api");
    if (!json_is_object(o) || !json_is_integer(a) || !json_is_integer(b) ||
        json_integer_value(a) < 0 || json_integer_value(b) < 0 || !json_is_object(out->by_api)) {
        vt_err_set(err,
                   "coverage.%s: expected {\"allocations\": N, \"bytes\": N, \"by_api\": "
                   "{...}}",
                   name);
        return -1;
    }
    out->allocs = json_integer_value(a);
    out->bytes = json_integer_value(b);
    const char *api;
    json_t *v;
    json_object_foreach(out->by_api, api, v)
    {
        json_t *n = json_object_get(v, "allocations"), *nb = json_object_get(v, "bytes");
        if (!json_is_integer(n) || !json_is_integer(nb) || json_integer_value(n) < 0 ||
            json_integer_value(nb) < 0) {
            vt_err_set(err, "coverage.%s.by_api.%s: expected {\"allocations\": N, \"bytes\": N}",
                       name, api);
            return -1;
        }
    }
    return 0;
}

/* The three sides; 0 without a coverage member, 1 with one, -1 (err set) when it is bad. */
static int read_coverage(const vt_snapshot *s, side sides[3], vt_err *err)
{
    json_t *cov = json_object_get(s->root, VT_K_COVERAGE);
    if (!cov || json_is_null(cov))
        return 0;
    static const char *const names[3] = {"cupti", "interposition", "missed"};
    if (!json_is_object(cov)) {
        vt_err_set(err, "%s: coverage: expected an object", s->path);
        return -1;
    }
    for (int i = 0; i < 3; i++) {
        vt_err inner;
        if (read_side(cov, names[i], &sides[i], &inner)) {
            vt_err_set(err, "%s: %s", s->path, inner.msg);
            return -1;
        }
    }
    return 1;
}

int vt_coverage_check(const vt_snapshot *s, vt_err *err)
{
    side sides[3];
    json_t *attach = json_object_get(s->root, VT_K_ATTACH);
    if (attach && !json_is_string(attach)) {
        vt_err_set(err, "%s: attach: expected a string", s->path);
        return -1;
    }
    return read_coverage(s, sides, err) < 0 ? -1 : 0;
}

void vt_print_coverage(FILE *out, const vt_snapshot *s)
{
    const char *attach = json_string_value(json_object_get(s->root, VT_K_ATTACH));
    if (attach && !strcmp(attach, "cupti"))
        fputs("  recorded  through CUPTI (attached, not preloaded)\n", out);
    side sd[3];
    vt_err err;
    if (read_coverage(s, sd, &err) <= 0)
        return;
    char b1[32], b2[32];
    if (!sd[2].allocs) {
        fprintf(out,
                "  coverage  CUPTI saw %lld allocations (%s), interposition recorded %lld (%s): "
                "none missed\n",
                (long long)sd[0].allocs, vt_fmt_bytes(b1, sd[0].bytes), (long long)sd[1].allocs,
                vt_fmt_bytes(b2, sd[1].bytes));
        return;
    }
    fprintf(out,
            "  %sWARNING%s: coverage: interposition missed %lld of the %lld allocations CUPTI "
            "saw (%s of %s), through ",
            vt_on(VT_STYLE_WARN), vt_off(), (long long)sd[2].allocs, (long long)sd[0].allocs,
            vt_fmt_bytes(b1, sd[2].bytes), vt_fmt_bytes(b2, sd[0].bytes));
    const char *api, *sep = "";
    json_t *v;
    json_object_foreach(sd[2].by_api, api, v)
    {
        fprintf(out, "%s%s (%lld, %s)", sep, api,
                (long long)json_integer_value(json_object_get(v, "allocations")),
                vt_fmt_bytes(b1, json_integer_value(json_object_get(v, "bytes"))));
        sep = ", ";
    }
    fputs(": they are not in this report (vramtap run --attach cupti records them)\n", out);
}

void vt_coverage_add_json(json_t *doc, const vt_snapshot *s)
{
    json_t *attach = json_object_get(s->root, VT_K_ATTACH);
    json_t *cov = json_object_get(s->root, VT_K_COVERAGE);
    json_object_set_new(
        doc, "attach", json_string(json_is_string(attach) ? json_string_value(attach) : "preload"));
    json_object_set_new(doc, "coverage", cov ? json_deep_copy(cov) : json_null());
}
