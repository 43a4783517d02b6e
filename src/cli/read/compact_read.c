#include <stdlib.h>
#include <string.h>

#include "compact_read.h"
#include "snapshot_keys.h"

static int names_of(json_t *compact, const char *key, const char ***out, size_t *n, vt_err *err)
{
    json_t *a = json_object_get(compact, key);
    if (!json_is_array(a)) {
        vt_err_set(err, "%s.%s: missing or not an array", VT_K_COMPACT, key);
        return -1;
    }
    *n = json_array_size(a);
    *out = calloc(*n + 1, sizeof **out);
    if (!*out) {
        vt_err_set(err, "%s: out of memory", VT_K_COMPACT);
        return -1;
    }
    for (size_t i = 0; i < *n; i++) {
        (*out)[i] = json_string_value(json_array_get(a, i));
        if (!(*out)[i]) {
            vt_err_set(err, "%s.%s[%zu]: not a string", VT_K_COMPACT, key, i);
            return -1;
        }
    }
    return 0;
}

int vt_cnames_load(json_t *root, vt_cnames *n, vt_err *err)
{
    memset(n, 0, sizeof *n);
    json_t *c = json_object_get(root, VT_K_COMPACT);
    if (!json_is_object(c)) {
        vt_err_set(err, "%s: missing or not an object", VT_K_COMPACT);
        return -1;
    }
    if (names_of(c, "apis", &n->apis, &n->napis, err) ||
        names_of(c, "kinds", &n->kinds, &n->nkinds, err) ||
        names_of(c, "phases", &n->phases, &n->nphases, err) ||
        names_of(c, "categories", &n->categories, &n->ncategories, err))
        return -1;
    n->kind_of = malloc((n->nkinds + 1) * sizeof *n->kind_of);
    n->phase_of = malloc((n->nphases + 1) * sizeof *n->phase_of);
    n->category_of = malloc((n->ncategories + 1) * sizeof *n->category_of);
    if (!n->kind_of || !n->phase_of || !n->category_of) {
        vt_err_set(err, "%s: out of memory", VT_K_COMPACT);
        return -1;
    }
    for (size_t i = 0; i < n->nkinds; i++)
        n->kind_of[i] = vt_alloc_kind_of(n->kinds[i], strlen(n->kinds[i]));
    for (size_t i = 0; i < n->nphases; i++)
        n->phase_of[i] = vt_phase_of(n->phases[i], strlen(n->phases[i]));
    for (size_t i = 0; i < n->ncategories; i++)
        n->category_of[i] = vt_label_category(n->categories[i], strlen(n->categories[i]));
    return 0;
}

void vt_cnames_free(vt_cnames *n)
{
    free(n->apis);
    free(n->kinds);
    free(n->phases);
    free(n->categories);
    free(n->kind_of);
    free(n->phase_of);
    free(n->category_of);
    memset(n, 0, sizeof *n);
}

int vt_csection_start(const uint8_t *p, size_t len, vt_creader *r, size_t *count, vt_err *err)
{
    *r = (vt_creader){p, p + len, false, NULL, 0};
    uint64_t n = vt_creader_varint(r);
    if (r->bad || n > (uint64_t)(r->end - r->p)) {
        vt_err_set(err, "the section's record count is damaged");
        return -1;
    }
    *count = (size_t)n;
    return 0;
}

static int implausible(vt_err *err, const char *key, uint64_t v, int64_t hi)
{
    vt_err_set(err, "%s: %llu is not plausible (expected 0 to %lld)", key, (unsigned long long)v,
               (long long)hi);
    return -1;
}

static int moment(const vt_cnames *nm, const vt_alloc_limits *lim, const char *key, uint64_t phase,
                  uint64_t step, uint64_t instance, vt_moment *m, vt_err *err)
{
    if (phase >= nm->nphases || nm->phase_of[phase] == VT_NPHASES) {
        vt_err_set(err, "%s.phase: %llu does not index a phase of %s.phases", key,
                   (unsigned long long)phase, VT_K_COMPACT);
        return -1;
    }
    if (step > (uint64_t)lim->steps)
        return implausible(err, key, step, lim->steps);
    if (instance > (uint64_t)VT_MAX_COUNT)
        return implausible(err, key, instance, VT_MAX_COUNT);
    *m = (vt_moment){nm->phase_of[phase], (int64_t)step, (int64_t)instance};
    return 0;
}

static int labels(const vt_crec *c, const vt_cnames *nm, vt_alloc *a, vt_err *err)
{
    vt_label_range *r = malloc(c->nlabels * sizeof *r);
    if (!r) {
        vt_err_set(err, "labels: out of memory");
        return -1;
    }
    size_t used = 0;
    for (size_t i = 0; i < c->nlabels; i++) {
        const vt_clabel *l = &c->labels[i];
        if (l->off > c->size || l->bytes > c->size - l->off) {
            vt_err_set(err, "labels[%zu]: bytes %llu to %llu lie outside the allocation (%llu)", i,
                       (unsigned long long)l->off, (unsigned long long)(l->off + l->bytes),
                       (unsigned long long)c->size);
            free(r);
            return -1;
        }
        if (l->cat >= nm->ncategories) {
            vt_err_set(err, "labels[%zu]: %llu does not index a category of %s.categories", i,
                       (unsigned long long)l->cat, VT_K_COMPACT);
            free(r);
            return -1;
        }
        if (nm->category_of[l->cat] >= 0)
            r[used++] = (vt_label_range){(int64_t)l->off, (int64_t)(l->off + l->bytes),
                                         nm->category_of[l->cat]};
    }
    int rc = vt_labels_sum(r, used, a);
    free(r);
    if (rc)
        vt_err_set(err, "labels: out of memory");
    return rc;
}

