/* One element of `allocations` or `history_allocations`: the pieces load.c's tree reader shares,
 * and a fast reader on yajl's events. A job's report reads hundreds of snapshots of thousands of
 * allocations each; jansson builds a tree of every element (a hash table per object, a block per
 * value) and spends about 13 us on one, yajl's events cost a seventh of that. The fast reader
 * takes only what it can read with certainty and hands everything else to the tree reader,
 * which stays the one that explains a bad element. */
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_parse.h>

#include "alloc_read.h"
#include "grow.h"

/* A name with its length: keys are compared by length first. */
typedef struct {
    const char *s;
    size_t n;
} word;
#define NAME(lit)                                                                                  \
    {                                                                                              \
        lit, sizeof lit - 1                                                                        \
    }

static const word label_names[VT_NLABELLED] = {NAME("parameters"), NAME("gradients"),
                                               NAME("optimizer_state"), NAME("activations"),
                                               NAME("temporary")};

static bool is(const char *s, size_t n, word want)
{
    return want.n == n && n && s[0] == want.s[0] && !memcmp(s, want.s, n);
}

/* index of s[0..n) in names[0..count), -1 when absent */
static int find(const char *s, size_t n, const word *names, int count)
{
    for (int i = 0; i < count; i++)
        if (is(s, n, names[i]))
            return i;
    return -1;
}

int vt_label_category(const char *name, size_t n)
{
    return find(name, n, label_names, VT_NLABELLED);
}

vt_alloc_kind vt_alloc_kind_of(const char *name, size_t n)
{
    static const word kinds[] = {NAME("device"), NAME("managed"), NAME("pool"), NAME("vmm"),
                                 NAME("segment")};
    int k = find(name, n, kinds, (int)(sizeof kinds / sizeof kinds[0]));
    return k < 0 ? VT_KIND_OTHER : (vt_alloc_kind)k;
}

static int by_offset(const void *pa, const void *pb)
{
    const vt_label_range *a = pa, *b = pb;
    return (a->off > b->off) - (a->off < b->off);
}

int vt_labels_sum(vt_label_range *r, size_t n, vt_alloc *a)
{
    if (!(a->labelled = calloc(VT_NLABELLED, sizeof *a->labelled)))
        return -1;
    qsort(r, n, sizeof *r, by_offset);
    int64_t covered = 0; /* bytes below this offset are counted */
    for (size_t i = 0; i < n; i++) {
        int64_t from = r[i].off > covered ? r[i].off : covered;
        if (r[i].end > from) {
            a->labelled[r[i].cat] += r[i].end - from;
            covered = r[i].end;
        }
    }
    return 0;
}

bool vt_alloc_same(const vt_alloc *a, const vt_alloc *b)
{
    vt_alloc x = *a, y = *b;
    x.labelled = y.labelled = NULL;
    if (memcmp(&x, &y, sizeof x) || !a->labelled != !b->labelled)
        return false;
    return !a->labelled || !memcmp(a->labelled, b->labelled, VT_NLABELLED * sizeof *a->labelled);
}

/* --- the fast reader -------------------------------------------------------------------- */

/* keys of the element, of a moment (birth, death) and of a label */
enum {
    K_ID,
    K_BIRTH_SEQ,
    K_DEATH_SEQ,
    K_SIZE,
    K_DEVICE,
    K_KIND,
    K_SITE,
    K_BIRTH,
    K_DEATH,
    K_FROM,
    K_BEFORE,
    K_LABELS,
    K_MPATH,
    K_RECOMPUTED,
    NKEYS,
    K_OTHER = NKEYS
};
static const word keys[NKEYS] = {NAME("id"),
                                 NAME("birth_seq"),
                                 NAME("death_seq"),
                                 NAME("size"),
                                 NAME("device"),
                                 NAME("kind"),
                                 NAME("site"),
                                 NAME("birth"),
                                 NAME("death"),
                                 NAME("birth_phase_from"),
                                 NAME("before_window"),
                                 NAME("labels"),
                                 NAME("module_path"),
                                 NAME("recomputed")};
