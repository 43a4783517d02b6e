/* Interning for the importers: traces repeat the same strings, frames and stacks hundreds of
 * thousands of times, so each is stored once and named by a small integer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "grow.h"
#include "import.h"

struct vt_str_ent {
    UT_hash_handle hh;
    char s[];
};

/* Frames are keyed by interned pointers, so equal frames have equal keys byte for byte. */
typedef struct {
    const char *a, *b;
    int32_t line;
    uint8_t type;
    uint8_t pad[3];
} frame_key;

struct vt_frame_ent {
    UT_hash_handle hh;
    frame_key key;
    int32_t id;
};

struct vt_site_ent {
    UT_hash_handle hh;
    int32_t id;
    uint8_t evidence;
    bool python;
    size_t n;
    int32_t frames[];
};

const char *vt_intern(vt_isites *s, const char *str, size_t len)
{
    vt_str_ent *e;
    HASH_FIND(hh, s->strs, str, len, e);
    if (e)
        return e->s;
    e = malloc(sizeof *e + len + 1);
    if (!e)
        return NULL;
    memcpy(e->s, str, len);
    e->s[len] = 0;
    HASH_ADD_KEYPTR(hh, s->strs, e->s, len, e);
    return e->s;
}

static bool has_prefix(const char *s, const char *p)
{
    return !strncmp(s, p, strlen(p));
}

/* The phase a frame says its callees run in. Function names alone decide for Python because
 * PyTorch's own entry points are the same in every version: module calls go through
 * _call_impl, loss.backward() through Tensor.backward, optimizers through their step. */
static uint8_t evidence_of(const vt_iframe *f)
{
    switch (f->type) {
    case VT_FRAME_OP:
        if (has_prefix(f->a, "Optimizer.step#"))
            return VT_EV_OPTIMIZER;
        if (has_prefix(f->a, "Optimizer.zero_grad#"))
            return VT_EV_ZERO_GRAD;
        if (has_prefix(f->a, "autograd::engine::evaluate_function") || strstr(f->a, "Backward") ||
            !strcmp(f->a, "torch::autograd::AccumulateGrad"))
            return VT_EV_BACKWARD;
        if (has_prefix(f->a, "nn.Module: "))
            return VT_EV_FORWARD;
        return VT_EV_OP;
    case VT_FRAME_PYTHON:
        if (!strcmp(f->b, "zero_grad"))
            return VT_EV_ZERO_GRAD;
        /* a user's optimizer class may live in any file, but torch's step wrapper calls it */
        if ((!strcmp(f->b, "step") && strstr(f->a, "optim") && !strstr(f->a, "lr_scheduler")) ||
            strstr(f->a, "torch/optim/optimizer.py"))
            return VT_EV_OPTIMIZER;
        if (!strcmp(f->b, "backward") || !strcmp(f->b, "_engine_run_backward"))
            return VT_EV_BACKWARD;
        if (!strcmp(f->b, "_call_impl") || !strcmp(f->b, "_wrapped_call_impl") ||
            !strcmp(f->b, "forward"))
            return VT_EV_FORWARD;
        return 0;
    default:
        /* autograd's engine threads: Engine::thread_main, under PythonEngine::thread_init */
        return f->b && (strstr(f->b, "torch::autograd::Engine::") ||
                        strstr(f->b, "PythonEngine::thread_init"))
                   ? VT_EV_BACKWARD
                   : 0;
    }
}

static int32_t frame_intern(vt_isites *s, uint8_t type, const char *a, const char *b, int32_t line)
{
    frame_key key;
    memset(&key, 0, sizeof key);
    key.type = type;
    key.line = line;
    if ((a && !(key.a = vt_intern(s, a, strlen(a)))) ||
        (b && !(key.b = vt_intern(s, b, strlen(b)))))
        return -1;
    vt_frame_ent *e;
    HASH_FIND(hh, s->frame_index, &key, sizeof key, e);
    if (e)
        return e->id;
    if (vt_grow(&s->frames, &s->frames_cap, s->nframes + 1, sizeof *s->frames, 16) ||
        !(e = calloc(1, sizeof *e)))
        return -1;
    e->key = key;
    e->id = (int32_t)s->nframes;
    vt_iframe *f = &s->frames[s->nframes++];
    *f = (vt_iframe){.type = type, .line = line, .a = key.a, .b = key.b};
    f->evidence = evidence_of(f);
    HASH_ADD(hh, s->frame_index, key, sizeof key, e);
    return e->id;
}

int32_t vt_iframe_python(vt_isites *s, const char *file, const char *function, int32_t line)
{
    return frame_intern(s, VT_FRAME_PYTHON, file ? file : "?", function ? function : "?", line);
}