static int to_alloc(const vt_crec *c, const vt_cnames *nm, const vt_alloc_limits *lim, vt_alloc *a,
                    vt_err *err)
{
    if (c->id > (uint64_t)VT_MAX_COUNT)
        return implausible(err, "id", c->id, VT_MAX_COUNT);
    if (c->birth_seq > (uint64_t)VT_MAX_COUNT)
        return implausible(err, "birth_seq", c->birth_seq, VT_MAX_COUNT);
    if (c->dead && c->death_seq > (uint64_t)VT_MAX_COUNT)
        return implausible(err, "death_seq", c->death_seq, VT_MAX_COUNT);
    if (c->size > (uint64_t)VT_MAX_BYTES) {
        vt_err_set(err, "size: %llu is not a plausible number of bytes (expected 0 to 1 PiB)",
                   (unsigned long long)c->size);
        return -1;
    }
    if (c->device > VT_MAX_DEVICE || lim->device_index[c->device] < 0) {
        vt_err_set(err, "device: %llu is not in devices[]", (unsigned long long)c->device);
        return -1;
    }
    if (c->api >= nm->napis || c->kind >= nm->nkinds) {
        vt_err_set(err, "%s: %llu does not index %s.%s", c->api >= nm->napis ? "api" : "kind",
                   (unsigned long long)(c->api >= nm->napis ? c->api : c->kind), VT_K_COMPACT,
                   c->api >= nm->napis ? "apis" : "kinds");
        return -1;
    }
    if (c->mpath > lim->nmpaths) {
        vt_err_set(err, "module path: %llu is not an index into %s[] (the file has %zu)",
                   (unsigned long long)(c->mpath - 1), VT_K_MODULE_PATHS, lim->nmpaths);
        return -1;
    }
    if (c->site != VT_CREC_NO_SITE && c->site >= lim->nsites) {
        vt_err_set(err, "site: %llu is not an index into sites[] (the file has %zu)",
                   (unsigned long long)c->site, lim->nsites);
        return -1;
    }
    if (moment(nm, lim, "birth", c->birth_phase, c->birth_step, c->birth_instance, &a->birth,
               err) ||
        (c->dead && moment(nm, lim, "death", c->death_phase, c->death_step, c->death_instance,
                           &a->death, err)))
        return -1;
    if (c->dead && vt_alloc_death_check(a, err))
        return -1;
    a->id = (int64_t)c->id;
    a->size = (int64_t)c->size;
    a->birth_seq = (int64_t)c->birth_seq;
    a->death_seq = c->dead ? (int64_t)c->death_seq : -1;
    a->site = c->site == VT_CREC_NO_SITE ? -1 : (int32_t)c->site;
    a->mpath = c->mpath ? (int32_t)(c->mpath - 1) : -1;
    a->recomputed = c->recomputed;
    a->device = (int32_t)c->device;
    a->kind = (uint8_t)nm->kind_of[c->kind];
    a->alive_at_end = !c->dead;
    return c->nlabels ? labels(c, nm, a, err) : 0;
}

static int section_end(const vt_creader *r, size_t count, size_t *at, vt_err *err)
{
    *at = count;
    if (r->p == r->end)
        return 0;
    vt_err_set(err, "bytes after the last record");
    return -1;
}

int vt_callocs_read(vt_creader *r, size_t count, const vt_cnames *names, const vt_alloc_limits *lim,
                    vt_alloc *out, size_t *at, vt_err *err)
{
    vt_cdelta d = {0};
    for (size_t i = 0; i < count; i++) {
        vt_crec c;
        *at = i;
        if (vt_crec_get(r, &d, &c)) {
            vt_err_set(err, "the record is damaged or cut short");
            return -1;
        }
        if (to_alloc(&c, names, lim, &out[i], err))
            return -1;
    }
    return section_end(r, count, at, err);
}

int vt_cevents_read(vt_creader *r, size_t count, vt_hevent *events, int64_t *ids, size_t *at,
                    vt_err *err)
{
    vt_cdelta d = {0};
    for (size_t i = 0; i < count; i++) {
        vt_cevent e;
        *at = i;
        if (vt_cevent_get(r, &d, &e)) {
            vt_err_set(err, "the record is damaged or cut short");
            return -1;
        }
        if (e.time_us > (uint64_t)(VT_MAX_TIME_S * 1e6)) {
            vt_err_set(err, "%g is not a plausible time in seconds", (double)e.time_us / 1e6);
            return -1;
        }
        if (e.bytes == 0 || e.bytes > VT_MAX_BYTES || e.bytes < -VT_MAX_BYTES) {
            vt_err_set(err, "%lld is not a plausible number of bytes", (long long)e.bytes);
            return -1;
        }
        if (e.id > (uint64_t)VT_MAX_COUNT)
            return implausible(err, "id", e.id, VT_MAX_COUNT);
        events[i].t = (double)e.time_us / 1e6;
        events[i].bytes = e.bytes;
        ids[i] = (int64_t)e.id;
    }
    return section_end(r, count, at, err);
}