enum { M_PHASE, M_STEP, M_INSTANCE, NMOMENT };
static const word moment_keys[NMOMENT] = {NAME("phase"), NAME("step"), NAME("instance")};
enum { L_OFFSET, L_BYTES, L_CATEGORY, NLABEL };
static const word label_keys[NLABEL] = {NAME("offset"), NAME("bytes"), NAME("category")};

typedef enum { V_ABSENT, V_NULL, V_TRUE, V_INT, V_STR, V_OBJECT, V_ARRAY, V_OTHER } vtype;

typedef struct {
    vtype t;
    long long i;
    const char *s; /* V_STR: in the element's text (it has no escapes) */
    size_t n;
} slot;

#define MAX_OTHER 32 /* keys of the element this reader does not use, checked for duplicates */

typedef struct {
    int depth; /* 1: in the element, 2: in a moment or in labels, 3: in a label */
    int outer; /* at depth 2 and 3: the element's key holding it */
    int key;   /* the innermost object's key whose value comes next */
    slot top[NKEYS + 1], moment[2][NMOMENT], label[NLABEL];
    slot *cur; /* the innermost object's slots */
    int ncur;
    bool done; /* the element's object closed */
    const char *other[MAX_OTHER];
    size_t other_n[MAX_OTHER], nother;
    vt_label_range *ranges; /* every label, category -1 when unknown */
    size_t nranges, cap;
} reader;

/* Strings are taken in ASCII only: jansson checks UTF-8 more strictly than yajl. */
static bool ascii(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] >= 0x80)
            return false;
    return true;
}

/* The slot of the value that comes next, NULL when it is not one this reader takes. */
static slot *next_slot(reader *r)
{
    if (r->depth == 2 && r->outer == K_LABELS)
        return NULL; /* an element of labels that is not an object */
    return r->key < 0 ? NULL : &r->cur[r->key];
}

static int put(reader *r, vtype t, long long i, const unsigned char *s, size_t n)
{
    slot *sl = next_slot(r);
    if (!sl)
        return 0;
    *sl = (slot){t, i, (const char *)s, n};
    r->key = -1;
    return 1;
}

static int on_null(void *ctx)
{
    return put(ctx, V_NULL, 0, NULL, 0);
}

static int on_bool(void *ctx, int b)
{
    return put(ctx, b ? V_TRUE : V_OTHER, 0, NULL, 0);
}

static int on_integer(void *ctx, long long i)
{
    return put(ctx, V_INT, i, NULL, 0);
}

static int on_double(void *ctx, double d)
{
    (void)d;
    return put(ctx, V_OTHER, 0, NULL, 0);
}

static int on_string(void *ctx, const unsigned char *s, size_t n)
{
    return ascii(s, n) && put(ctx, V_STR, 0, s, n);
}

static int on_key(void *ctx, const unsigned char *k, size_t n)
{
    reader *r = ctx;
    if (!ascii(k, n))
        return 0;
    const word *names = r->depth == 1 ? keys : r->depth == 3 ? label_keys : moment_keys;
    r->key = find((const char *)k, n, names, r->ncur);
    if (r->key >= 0)
        return r->cur[r->key].t == V_ABSENT; /* a key twice: the tree reader refuses it */
    if (r->depth != 1 || r->nother == MAX_OTHER)
        return 0;
    for (size_t i = 0; i < r->nother; i++)
        if (r->other_n[i] == n && n && r->other[i][0] == k[0] && !memcmp(r->other[i], k, n))
            return 0;
    r->other[r->nother] = (const char *)k;
    r->other_n[r->nother++] = n;
    r->key = K_OTHER;
    return 1;
}

