/* Kineto traces (torch.profiler's Chrome-trace JSON) with `[memory]` events.
 *
 * A memory event carries no stack of its own: its stack is the chain of CPU events (ops,
 * Python functions, annotations) enclosing it on the same thread, found by sweeping each
 * thread's events in time order. Its module path comes the same way: a trace recorded with
 * with_modules=True has a python_function event "nn.Module: Linear_3" around each module call,
 * and the module calls enclosing a memory event, outermost first, make its path
 * ("Net_0.Block_1.Linear_3"). Only the fields needed are kept per event, so memory grows with
 * the number of CPU and memory events, not with the size of the text. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "grow.h"
#include "import.h"
#include "import_jsonstream.h"

#define MAX_FRAMES 64
#define MODULE_PREFIX "nn.Module: "

typedef struct {
    int64_t pid, tid;
    double ts, end;     /* µs */
    int32_t frame;      /* -1: a profiler step, which is no frame */
    int32_t pystack;    /* site holding the op's "Call stack" (older traces), -1 none */
    const char *module; /* a module call: "Linear_3" (interned), else NULL */
    uint32_t mpath;     /* a module call: its path, as vt_mev.mpath, once the sweep reached it */
} xev;

/* An interned module path and its vt_mev.mpath, keyed by the interned pointer. */
typedef struct {
    UT_hash_handle hh;
    const char *path;
    uint32_t mpath;
} mpath_ent;

typedef struct {
    int64_t pid, tid;
    double ts;
    size_t ev; /* index into tr->ev */
} mref;

typedef struct {
    vt_trace *tr;
    xev *x;
    size_t nx, xcap;
    mref *m;
    size_t nm, mcap;
    double *reserved_ts; /* per tr->devs entry: time of the latest Total Reserved seen */
    size_t reserved_cap;
    json_t *devprops;
    bool seen_events, any_addr, any_noaddr, any_total, any_nototal, any_python;
    double base_ns; /* baseTimeNanoseconds, NAN if absent */
    mpath_ent *mpaths;
} kctx;

/* Older traces write CPU thread ids as strings ("25738") and memory events' as numbers. */
static int64_t thread_id(kctx *k, json_t *v)
{
    if (json_is_integer(v))
        return json_integer_value(v);
    const char *s = json_string_value(v);
    if (!s)
        return 0;
    char *end;
    long long n = strtoll(s, &end, 10);
    if (*s && !*end)
        return n;
    /* a named track: any stable value that no numeric id takes */
    const char *p = vt_intern(&k->tr->sites, s, strlen(s));
    return p ? -(int64_t)(uintptr_t)p : 0;
}

static bool frame_category(const char *cat)
{
    return cat && (!strcmp(cat, "cpu_op") || !strcmp(cat, "Operator") ||
                   !strcmp(cat, "python_function") || !strcmp(cat, "user_annotation"));
}

/* "file.py(12): fn;file.py(3): caller;..." innermost first, as older traces attach to ops */
static int32_t call_stack_site(kctx *k, const char *cs, vt_err *err)
{
    int32_t frames[MAX_FRAMES];
    size_t n = 0;
    while (*cs && n < MAX_FRAMES) {
        const char *semi = strchr(cs, ';');
        size_t len = semi ? (size_t)(semi - cs) : strlen(cs);
        char *one = strndup(cs, len);
        if (!one)
            return vt_imp_nomem(err), -2;
        int32_t f = len ? vt_iframe_kineto_python(&k->tr->sites, one) : -1;
        free(one);
        if (len && f < 0)
            return vt_imp_nomem(err), -2;
        if (f >= 0)
            frames[n++] = f;
        cs += len + (semi != NULL);
    }
    if (!n)
        return -1;
    int32_t site = vt_isite(&k->tr->sites, frames, n);
    return site < 0 ? (vt_imp_nomem(err), -2) : site;
}

