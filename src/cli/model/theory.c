/* Theory beside measurement: what the standard rules expect of parameters, gradients and
 * optimizer state for the run record's model and optimizer, next to what the bill measured at
 * the peak, with what can explain a difference (docs/categories.md). */
#include <stdlib.h>
#include <string.h>

#include "record.h"
#include "snapshot_keys.h"
#include "theory.h"

/* Bytes per element of a dtype as PyTorch names it ("float32", "bfloat16"), 0 when unknown. */
static int dtype_bytes(const char *name)
{
    static const struct {
        const char *name;
        int bytes;
    } sizes[] = {{"float64", 8}, {"complex64", 8}, {"int64", 8},    {"float32", 4},
                 {"int32", 4},   {"float16", 2},   {"bfloat16", 2}, {"int16", 2},
                 {"int8", 1},    {"uint8", 1},     {"bool", 1},     {"float8", 1}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (!strncmp(name, sizes[i].name, strlen(sizes[i].name)))
            return sizes[i].bytes;
    return 0;
}

/* The value of `key=` in the hooks' "Adam (amsgrad=False, foreach=None, ...)", or NULL. */
static const char *setting(const char *opt, const char *key, char *buf, size_t len)
{
    size_t klen = strlen(key);
    for (const char *p = strstr(opt, key); p; p = strstr(p + 1, key)) {
        if (p == opt || (p[-1] != '(' && p[-1] != ' ') || p[klen] != '=')
            continue;
        p += klen + 1;
        size_t n = strcspn(p, ",)");
        snprintf(buf, len, "%.*s", (int)(n < len ? n : len - 1), p);
        return buf;
    }
    return NULL;
}

/* A setting that is True or a non-zero number. */
static bool setting_on(const char *opt, const char *key)
{
    char v[32];
    if (!setting(opt, key, v, sizeof v))
        return false;
    return !strcmp(v, "True") || strtod(v, NULL) != 0.0;
}

int vt_optimizer_buffers(const char *opt)
{
    static const struct {
        const char *name;
        int buffers;
    } rules[] = {{"AdamW", 2}, {"Adamax", 2},  {"Adam", 2},    {"NAdam", 2},   {"RAdam", 2},
                 {"SGD", 0},   {"Adagrad", 1}, {"RMSprop", 1}, {"Adadelta", 2}};
    if (!opt || strchr(opt, ';')) /* several optimizers: no single rule */
        return -1;
    size_t name_len = strcspn(opt, " (");
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        if (strlen(rules[i].name) != name_len || strncmp(opt, rules[i].name, name_len))
            continue;
        int n = rules[i].buffers;
        /* AMSGrad keeps the largest second moment; momentum and centering add a buffer each */
        n += setting_on(opt, "amsgrad");
        if (!strcmp(rules[i].name, "SGD") || !strcmp(rules[i].name, "RMSprop"))
            n += setting_on(opt, "momentum");
        n += !strcmp(rules[i].name, "RMSprop") && setting_on(opt, "centered");
        return n;
    }
    return -1;
}

/* Why measured differs from expected for category c, by direction; `timing` is how much of
 * the measured figure no label or stack established. */
static void explain(vt_theory_row *row, vt_category c, int64_t timing)
{
    char d[32], t[32];
    int64_t diff = row->measured - row->expected;
    const char *why;
    if (c == VT_CAT_PARAMETERS)
        why = diff > 0 ? "an EMA or teacher copy, a second model, or memory made before training "
                         "that no label covers"
                       : "parameters not on this device: offloaded to the CPU, sharded (FSDP, "
                         "ZeRO-3) or on another GPU";
    else if (c == VT_CAT_GRADIENTS)
        why = diff > 0 ? "fp32 gradient buffers for half-precision parameters (main_grad), DDP "
                         "buckets or accumulation copies"
              : row->measured == 0
                  ? "no gradients live at the peak: zero_grad(set_to_none=True) before it, or "
                    "the peak came before backward"
                  : "part of the gradients live at the peak (it came during backward), or "
                    "gradients sharded (ZeRO-2, FSDP)";
    else
        why = diff > 0 ? "state or master weights in fp32 for half-precision parameters, step "
                         "counters on the device (fused, capturable), or several optimizers"
              : row->measured == 0
                  ? "no optimizer state at the peak: it came before the first step"
                  : "state for part of the parameters only: created lazily, or sharded (ZeRO)";
    vt_fmt_bytes(d, diff < 0 ? -diff : diff);
    int n = snprintf(row->why, sizeof row->why, "%s%s: %s", diff < 0 ? "-" : "+", d, why);
    if (diff > 0 && timing > 0 && n > 0 && (size_t)n < sizeof row->why)
        snprintf(row->why + n, sizeof row->why - (size_t)n, " (%s of it billed by timing)",
                 vt_fmt_bytes(t, timing < diff ? timing : diff));
}

void vt_theory_build(const vt_snapshot *s, const vt_bill *bill, vt_theory *t)
{
    memset(t, 0, sizeof *t);
    json_t *rec = json_object_get(s->root, VT_K_RUN_RECORD);
    if (!json_is_object(rec) || bill->native || !s->phase_markers)
        return;
    int64_t params = vt_record_int(rec, "parameters"),
            trainable = vt_record_int(rec, "trainable_parameters"),
            pbytes = vt_record_int(rec, "parameter_bytes"),
            tbytes = vt_record_int(rec, "trainable_parameter_bytes"),
            buffers = vt_record_int(rec, "buffer_bytes");
    const char *dtypes = vt_record_text(rec, "parameter_dtypes"),
               *opt = vt_record_text(rec, "optimizer");
    /* trainable bytes: recorded, or all of them, or by the one dtype */
    if (tbytes < 0 && trainable >= 0 && trainable == params)
        tbytes = pbytes;
    if (tbytes < 0 && trainable >= 0 && dtypes && !strchr(dtypes, ',') && dtype_bytes(dtypes))
        tbytes = trainable * dtype_bytes(dtypes);
    int k = vt_optimizer_buffers(opt);
    int64_t expect[VT_THEORY_ROWS] = {pbytes >= 0 ? pbytes + (buffers > 0 ? buffers : 0) : -1,
                                      tbytes, tbytes >= 0 && k >= 0 ? k * tbytes : -1};
    static const vt_category cats[VT_THEORY_ROWS] = {VT_CAT_PARAMETERS, VT_CAT_GRADIENTS,
                                                     VT_CAT_OPTIMIZER_STATE};
    for (int i = 0; i < VT_THEORY_ROWS; i++) {
        vt_theory_row *row = &t->rows[i];
        row->cat = cats[i];
        if (expect[i] < 0)
            continue;
        row->known = t->any = true;
        row->expected = expect[i];
        row->measured = bill->cat_bytes[cats[i]];
        int64_t diff = row->measured - row->expected;
        if ((diff < 0 ? -diff : diff) * 100 > row->expected)
            explain(row, cats[i], bill->evidence[cats[i]][VT_EV_TIMING]);
    }
    if (k >= 0)
        snprintf(t->optimizer_rule, sizeof t->optimizer_rule,
                 "%.*s: %d buffer%s per trainable parameter", (int)strcspn(opt, " ("), opt, k,
                 k == 1 ? "" : "s");
}