static int on_start_map(void *ctx)
{
    reader *r = ctx;
    if (r->depth == 0) {
        r->depth = 1;
        r->cur = r->top;
        r->ncur = NKEYS;
        r->key = -1;
        return 1;
    }
    if (r->depth == 1 && (r->key == K_BIRTH || r->key == K_DEATH)) {
        r->top[r->key].t = V_OBJECT;
        r->outer = r->key;
        r->cur = r->moment[r->key == K_DEATH];
        r->ncur = NMOMENT;
    } else if (r->depth == 2 && r->outer == K_LABELS) {
        memset(r->label, 0, sizeof r->label);
        r->cur = r->label;
        r->ncur = NLABEL;
    } else {
        return 0; /* a nested value this reader does not take */
    }
    r->depth++;
    r->key = -1;
    return 1;
}

static int end_label(reader *r)
{
    const slot *l = r->label;
    if (l[L_OFFSET].t != V_INT || l[L_BYTES].t != V_INT || l[L_CATEGORY].t != V_STR ||
        l[L_OFFSET].i < 0 || l[L_OFFSET].i > VT_MAX_BYTES || l[L_BYTES].i < 0 ||
        l[L_BYTES].i > VT_MAX_BYTES)
        return 0;
    if (vt_grow(&r->ranges, &r->cap, r->nranges + 1, sizeof *r->ranges, 8))
        return 0;
    r->ranges[r->nranges++] = (vt_label_range){l[L_OFFSET].i, l[L_OFFSET].i + l[L_BYTES].i,
                                               vt_label_category(l[L_CATEGORY].s, l[L_CATEGORY].n)};
    return 1;
}

static int on_end_map(void *ctx)
{
    reader *r = ctx;
    if (r->depth == 3 && !end_label(r))
        return 0;
    r->depth--;
    if (r->depth == 0)
        r->done = true;
    r->cur = r->depth == 1 ? r->top : NULL;
    r->ncur = r->depth == 1 ? NKEYS : 0;
    r->key = -1;
    return 1;
}

static int on_start_array(void *ctx)
{
    reader *r = ctx;
    if (r->depth != 1 || r->key != K_LABELS)
        return 0;
    r->top[K_LABELS].t = V_ARRAY;
    r->outer = K_LABELS;
    r->depth = 2;
    r->key = -1;
    return 1;
}

static int on_end_array(void *ctx)
{
    reader *r = ctx;
    r->depth = 1;
    r->cur = r->top;
    r->ncur = NKEYS;
    r->key = -1;
    return 1;
}

static const yajl_callbacks callbacks = {on_null,    on_bool,        on_integer,   on_double,
                                         NULL,       on_string,      on_start_map, on_key,
                                         on_end_map, on_start_array, on_end_array};

/* An integer in lo..hi, or, when nullable, absent or null (-1). */
static bool int_in(const slot *s, int64_t lo, int64_t hi, bool nullable, int64_t *out)
{
    if (nullable && (s->t == V_ABSENT || s->t == V_NULL)) {
        *out = -1;
        return true;
    }
    *out = s->i;
    return s->t == V_INT && s->i >= lo && s->i <= hi;
}

static bool moment(const slot *m, int64_t steps, vt_moment *out)
{
    if (m[M_PHASE].t != V_STR)
        return false;
    out->phase = vt_phase_of(m[M_PHASE].s, m[M_PHASE].n);
    return out->phase < VT_NPHASES && int_in(&m[M_STEP], 0, steps, false, &out->step) &&
           int_in(&m[M_INSTANCE], 0, VT_MAX_COUNT, false, &out->instance);
}

