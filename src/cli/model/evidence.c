/* What decides each byte's category, strongest first (docs/categories.md):
 *
 * 1. identity: labels the framework hooks or the program put on address ranges (the
 *    allocation's `labels`); a label may cover part of an allocation;
 * 2. stack: the allocation's stack names a library workspace (the list below), which is
 *    temporary whatever its lifetime (so is a block from before a recording window that has no
 *    stack and the size of PyTorch's default cuBLAS workspace); in an imported recording, a
 *    birth phase the importer took from the allocation's own stack (optimizer frames,
 *    autograd's engine thread);
 * 3. timing: classify.c's rules, for everything else. */
#include <stdlib.h>
#include <string.h>

#include "snapshot.h"

/* Library workspaces, recognised by a frame of their stack: a module whose file name starts
 * with `module`, or a native symbol or op name containing `symbol`. */
static const struct {
    const char *module, *symbol;
} workspaces[] = {
    {NULL, "getNewWorkspace"},        /* PyTorch's cuBLAS workspace, at::cuda::getNewWorkspace */
    {NULL, "getCUDABlasLtWorkspace"}, /* PyTorch's cuBLASLt workspace */
    {"libcublas", NULL},              /* cuBLAS and cuBLASLt (libcublasLt) themselves */
    {"libcudnn", NULL},               /* cuDNN and its engine libraries */
    {"libnccl", NULL},                /* NCCL's own buffers (channels, proxies, registrations) */
    {"libcufft", NULL},
    {"libcusparse", NULL},
    {"libcusolver", NULL},
};

/* PyTorch's default cuBLAS workspace on GPUs before Hopper, 4096 KiB x 2 + 16 KiB x 8 (the
 * default of CUBLAS_WORKSPACE_CONFIG), made once per handle (the main thread's and autograd's):
 * a block of this size from before a recording window has no stack to say what it is, and
 * billed by timing it would be a parameter. No tensor of a model is usually this size; Hopper's
 * default (32 MiB) is, so it is not recognised by size. */
static const int64_t cublas_default_workspace = 4096 * 1024 * 2 + 16 * 1024 * 8;

enum { EV_UNKNOWN, EV_NONE, EV_WORKSPACE };

static const char *const evidence_keys[VT_NEVIDENCE] = {"identity", "stack", "timing"};

const char *vt_evidence_key(vt_evidence e)
{
    return evidence_keys[e];
}

static bool frame_is_workspace(const vt_frame *f)
{
    if (f->python)
        return false;
    const char *base = f->module ? strrchr(f->module, '/') : NULL;
    base = base ? base + 1 : f->module;
    for (size_t i = 0; i < sizeof workspaces / sizeof workspaces[0]; i++) {
        if (workspaces[i].module && base &&
            !strncmp(base, workspaces[i].module, strlen(workspaces[i].module)))
            return true;
        if (workspaces[i].symbol && f->symbol && strstr(f->symbol, workspaces[i].symbol))
            return true;
    }
    return false;
}

/* What the names of one kind share: the modules' at their start, the symbols' at their end. */
static void shared_part(bool symbols, const char **part, size_t *len)
{
    *part = NULL;
    *len = 0;
    for (size_t i = 0; i < sizeof workspaces / sizeof workspaces[0]; i++) {
        const char *w = symbols ? workspaces[i].symbol : workspaces[i].module;
        if (!w)
            continue;
        size_t n = strlen(w), k = 0;
        if (!*part) {
            *part = w;
            *len = n;
            continue;
        }
        while (k < *len && k < n &&
               (symbols ? (*part)[*len - 1 - k] == w[n - 1 - k] : (*part)[k] == w[k]))
            k++;
        if (symbols)
            *part += *len - k;
        *len = k;
    }
}

/* The first part[0..n) in [t, end), or NULL: its first character is looked for with memchr,
 * faster than memmem on these texts. */
static const char *find_part(const char *t, const char *end, const char *part, size_t n)
{
    if (!n)
        return t;
    for (; (t = memchr(t, part[0], (size_t)(end - t))); t++)
        if ((size_t)(end - t) >= n && !memcmp(t, part, n))
            return t;
    return NULL;
}