static int on_cpu_event(kctx *k, json_t *v, const char *cat, vt_err *err)
{
    const char *name = json_string_value(json_object_get(v, "name"));
    json_t *ts = json_object_get(v, "ts"), *dur = json_object_get(v, "dur");
    if (!name || !json_is_number(ts) || !json_is_number(dur))
        return 0;
    xev x = {.pid = 0, .pystack = -1, .frame = -1};
    if (!strcmp(cat, "python_function") && !strncmp(name, MODULE_PREFIX, strlen(MODULE_PREFIX))) {
        const char *m = name + strlen(MODULE_PREFIX);
        if (*m && !(x.module = vt_intern(&k->tr->sites, m, strlen(m))))
            return vt_imp_nomem(err);
    }
    vt_json_i64(v, "pid", &x.pid);
    x.tid = thread_id(k, json_object_get(v, "tid"));
    x.ts = json_number_value(ts);
    x.end = x.ts + json_number_value(dur);
    vt_span sp = {.start = x.ts, .end = x.end, .kind = -1};
    if (!strncmp(name, "ProfilerStep#", 13)) {
        sp.kind = VT_SPAN_STEP;
        sp.n = strtoll(name + 13, NULL, 10);
    } else {
        bool python = !strcmp(cat, "python_function");
        k->any_python |= python;
        x.frame = python ? vt_iframe_kineto_python(&k->tr->sites, name)
                         : vt_iframe_op(&k->tr->sites, name);
        if (x.frame < 0)
            return vt_imp_nomem(err);
        if (!strncmp(name, "Optimizer.step#", 15))
            sp.kind = VT_SPAN_OPTIMIZER;
        else if (!strncmp(name, "Optimizer.zero_grad#", 20))
            sp.kind = VT_SPAN_ZERO_GRAD;
        const char *cs =
            json_string_value(json_object_get(json_object_get(v, "args"), "Call stack"));
        if (cs && (x.pystack = call_stack_site(k, cs, err)) == -2)
            return -1;
        k->any_python |= x.pystack >= 0;
    }
    if (sp.kind >= 0 && vt_trace_add_span(k->tr, &sp, err))
        return -1;
    if (vt_grow(&k->x, &k->xcap, k->nx + 1, sizeof *k->x, 16))
        return vt_imp_nomem(err);
    k->x[k->nx++] = x;
    return 0;
}

static int on_memory_event(kctx *k, json_t *v, vt_err *err)
{
    json_t *args = json_object_get(v, "args");
    json_t *ts = json_object_get(v, "ts");
    int64_t type, dev, bytes;
    if (!vt_json_i64(args, "Device Type", &type) || !vt_json_i64(args, "Device Id", &dev) ||
        !vt_json_i64(args, "Bytes", &bytes) || !json_is_number(ts))
        return 0;
    if ((type != 1 && type != 6) || bytes == 0 || dev < 0 || dev > INT32_MAX)
        return 0; /* CPU memory, or nothing moved */
    vt_mev e = {.t = json_number_value(ts),
                .bytes = bytes,
                .total = VT_NO_TOTAL,
                .site = -1,
                .device = (int32_t)dev,
                .category = VT_NO_CATEGORY};
    int64_t addr, total, reserved;
    if (vt_json_i64(args, "Addr", &addr) && addr != 0) {
        e.addr = (uint64_t)addr;
        k->any_addr = true;
    } else {
        k->any_noaddr = true;
    }
    if (vt_json_i64(args, "Total Allocated", &total)) {
        e.total = total;
        k->any_total = true;
    } else {
        k->any_nototal = true;
    }
    vt_devinfo *d = vt_trace_dev(k->tr, e.device, err);
    if (!d)
        return -1;
    if (vt_json_i64(args, "Total Reserved", &reserved)) {
        size_t di = (size_t)(d - k->tr->devs);
        size_t old = k->reserved_cap;
        if (vt_grow(&k->reserved_ts, &k->reserved_cap, k->tr->ndevs, sizeof *k->reserved_ts, 16))
            return vt_imp_nomem(err);
        for (size_t i = old; i < k->reserved_cap; i++)
            k->reserved_ts[i] = -INFINITY;
        if (reserved > d->reserved_peak)
            d->reserved_peak = reserved;
        if (e.t >= k->reserved_ts[di]) {
            d->reserved_end = reserved;
            k->reserved_ts[di] = e.t;
        }
    }
    if (vt_grow(&k->m, &k->mcap, k->nm + 1, sizeof *k->m, 16))
        return vt_imp_nomem(err);
    k->m[k->nm] =
        (mref){.tid = thread_id(k, json_object_get(v, "tid")), .ts = e.t, .ev = k->tr->nev};
    vt_json_i64(v, "pid", &k->m[k->nm].pid);
    k->nm++;
    return vt_trace_add_ev(k->tr, &e, err);
}