int32_t vt_iframe_native(vt_isites *s, const char *module, const char *symbol)
{
    return frame_intern(s, VT_FRAME_NATIVE, module, symbol ? symbol : "?", -1);
}

int32_t vt_iframe_op(vt_isites *s, const char *name)
{
    return frame_intern(s, VT_FRAME_OP, name, NULL, -1);
}

int32_t vt_iframe_kineto_python(vt_isites *s, const char *name)
{
    /* "path/file.py(123): function" */
    const char *close = strstr(name, "): ");
    const char *open = close ? close : NULL;
    while (open && open > name && *open != '(')
        open--;
    if (close && open > name && *open == '(' && open + 1 < close) {
        char *end;
        long line = strtol(open + 1, &end, 10);
        if (end == close && line >= 0 && line <= INT32_MAX) {
            size_t flen = (size_t)(open - name);
            const char *file = vt_intern(s, name, flen);
            return file ? vt_iframe_python(s, file, close + 3, (int32_t)line) : -1;
        }
    }
    /* "<built-in method add_ of Tensor object at 0x7f...>": the address changes every run */
    size_t len = strlen(name);
    char *clean = malloc(len + 1);
    if (!clean)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (!strncmp(name + i, " at 0x", 6)) {
            size_t j = i + 6;
            while (j < len && strchr("0123456789abcdefABCDEF", name[j]))
                j++;
            if (j > i + 6) {
                i = j - 1;
                continue;
            }
        }
        clean[o++] = name[i];
    }
    clean[o] = 0;
    int32_t id = vt_iframe_op(s, clean);
    free(clean);
    return id;
}

int32_t vt_isite(vt_isites *s, const int32_t *frames, size_t n)
{
    vt_site_ent *e;
    HASH_FIND(hh, s->site_index, frames, n * sizeof *frames, e);
    if (e)
        return e->id;
    if (vt_grow(&s->sites, &s->sites_cap, s->nsites + 1, sizeof *s->sites, 16) ||
        !(e = malloc(sizeof *e + n * sizeof *frames)))
        return -1;
    e->id = (int32_t)s->nsites;
    e->n = n;
    e->evidence = 0;
    e->python = false;
    memcpy(e->frames, frames, n * sizeof *frames);
    for (size_t i = 0; i < n; i++) {
        e->evidence |= s->frames[frames[i]].evidence;
        e->python |= s->frames[frames[i]].type == VT_FRAME_PYTHON;
    }
    HASH_ADD_KEYPTR(hh, s->site_index, e->frames, n * sizeof *frames, e);
    s->sites[s->nsites++] = e;
    return e->id;
}

const int32_t *vt_isite_frames(const vt_isites *s, int32_t site, size_t *n)
{
    *n = s->sites[site]->n;
    return s->sites[site]->frames;
}

uint8_t vt_isite_evidence(const vt_isites *s, int32_t site)
{
    return s->sites[site]->evidence;
}

bool vt_isite_has_python(const vt_isites *s, int32_t site)
{
    return s->sites[site]->python;
}

/* FNV-1a over the frames' text: it depends only on what the frames name, never on interning
 * order, so the same code path hashes alike in every file. */
static uint64_t fnv(uint64_t h, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

static uint64_t fnv_str(uint64_t h, const char *p)
{
    return fnv(p ? fnv(h, p, strlen(p)) : h, "\x1f", 1);
}

void vt_isite_signature(const vt_isites *s, int32_t site, char out[17])
{
    static const char *const type_tag[] = {"py", "native", "op"};
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    const vt_site_ent *e = s->sites[site];
    for (size_t i = 0; i < e->n; i++) {
        const vt_iframe *f = &s->frames[e->frames[i]];
        char line[16];
        snprintf(line, sizeof line, "%d", (int)f->line);
        h = fnv_str(h, type_tag[f->type]);
        h = fnv_str(h, f->a);
        h = fnv_str(h, f->b);
        h = fnv_str(h, line);
    }
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

void vt_isites_free(vt_isites *s)
{
    vt_str_ent *se, *stmp;
    HASH_ITER(hh, s->strs, se, stmp)
    {
        HASH_DEL(s->strs, se);
        free(se);
    }
    vt_frame_ent *fe, *ftmp;
    HASH_ITER(hh, s->frame_index, fe, ftmp)
    {
        HASH_DEL(s->frame_index, fe);
        free(fe);
    }
    HASH_CLEAR(hh, s->site_index);
    for (size_t i = 0; i < s->nsites; i++)
        free(s->sites[i]);
    free(s->sites);
    free(s->frames);
    memset(s, 0, sizeof *s);
}
