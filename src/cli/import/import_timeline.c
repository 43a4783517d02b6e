/* The raw output of torch.profiler's export_memory_timeline (a ".raw.json" file): a JSON array
 * of [time_ns, action, bytes, category] with PyTorch's own category labels. It has no phases,
 * stacks or addresses; it is imported so that PyTorch's categories can be compared with
 * vramtap's (they travel as each allocation's pytorch_category). */
#include <math.h>
#include <string.h>

#include "import.h"
#include "import_jsonstream.h"

/* torch.profiler._memory_profiler.Category, in order; index 7 is "no category" */
static const char *const categories[] = {"parameter",       "optimizer_state", "input",
                                         "temporary",       "activation",      "gradient",
                                         "autograd_detail", "unknown"};
#define NCATEGORIES (sizeof categories / sizeof categories[0])

enum { ACTION_PREEXISTING = 1, ACTION_CREATE, ACTION_INCREMENT_VERSION, ACTION_DESTROY };

typedef struct {
    vt_trace *tr;
    size_t n;
    double origin; /* ns */
} tctx;

static int on_element(json_t *v, void *arg, vt_err *err)
{
    tctx *c = arg;
    json_t *t = json_array_get(v, 0), *a = json_array_get(v, 1), *b = json_array_get(v, 2),
           *k = json_array_get(v, 3);
    c->n++;
    if (json_array_size(v) != 4 || !json_is_integer(t) || !json_is_integer(a) ||
        !json_is_integer(b) || !json_is_integer(k) || json_integer_value(k) < 0 ||
        (size_t)json_integer_value(k) >= NCATEGORIES ||
        json_integer_value(a) < ACTION_PREEXISTING || json_integer_value(a) > ACTION_DESTROY) {
        vt_err_set(err,
                   "%s: element %zu is not [time, action, bytes, category]: not a memory "
                   "timeline",
                   c->tr->source, c->n);
        return -1;
    }
    int64_t bytes = json_integer_value(b);
    uint8_t cat = (uint8_t)json_integer_value(k);
    if (json_integer_value(a) == ACTION_PREEXISTING) {
        vt_block blk = {.size = bytes, .site = -1, .category = cat};
        return bytes > 0 ? vt_trace_add_block(c->tr, false, &blk, err) : 0;
    }
    /* a version bump re-labels a tensor: it arrives as a free under the old category and an
     * allocation under the new one, at the same instant */
    vt_mev e = {.t = (double)json_integer_value(t),
                .bytes = bytes,
                .total = VT_NO_TOTAL,
                .site = -1,
                .category = cat};
    c->origin = fmin(c->origin, e.t);
    return bytes ? vt_trace_add_ev(c->tr, &e, err) : 0;
}

int vt_read_timeline(const char *path, vt_trace *tr, vt_err *err)
{
    tr->format = "memory-timeline";
    tr->category_names = categories;
    tr->ncategories = NCATEGORIES;
    vt_jstream *js;
    if (vt_js_open(&js, path, err))
        return -1;
    tctx c = {.tr = tr, .origin = INFINITY};
    int rc = vt_js_array(js, on_element, &c, err);
    if (!rc && vt_js_peek(js, err) != VT_JS_END) {
        if (!err->msg[0])
            vt_err_set(err, "%s: not valid JSON: data after the end", path);
        rc = -1;
    }
    vt_js_close(js);
    if (rc)
        return -1;
    if (!tr->nev && !tr->nstart) {
        vt_err_set(err, "%s: an empty memory timeline", path);
        return -1;
    }
    double o = isfinite(c.origin) ? c.origin : 0;
    vt_trace_rebase(tr, o, 1e9);
    if (o > 1e18)
        tr->start_unix = o / 1e9;
    if (vt_trace_lack(tr, err,
                      "phases and steps: the raw timeline has none, so vramtap's "
                      "categories are unattributed; PyTorch's own labels are kept as "
                      "pytorch_category") ||
        vt_trace_lack(tr, err, "stacks") ||
        vt_trace_lack(tr, err,
                      "addresses: frees are paired with live allocations of the same "
                      "size and category") ||
        vt_trace_lack(tr, err,
                      "the device: export_memory_timeline_raw writes one device, a GPU "
                      "or the CPU, without naming it; it is shown as device 0 of unknown kind"))
        return -1;
    tr->device_unnamed = true;
    return 0;
}