/* A site's text is searched before it is parsed: most stacks name no workspace, and parsing
 * every stack of a large snapshot costs more than the rest of the report. A job's report
 * searches hundreds of thousands of stacks, so the text is searched for what the symbols share
 * ("Workspace") and for what the modules' names share ("libc"), and each module is compared
 * only there. */
static bool text_may_name_workspace(const vt_site *site)
{
    const char *sym, *mod, *t = site->text, *end = t + site->len;
    size_t sym_len, mod_len;
    shared_part(true, &sym, &sym_len);
    shared_part(false, &mod, &mod_len);
    if (find_part(t, end, sym, sym_len))
        return true;
    for (const char *p = t; (p = find_part(p, end, mod, mod_len)); p++)
        for (size_t i = 0; i < sizeof workspaces / sizeof workspaces[0]; i++) {
            const char *m = workspaces[i].module;
            if (m && (size_t)(end - p) >= strlen(m) && !memcmp(p, m, strlen(m)))
                return true;
        }
    return false;
}

static int site_evidence(vt_snapshot *snap, int32_t site, bool *workspace, vt_err *err)
{
    *workspace = false;
    if (site < 0)
        return 0;
    if (!snap->site_evidence && !(snap->site_evidence = calloc(snap->nsites, 1))) {
        vt_err_set(err, "%s: out of memory", snap->path);
        return -1;
    }
    uint8_t *ev = &snap->site_evidence[site];
    if (*ev == EV_UNKNOWN) {
        *ev = EV_NONE;
        if (text_may_name_workspace(&snap->sites[site])) {
            if (vt_site_load(snap, (size_t)site, err))
                return -1;
            const vt_site *s = &snap->sites[site];
            for (size_t i = 0; i < s->nframes && *ev == EV_NONE; i++)
                if (frame_is_workspace(&s->frames[i]))
                    *ev = EV_WORKSPACE;
        }
    }
    *workspace = *ev == EV_WORKSPACE;
    return 0;
}

/* Whether a's stack names a library workspace (or, without a stack, its size does). */
static int is_workspace(vt_snapshot *snap, const vt_alloc *a, bool *ws, vt_err *err)
{
    if (site_evidence(snap, a->site, ws, err))
        return -1;
    *ws |= a->site < 0 && a->before_window && a->size == cublas_default_workspace;
    return 0;
}

int vt_category_of(vt_snapshot *snap, const vt_alloc *a, bool native, vt_category *out, vt_err *err)
{
    for (int c = 0; a->labelled && c < VT_NLABELLED; c++)
        if (2 * a->labelled[c] >= a->size) {
            *out = (vt_category)c;
            return 0;
        }
    bool ws = false;
    if (!native && is_workspace(snap, a, &ws, err))
        return -1;
    *out = native ? VT_CAT_UNATTRIBUTED_PERSISTENT
           : ws   ? VT_CAT_TEMPORARY
                  : vt_classify(a, snap->phase_markers, snap->steps);
    return 0;
}

int vt_split_alloc(vt_snapshot *snap, const vt_alloc *a, bool native,
                   int64_t bytes[VT_NCATS][VT_NEVIDENCE], int64_t *workspace, vt_err *err)
{
    int64_t rest = a->size;
    for (int c = 0; a->labelled && c < VT_NLABELLED; c++) {
        bytes[c][VT_EV_IDENTITY] += a->labelled[c];
        rest -= a->labelled[c];
    }
    if (rest <= 0)
        return 0;
    if (native) {
        bytes[VT_CAT_UNATTRIBUTED_PERSISTENT][VT_EV_TIMING] += rest;
        return 0;
    }
    bool ws;
    if (is_workspace(snap, a, &ws, err))
        return -1;
    if (ws) {
        bytes[VT_CAT_TEMPORARY][VT_EV_STACK] += rest;
        *workspace += rest;
        return 0;
    }
    vt_category c = vt_classify(a, snap->phase_markers, snap->steps);
    bool by_stack = a->birth_from_stack && (c == VT_CAT_OPTIMIZER_STATE || c == VT_CAT_GRADIENTS);
    bytes[c][by_stack ? VT_EV_STACK : VT_EV_TIMING] += rest;
    return 0;
}