static int on_event(json_t *v, void *arg, vt_err *err)
{
    kctx *k = arg;
    const char *ph = json_string_value(json_object_get(v, "ph"));
    if (!ph)
        return 0;
    if (!strcmp(ph, "X")) {
        const char *cat = json_string_value(json_object_get(v, "cat"));
        return frame_category(cat) ? on_cpu_event(k, v, cat, err) : 0;
    }
    const char *name = json_string_value(json_object_get(v, "name"));
    if (!strcmp(ph, "i") && name && !strcmp(name, "[memory]"))
        return on_memory_event(k, v, err);
    return 0;
}

static int on_member(const char *key, vt_jstream *js, void *arg, vt_err *err)
{
    kctx *k = arg;
    if (!strcmp(key, "traceEvents")) {
        k->seen_events = true;
        return vt_js_array(js, on_event, k, err);
    }
    if (!strcmp(key, "deviceProperties") || !strcmp(key, "distributedInfo") ||
        !strcmp(key, "baseTimeNanoseconds")) {
        json_t *v = vt_js_value(js, err);
        if (!v)
            return -1;
        if (!strcmp(key, "deviceProperties")) {
            json_decref(k->devprops);
            k->devprops = v;
            return 0;
        }
        if (!strcmp(key, "distributedInfo"))
            vt_json_i64(v, "rank", &k->tr->rank);
        else if (json_is_number(v))
            k->base_ns = json_number_value(v);
        json_decref(v);
        return 0;
    }
    return vt_js_skip(js, err);
}

/* Events and memory references both sort by thread, then time. */
#define CMP(x, y) (((x) > (y)) - ((x) < (y)))
#define CMP_THREAD_TIME(a, b)                                                                      \
    ((a)->pid != (b)->pid   ? CMP((a)->pid, (b)->pid)                                              \
     : (a)->tid != (b)->tid ? CMP((a)->tid, (b)->tid)                                              \
                            : CMP((a)->ts, (b)->ts))

static int cmp_xev(const void *pa, const void *pb)
{
    const xev *a = pa, *b = pb;
    int c = CMP_THREAD_TIME(a, b);
    /* the enclosing event first */
    return c ? c : CMP(b->end, a->end);
}

static int cmp_mref(const void *pa, const void *pb)
{
    const mref *a = pa, *b = pb;
    int c = CMP_THREAD_TIME(a, b);
    return c ? c : CMP(a->ev, b->ev);
}

static int thread_cmp(const xev *x, const mref *m)
{
    if (x->pid != m->pid)
        return x->pid < m->pid ? -1 : 1;
    return (x->tid > m->tid) - (x->tid < m->tid);
}

/* A thread that runs backward functions and no profiler step is autograd's worker: all its
 * work is backward, including the gradient sums that happen between backward functions. */
static bool backward_thread(const xev *x, size_t begin, size_t end, const vt_isites *s)
{
    bool bwd = false;
    for (size_t i = begin; i < end; i++) {
        if (x[i].frame < 0)
            return false;
        bwd |= (s->frames[x[i].frame].evidence & VT_EV_BACKWARD) != 0;
    }
    return bwd;
}

static bool same_thread(const mref *a, const mref *b)
{
    return a->pid == b->pid && a->tid == b->tid;
}

/* The innermost module call on the stack: its path, as vt_mev.mpath (0: none). */
static uint32_t module_at(const kctx *k, const size_t *stack, size_t depth)
{
    for (size_t d = depth; d-- > 0;)
        if (k->x[stack[d]].module)
            return k->x[stack[d]].mpath;
    return 0;
}