/* The element's values, checked as load.c's alloc_fields checks them. */
static bool finish(reader *r, const vt_alloc_limits *lim, vt_alloc *a)
{
    const slot *t = r->top;
    int64_t id, birth_seq, death_seq, size, device, site, mpath;
    vt_moment birth, death; /* copied whole: padding zeroed like the tree reader's calloc */
    memset(&birth, 0, sizeof birth);
    memset(&death, 0, sizeof death);
    bool dead = t[K_DEATH].t == V_OBJECT;
    if (!int_in(&t[K_ID], 0, VT_MAX_COUNT, true, &id) ||
        !int_in(&t[K_BIRTH_SEQ], 0, VT_MAX_COUNT, true, &birth_seq) ||
        !int_in(&t[K_DEATH_SEQ], 0, VT_MAX_COUNT, true, &death_seq) ||
        !int_in(&t[K_SIZE], 0, VT_MAX_BYTES, false, &size) ||
        !int_in(&t[K_DEVICE], 0, VT_MAX_DEVICE, false, &device) || t[K_KIND].t != V_STR ||
        !int_in(&t[K_SITE], 0, (int64_t)lim->nsites - 1, true, &site) ||
        !int_in(&t[K_MPATH], 0, (int64_t)lim->nmpaths - 1, true, &mpath) ||
        !(t[K_RECOMPUTED].t == V_TRUE || t[K_RECOMPUTED].t == V_ABSENT) ||
        t[K_BIRTH].t != V_OBJECT || !moment(r->moment[0], lim->steps, &birth) ||
        !(dead || t[K_DEATH].t == V_ABSENT || t[K_DEATH].t == V_NULL) ||
        (dead && !moment(r->moment[1], lim->steps, &death)) || lim->device_index[device] < 0 ||
        (dead && (death.step < birth.step || death.instance < birth.instance)) ||
        !(t[K_LABELS].t == V_ARRAY || t[K_LABELS].t == V_ABSENT || t[K_LABELS].t == V_NULL))
        return false;
    size_t known = 0;
    for (size_t i = 0; i < r->nranges; i++) {
        if (r->ranges[i].end > size)
            return false;
        if (r->ranges[i].cat >= 0)
            r->ranges[known++] = r->ranges[i];
    }
    a->labelled = NULL;
    if (r->nranges && vt_labels_sum(r->ranges, known, a))
        return false;
    a->id = id;
    a->birth_seq = birth_seq;
    a->death_seq = death_seq;
    a->size = size;
    a->device = (int32_t)device;
    a->site = (int32_t)site;
    a->mpath = (int32_t)mpath;
    a->recomputed = t[K_RECOMPUTED].t == V_TRUE;
    a->kind = (uint8_t)vt_alloc_kind_of(t[K_KIND].s, t[K_KIND].n);
    a->birth = birth;
    if (dead)
        a->death = death;
    a->alive_at_end = !dead;
    a->birth_from_stack =
        t[K_FROM].t == V_STR && is(t[K_FROM].s, t[K_FROM].n, (word)NAME("allocation_stack"));
    a->before_window = t[K_BEFORE].t == V_TRUE;
    return true;
}

bool vt_alloc_sax(const vt_alloc_limits *lim, const char *text, size_t len, vt_alloc *a)
{
    /* Escapes would give strings outside the text, and jansson and yajl differ on some. */
    if (!len || text[0] != '{' || memchr(text, '\\', len))
        return false;
    reader r = {0};
    r.key = -1;
    yajl_handle h = yajl_alloc(&callbacks, NULL, &r);
    bool ok = h && yajl_parse(h, (const unsigned char *)text, len) == yajl_status_ok &&
              yajl_complete_parse(h) == yajl_status_ok && r.done && finish(&r, lim, a);
    if (h)
        yajl_free(h);
    free(r.ranges);
    return ok;
}

int vt_alloc_death_check(const vt_alloc *a, vt_err *err)
{
    if (a->death.step >= a->birth.step && a->death.instance >= a->birth.instance)
        return 0;
    vt_err_set(err,
               "death: step %lld, instance %lld comes before its birth (step %lld, instance %lld)",
               (long long)a->death.step, (long long)a->death.instance, (long long)a->birth.step,
               (long long)a->birth.instance);
    return -1;
}
