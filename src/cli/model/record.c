/* The run record: what ran, from the snapshot's `run_record` (what the framework hooks or the
 * program said) and its devices (GPU model, memory, peaks). Shown at the top of the report,
 * printed as Markdown by `report --record`, compared by `diff`; and PyTorch's own category
 * labels of an imported memory timeline, shown beside vramtap's. */
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

#include "record.h"
#include "snapshot_keys.h"

const char *vt_record_text(json_t *rec, const char *key)
{
    json_t *v = json_object_get(rec, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

int64_t vt_record_int(json_t *rec, const char *key)
{
    json_t *v = json_object_get(rec, key);
    return json_is_integer(v) && json_integer_value(v) >= 0 ? json_integer_value(v) : -1;
}

/* 124439808 -> "124,439,808" */
static void fmt_count(char *buf, size_t len, int64_t n)
{
    char digits[32];
    int nd = snprintf(digits, sizeof digits, "%" PRId64, n);
    size_t o = 0;
    for (int i = 0; i < nd && o + 2 < len; i++) {
        if (i && (nd - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = 0;
}

static void add(vt_record *r, const char *key, const char *label, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void add(vt_record *r, const char *key, const char *label, const char *fmt, ...)
{
    if (r->n == VT_RECORD_MAX)
        return;
    vt_record_row *row = &r->rows[r->n++];
    row->key = key;
    row->label = label;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(row->value, sizeof row->value, fmt, ap);
    va_end(ap);
}

void vt_record_build(const vt_snapshot *s, vt_record *r)
{
    char b[32], c1[32], c2[32];
    r->n = 0;
    json_t *rec = json_object_get(s->root, VT_K_RUN_RECORD);
    if (!json_is_object(rec))
        rec = NULL;
    for (size_t i = 0; i < s->ndevices; i++) {
        const vt_device *d = &s->devices[i];
        if (d->name || d->total_bytes >= 0)
            add(r, "gpu", "GPU", "cuda:%d %s%s%s", d->device, d->name ? d->name : "",
                d->name && d->total_bytes >= 0 ? ", " : "",
                d->total_bytes >= 0 ? vt_fmt_bytes(b, d->total_bytes) : "");
    }
    const char *framework = rec ? vt_record_text(rec, "framework") : NULL;
    if (framework)
        add(r, "framework", "framework", "%s", framework);
    const char *model = rec ? vt_record_text(rec, "model") : NULL;
    int64_t params = rec ? vt_record_int(rec, "parameters") : -1;
    if (model || params >= 0) {
        int64_t trainable = vt_record_int(rec, "trainable_parameters"),
                bytes = vt_record_int(rec, "parameter_bytes");
        const char *dtypes = vt_record_text(rec, "parameter_dtypes");
        fmt_count(c1, sizeof c1, params);
        fmt_count(c2, sizeof c2, trainable);
        add(r, "model", "model", "%s%s%s parameters%s%s%s%s%s%s%s", model ? model : "",
            model ? ", " : "", params >= 0 ? c1 : "?", trainable >= 0 ? " (" : "",
            trainable >= 0 ? c2 : "", trainable >= 0 ? " trainable)" : "", dtypes ? ", " : "",
            dtypes ? dtypes : "", bytes >= 0 ? ", " : "", bytes >= 0 ? vt_fmt_bytes(b, bytes) : "");
    }
    static const struct {
        const char *key, *label;
    } texts[] = {{"optimizer", "optimizer"},
                 {"input_shape", "input shape"},
                 {"amp", "AMP"},
                 {"gradient_checkpointing", "activation checkpointing"}};
    static const struct {
        const char *key, *label;
    } ints[] = {{"batch_size", "batch size"}, {"micro_batches", "micro-batches per step"}};
    for (size_t i = 0; rec && i < sizeof ints / sizeof ints[0]; i++)
        if (vt_record_int(rec, ints[i].key) >= 0)
            add(r, ints[i].key, ints[i].label, "%" PRId64, vt_record_int(rec, ints[i].key));
    for (size_t i = 0; rec && i < sizeof texts / sizeof texts[0]; i++) {
        const char *v = vt_record_text(rec, texts[i].key);
        if (!v)
            continue;
        const char *dtype =
            strcmp(texts[i].key, "input_shape") ? NULL : vt_record_text(rec, "input_dtype");
        add(r, texts[i].key, texts[i].label, "%s%s%s%s", v, dtype ? " (" : "", dtype ? dtype : "",
            dtype ? ")" : "");
    }
    /* Set by the library: whether the frames in the sites were read or followed. */
    const char *frames = rec ? vt_record_text(rec, VT_K_PYTHON_FRAMES) : NULL;
    if (frames && !strcmp(frames, "read"))
        add(r, VT_K_PYTHON_FRAMES, "Python frames", "read from each thread's interpreter frames");
    else if (frames && !strcmp(frames, "followed"))
        add(r, VT_K_PYTHON_FRAMES, "Python frames",
            "followed: a shadow stack kept on every Python call");
    else if (frames)
        add(r, VT_K_PYTHON_FRAMES, "Python frames", "%s", frames);
    for (size_t i = 0; i < s->ndevices; i++) {
        const vt_device *d = &s->devices[i];
        add(r, "peak_allocated", "peak allocated", "%s (cuda:%d)", vt_fmt_bytes(b, d->peak_bytes),
            d->device);
        if (d->reserved_source)
            add(r, "peak_reserved", "peak reserved", "%s (cuda:%d)",
                vt_fmt_bytes(b, d->reserved_peak_bytes), d->device);
    }
}

const char *vt_record_get(const vt_record *r, const char *key)
{
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp(r->rows[i].key, key))
            return r->rows[i].value;
    return NULL;
}

void vt_print_record(FILE *out, const vt_snapshot *s)
{
    vt_record r;
    vt_record_build(s, &r);
    if (!json_is_object(json_object_get(s->root, VT_K_RUN_RECORD)))
        return;
    fprintf(out, "  %srun record%s\n", vt_on(VT_STYLE_BOLD), vt_off());
    for (size_t i = 0; i < r.n; i++)
        if (strncmp(r.rows[i].key, "peak_", 5))
            fprintf(out, "    %-26s %s\n", r.rows[i].label, r.rows[i].value);
}

void vt_print_record_markdown(FILE *out, const vt_snapshot *s)
{
    vt_record r;
    vt_record_build(s, &r);
    fprintf(out, "| run | %s |\n|---|---|\n", s->path);
    for (size_t i = 0; i < r.n; i++) {
        fprintf(out, "| %s | ", r.rows[i].label);
        /* a '|' would end the cell */
        for (const char *p = r.rows[i].value; *p; p++)
            fputs(*p == '|' ? "\\|" : (char[2]){*p, 0}, out);
        fputs(" |\n", out);
    }
}

json_t *vt_run_record_json(const vt_snapshot *s)
{
    json_t *rec = json_object_get(s->root, VT_K_RUN_RECORD);
    return json_is_object(rec) ? json_deep_copy(rec) : json_null();
}

/* "batch size 4 → 8, AMP off → bfloat16": what differs between two records, for diff. */
size_t vt_record_changes(const vt_snapshot *a, const vt_snapshot *b, char *buf, size_t len)
{
    vt_record ra, rb;
    vt_record_build(a, &ra);
    vt_record_build(b, &rb);
    size_t o = 0, n = 0;
    buf[0] = 0;
    for (size_t i = 0; i < ra.n + rb.n; i++) {
        const vt_record_row *row = i < ra.n ? &ra.rows[i] : &rb.rows[i - ra.n];
        if (!strncmp(row->key, "peak_", 5))
            continue;
        const char *va = vt_record_get(&ra, row->key), *vb = vt_record_get(&rb, row->key);
        /* each key once: from a's rows, or from b's when a lacks it */
        if ((i >= ra.n && va) || (va && vb && !strcmp(va, vb)))
            continue;
        int w = snprintf(buf + o, len - o, "%s%s %s \u2192 %s", n ? ", " : "", row->label,
                         va ? va : "(not recorded)", vb ? vb : "(not recorded)");
        if (w < 0 || (size_t)w >= len - o)
            break;
        o += (size_t)w;
        n++;
    }
    return n;
}

json_t *vt_pytorch_categories_json(const vt_snapshot *s, int device)
{
    json_t *devs = json_object_get(json_object_get(s->root, VT_K_IMPORT), "devices");
    for (size_t i = 0; i < json_array_size(devs); i++) {
        json_t *d = json_array_get(devs, i);
        json_t *cats = json_object_get(d, "pytorch_categories_at_peak");
        if (json_integer_value(json_object_get(d, "device")) == device && json_is_object(cats))
            return json_deep_copy(cats);
    }
    return NULL;
}

void vt_print_pytorch_categories(FILE *out, const vt_snapshot *s, int device)
{
    json_t *cats = vt_pytorch_categories_json(s, device);
    if (!cats)
        return;
    char b[32];
    const char *name;
    json_t *v;
    fprintf(out, "\n  %sPyTorch's own categories%s (the memory timeline's labels, at the peak)\n",
            vt_on(VT_STYLE_BOLD), vt_off());
    json_object_foreach(cats, name, v)
    {
        if (json_is_integer(v) && json_integer_value(v) > 0)
            fprintf(out, "    %-26s %12s\n", name, vt_fmt_bytes(b, json_integer_value(v)));
    }
    json_decref(cats);
}