/* The path of module call x: its caller's path, a dot, its own name. */
static int module_path(kctx *k, xev *x, uint32_t caller, vt_err *err)
{
    vt_trace *tr = k->tr;
    const char *outer = caller ? tr->mpaths[caller - 1] : NULL;
    size_t len = (outer ? strlen(outer) + 1 : 0) + strlen(x->module);
    char *joined = malloc(len + 1);
    if (!joined)
        return vt_imp_nomem(err);
    snprintf(joined, len + 1, "%s%s%s", outer ? outer : "", outer ? "." : "", x->module);
    const char *path = vt_intern(&tr->sites, joined, len);
    free(joined);
    if (!path)
        return vt_imp_nomem(err);
    mpath_ent *e;
    HASH_FIND_PTR(k->mpaths, &path, e);
    if (!e) {
        if (tr->nmpaths >= INT32_MAX ||
            vt_grow(&tr->mpaths, &tr->mpaths_cap, tr->nmpaths + 1, sizeof *tr->mpaths, 16) ||
            !(e = malloc(sizeof *e)))
            return vt_imp_nomem(err);
        e->path = path;
        tr->mpaths[tr->nmpaths++] = path;
        e->mpath = (uint32_t)tr->nmpaths;
        HASH_ADD_PTR(k->mpaths, path, e);
    }
    x->mpath = e->mpath;
    return 0;
}

/* The stack, module path and phase evidence of m, whose thread's CPU events not yet entered
 * start at *xi. */
static int attach_one(kctx *k, const mref *m, size_t *xi, size_t xe, size_t *stack, uint8_t *flags,
                      size_t *depth, bool bwd_thread, vt_err *err)
{
    vt_isites *s = &k->tr->sites;
    for (; *xi < xe && k->x[*xi].ts <= m->ts; (*xi)++) {
        while (*depth && k->x[stack[*depth - 1]].end <= k->x[*xi].ts)
            (*depth)--;
        xev *x = &k->x[*xi];
        if (x->module && module_path(k, x, module_at(k, stack, *depth), err))
            return -1;
        flags[*depth] =
            (*depth ? flags[*depth - 1] : 0) | (x->frame >= 0 ? s->frames[x->frame].evidence : 0);
        stack[(*depth)++] = *xi;
    }
    while (*depth && k->x[stack[*depth - 1]].end < m->ts)
        (*depth)--;
    int32_t frames[MAX_FRAMES];
    size_t n = 0;
    int32_t pystack = -1;
    for (size_t d = *depth; d-- > 0;) {
        const xev *x = &k->x[stack[d]];
        if (x->frame >= 0 && n < MAX_FRAMES)
            frames[n++] = x->frame;
        if (pystack < 0)
            pystack = x->pystack;
    }
    uint8_t ev = *depth ? flags[*depth - 1] : 0;
    if (pystack >= 0) {
        size_t pn;
        const int32_t *pf = vt_isite_frames(s, pystack, &pn);
        for (size_t i = 0; i < pn && n < MAX_FRAMES; i++)
            frames[n++] = pf[i];
        ev |= vt_isite_evidence(s, pystack);
    }
    if (bwd_thread && !(ev & VT_EV_OPTIMIZER))
        ev |= VT_EV_BACKWARD;
    vt_mev *e = &k->tr->ev[m->ev];
    e->evidence = ev;
    e->mpath = module_at(k, stack, *depth);
    if (n && (e->site = vt_isite(s, frames, n)) < 0)
        return vt_imp_nomem(err);
    return 0;
}

/* Gives every memory event the chain of CPU events around it on its thread: each thread's
 * events sorted by start (enclosing first) nest, so one sweep with a stack finds them. */
static int attach_stacks(kctx *k, vt_err *err)
{
    if (k->nx)
        qsort(k->x, k->nx, sizeof *k->x, cmp_xev);
    if (k->nm)
        qsort(k->m, k->nm, sizeof *k->m, cmp_mref);
    size_t *stack = malloc((k->nx + 1) * sizeof *stack);
    uint8_t *flags = malloc(k->nx + 1);
    int rc = stack && flags ? 0 : vt_imp_nomem(err);
    size_t mi = 0, xi = 0;
    while (!rc && mi < k->nm) {
        size_t me = mi;
        while (me < k->nm && same_thread(&k->m[me], &k->m[mi]))
            me++;
        while (xi < k->nx && thread_cmp(&k->x[xi], &k->m[mi]) < 0)
            xi++;
        size_t xe = xi;
        while (xe < k->nx && thread_cmp(&k->x[xe], &k->m[mi]) == 0)
            xe++;
        bool bwd_thread = backward_thread(k->x, xi, xe, &k->tr->sites);
        size_t depth = 0;
        for (; !rc && mi < me; mi++)
            rc = attach_one(k, &k->m[mi], &xi, xe, stack, flags, &depth, bwd_thread, err);
        xi = xe;
    }
    free(stack);
    free(flags);
    return rc;
}

static void device_properties(kctx *k)
{
    size_t i;
    json_t *p;
    json_array_foreach(k->devprops, i, p)
    {
        int64_t id, total;
        if (!vt_json_i64(p, "id", &id))
            continue;
        for (size_t d = 0; d < k->tr->ndevs; d++) {
            vt_devinfo *di = &k->tr->devs[d];
            if (di->device != id)
                continue;
            const char *name = json_string_value(json_object_get(p, "name"));
            if (name)
                di->name = vt_intern(&k->tr->sites, name, strlen(name));
            if (vt_json_i64(p, "totalGlobalMem", &total))
                di->total_bytes = total;
        }
    }
}

/* Times become seconds from the first event; the wall clock is known when the trace carries
 * its base (newer Kineto) or when timestamps are Unix microseconds (older Kineto). */
static void rebase_times(kctx *k)
{
    vt_trace *tr = k->tr;
    double origin = INFINITY;
    for (size_t i = 0; i < tr->nev; i++)
        origin = fmin(origin, tr->ev[i].t);
    for (size_t i = 0; i < k->nx; i++)
        origin = fmin(origin, k->x[i].ts);
    vt_trace_rebase(tr, origin, 1e6);
    if (!isnan(k->base_ns))
        tr->start_unix = k->base_ns / 1e9 + origin / 1e6;
    else if (origin > 1e15)
        tr->start_unix = origin / 1e6;
}

static int say_what_lacks(kctx *k, vt_err *err)
{
    vt_trace *tr = k->tr;
    bool steps = false;
    for (size_t i = 0; i < tr->nspans; i++)
        steps |= tr->spans[i].kind == VT_SPAN_STEP;
    if (k->any_noaddr &&
        vt_trace_lack(tr, err,
                      "addresses: frees are paired with live allocations of the same size, "
                      "so the sizes live at the peak are exact but which allocation a "
                      "free ended is a guess"))
        return -1;
    if (k->any_nototal &&
        vt_trace_lack(tr, err,
                      "running totals: memory allocated before the recording began is "
                      "invisible, so the peak counts only what the recorded window "
                      "allocated on top of it"))
        return -1;
    if (!k->any_python &&
        vt_trace_lack(tr, err, "Python stacks (record with with_stack=True): sites name ops only"))
        return -1;
    if (!steps && vt_trace_lack(tr, err,
                                "profiler steps (call prof.step() every iteration): "
                                "steps count optimizer steps instead"))
        return -1;
    tr->python_stacks = k->any_python;
    tr->misses_memory = k->any_nototal;
    if (tr->nmpaths &&
        vt_trace_note(tr, err,
                      "module paths from the trace's module calls: by class and instance "
                      "counter (Block_1.Linear_3), not by attribute name (docs/modules.md)"))
        return -1;
    return 0;
}

int vt_read_kineto(const char *path, vt_trace *tr, vt_err *err)
{
    kctx k = {.tr = tr, .base_ns = NAN};
    vt_jstream *js;
    tr->format = "kineto";
    if (vt_js_open(&js, path, err))
        return -1;
    int rc = vt_js_object(js, on_member, &k, err);
    if (!rc && vt_js_peek(js, err) != VT_JS_END) {
        if (!err->msg[0])
            vt_err_set(err, "%s: not valid JSON: data after the end at byte %llu", path,
                       (unsigned long long)vt_js_offset(js));
        rc = -1;
    }
    vt_js_close(js);
    if (!rc && !k.seen_events) {
        vt_err_set(err, "%s: JSON without traceEvents: not a Kineto trace", path);
        rc = -1;
    }
    if (!rc && !tr->nev) {
        vt_err_set(err, "%s: no CUDA or HIP [memory] events (record with profile_memory=True)",
                   path);
        rc = -1;
    }
    if (!rc && !(rc = attach_stacks(&k, err))) {
        tr->pid = k.m[0].pid;
        rebase_times(&k);
        device_properties(&k);
        rc = say_what_lacks(&k, err);
    }
    json_decref(k.devprops);
    mpath_ent *e, *tmp;
    HASH_ITER(hh, k.mpaths, e, tmp)
    {
        HASH_DEL(k.mpaths, e);
        free(e);
    }
    free(k.x);
    free(k.m);
    free(k.reserved_ts);
    return rc;
}
