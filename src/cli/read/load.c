/* Reading and validating snapshots. Every value the reporter uses is checked here for type and
 * plausibility, so a bad file ends in one line naming the file and the key, never a crash or a
 * silently wrong bill. Keys the reporter does not use are left alone: the format lets newer
 * libraries add them. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "grow.h"
#include "snapshot.h"
#include "alloc_read.h"
#include "compact_read.h"
#include "split.h"
#include "snapshot_keys.h"

#define MAX_PID INT32_MAX
#define MAX_WORLD (1 << 20) /* processes in a job: the report lists the ranks missing */
/* Below this many allocations threads cost more than they save. */
#define PARALLEL_MIN 8192
#define MAX_THREADS 8

/* A message is one line on stderr whatever it quotes: a parser's "near '...'" can hold the raw
 * newline or control byte that broke the input. */
void vt_err_set(vt_err *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    for (char *c = err->msg; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
}

static void prepend(vt_err *err, const char *prefix, const char *sep)
{
    char old[sizeof err->msg];
    memcpy(old, err->msg, sizeof old);
    old[sizeof old - 1] = '\0';
    size_t plen = strlen(prefix), slen = strlen(sep), mlen = strlen(old);
    size_t room = sizeof err->msg - 1;
    plen = plen < room ? plen : room;
    slen = slen < room - plen ? slen : room - plen;
    mlen = mlen < room - plen - slen ? mlen : room - plen - slen;
    memcpy(err->msg, prefix, plen);
    memcpy(err->msg + plen, sep, slen);
    memcpy(err->msg + plen + slen, old, mlen);
    err->msg[plen + slen + mlen] = '\0';
}

/* Puts where the failing key lives in front of the message: "where.key: problem", or
 * "where: problem" when the problem is the value itself. Returns -1 for `return fail_in()`. */
__attribute__((format(printf, 2, 3))) static int fail_in(vt_err *err, const char *fmt, ...)
{
    char where[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(where, sizeof where, fmt, ap);
    va_end(ap);
    prepend(err, where, err->msg[0] == ':' ? "" : ".");
    return -1;
}

/* Names the file in front of the message. */
static int fail_file(const vt_snapshot *s, vt_err *err)
{
    prepend(err, s->path, err->msg[0] == ':' ? "" : ": ");
    return -1;
}

/* fail_in, then fail_file. */
__attribute__((format(printf, 3, 4))) static int fail_at(const vt_snapshot *s, vt_err *err,
                                                         const char *fmt, ...)
{
    char where[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(where, sizeof where, fmt, ap);
    va_end(ap);
    fail_in(err, "%s", where);
    return fail_file(s, err);
}

static const char *const phase_names[VT_NPHASES] = {"setup", "forward", "backward", "optimizer",
                                                    "other"};

const char *vt_phase_name(vt_phase p)
{
    return p < VT_NPHASES ? phase_names[p] : "?";
}

vt_phase vt_phase_of(const char *name, size_t n)
{
    int p = 0;
    while (p < VT_NPHASES && !(strlen(phase_names[p]) == n && !memcmp(name, phase_names[p], n)))
        p++;
    return (vt_phase)p;
}

const char *vt_fmt_when(char buf[48], vt_phase p, int64_t step)
{
    if (p == VT_NOPHASE)
        snprintf(buf, 48, "step %lld", (long long)step);
    else
        snprintf(buf, 48, "%s of step %lld", vt_phase_name(p), (long long)step);
    return buf;
}

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number with a fraction";
    case JSON_TRUE:
        return "true";
    case JSON_FALSE:
        return "false";
    default:
        return "null";
    }
}

/* --- typed getters: the message names the key; callers add where the object is ----------- */

enum { REQUIRED = 0, NULLABLE = 1 }; /* NULLABLE: missing or null gives "unknown" */

static int wrong(vt_err *err, const char *key, const char *expected, const json_t *v)
{
    if (!v)
        vt_err_set(err, "%s: missing (expected %s)", key, expected);
    else
        vt_err_set(err, "%s: expected %s, found %s", key, expected, type_name(v));
    return -1;
}

static json_t *lookup(json_t *obj, const char *key, int flags)
{
    json_t *v = json_object_get(obj, key);
    return (flags & NULLABLE) && json_is_null(v) ? NULL : v;
}

static int get_int(json_t *obj, const char *key, int64_t lo, int64_t hi, int flags, int64_t *out,
                   vt_err *err)
{
    json_t *v = lookup(obj, key, flags);
    if (!v && (flags & NULLABLE)) {
        *out = -1;
        return 0;
    }
    if (!json_is_integer(v))
        return wrong(err, key, "an integer", v);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) {
        vt_err_set(err, "%s: %lld is not plausible (expected %lld to %lld)", key, (long long)x,
                   (long long)lo, (long long)hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int get_bytes(json_t *obj, const char *key, int flags, int64_t *out, vt_err *err)
{
    json_t *v = lookup(obj, key, flags);
    if (json_is_integer(v) && (json_integer_value(v) < 0 || json_integer_value(v) > VT_MAX_BYTES)) {
        vt_err_set(err, "%s: %lld is not a plausible number of bytes (expected 0 to 1 PiB)", key,
                   (long long)json_integer_value(v));
        return -1;
    }
    return get_int(obj, key, 0, VT_MAX_BYTES, flags, out, err);
}

/* An index into sites[], or -1 for null. */
static int get_site(json_t *obj, const vt_snapshot *s, int64_t *out, vt_err *err)
{
    json_t *v = json_object_get(obj, "site");
    if (json_is_integer(v) &&
        (json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) >= (uint64_t)s->nsites)) {
        vt_err_set(err, "site: %lld is not an index into sites[] (the file has %zu)",
                   (long long)json_integer_value(v), s->nsites);
        return -1;
    }
    return get_int(obj, "site", 0, (int64_t)s->nsites - 1, NULLABLE, out, err);
}

static int get_time(json_t *obj, const char *key, int flags, double *out, vt_err *err)
{
    json_t *v = lookup(obj, key, flags);
    if (!v && (flags & NULLABLE)) {
        *out = NAN;
        return 0;
    }
    if (!json_is_number(v))
        return wrong(err, key, "a number of seconds", v);
    double x = json_number_value(v);
    if (!(x >= 0 && x <= VT_MAX_TIME_S)) {
        vt_err_set(err, "%s: %g is not a plausible time in seconds", key, x);
        return -1;
    }
    *out = x;
    return 0;
}

static int get_str(json_t *obj, const char *key, int flags, const char **out, vt_err *err)
{
    json_t *v = lookup(obj, key, flags);
    *out = NULL;
    if (!v && (flags & NULLABLE))
        return 0;
    if (!json_is_string(v))
        return wrong(err, key, "a string", v);
    *out = json_string_value(v);
    return 0;
}

static int get_bool(json_t *obj, const char *key, bool *out, vt_err *err)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_boolean(v))
        return wrong(err, key, "true or false", v);
    *out = json_is_true(v);
    return 0;
}

/* An object or array member; NULL without error when NULLABLE and absent. */
static int get_container(json_t *obj, const char *key, json_type type, int flags, json_t **out,
                         vt_err *err)
{
    json_t *v = lookup(obj, key, flags);
    *out = NULL;
    if (!v && (flags & NULLABLE))
        return 0;
    if (!v || json_typeof(v) != type)
        return wrong(err, key, type == JSON_OBJECT ? "an object" : "an array", v);
    *out = v;
    return 0;
}

static int get_phase(json_t *obj, const char *key, vt_phase *out, vt_err *err)
{
    const char *s;
    if (get_str(obj, key, REQUIRED, &s, err))
        return -1;
    if ((*out = vt_phase_of(s, strlen(s))) < VT_NPHASES)
        return 0;
    vt_err_set(err, "%s: \"%.40s\" is not a phase (setup, forward, backward, optimizer, other)",
               key, s);
    return -1;
}

static int get_moment(json_t *obj, const char *key, int64_t max_step, vt_moment *m, vt_err *err)
{
    json_t *o = json_object_get(obj, key);
    if (!json_is_object(o))
        return wrong(err, key, "an object", o);
    if (get_phase(o, "phase", &m->phase, err) ||
        get_int(o, "step", 0, max_step, REQUIRED, &m->step, err) ||
        get_int(o, "instance", 0, VT_MAX_COUNT, REQUIRED, &m->instance, err))
        return fail_in(err, "%s", key);
    return 0;
}

/* --- the file --------------------------------------------------------------------------- */

static int read_file(const char *path, char **out, size_t *outlen, vt_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        vt_err_set(err, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        close(fd);
        vt_err_set(err, "%s: is a directory", path);
        return -1;
    }
    /* st_size is only a hint: pipes and /proc files report 0. */
    size_t first = (S_ISREG(st.st_mode) && st.st_size > 0 ? (size_t)st.st_size : 65536) + 1;
    size_t cap = 0, len = 0;
    char *buf = NULL;
    for (;;) {
        if (vt_grow(&buf, &cap, len + 2, 1, first)) { /* a byte more, and the NUL */
            free(buf);
            close(fd);
            vt_err_set(err, "%s: out of memory reading the file", path);
            return -1;
        }
        ssize_t r = read(fd, buf + len, cap - 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            vt_err_set(err, "%s: cannot read: %s", path, strerror(errno));
            free(buf);
            close(fd);
            return -1;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    buf[len] = '\0';
    *out = buf;
    *outlen = len;
    return 0;
}

static int json_error(const char *path, const char *buf, const char *piece, const json_error_t *je,
                      vt_err *err)
{
    char where[64];
    vt_describe_offset(buf, (size_t)(piece - buf) + (size_t)je->position, where, sizeof where);
    vt_err_set(err, "%s: not valid JSON at %s: %s", path, where, je->text);
    return -1;
}

static json_t *parse_piece(const vt_snapshot *s, vt_piece span, vt_err *err)
{
    json_error_t je;
    json_t *v = json_loadb(span.p, span.len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (!v)
        json_error(s->path, s->buf, span.p, &je, err);
    return v;
}

/* Explains a file whose top level is not an object. */
static int not_an_object(const vt_snapshot *s, vt_err *err)
{
    const char *p = s->buf;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    if (p == s->buf + s->buflen) {
        vt_err_set(err, "%s: empty file, not a vramtap snapshot", s->path);
        return -1;
    }
    json_t *v = parse_piece(s, (vt_piece){s->buf, s->buflen}, err);
    if (!v)
        return -1;
    vt_err_set(err, "%s: not a vramtap snapshot: the file holds %s, not an object", s->path,
               type_name(v));
    json_decref(v);
    return -1;
}

/* --- top-level members ------------------------------------------------------------------ */

/* allocations and sites: their elements are parsed apart from the rest */
typedef struct {
    vt_member allocations, sites, hallocs, hevents;
    bool have_allocations, have_sites, have_hallocs, have_hevents;
} big_members;

/* The member of big that holds key, or NULL when key is not a big one. */
static vt_member *big_member(big_members *big, const char *key, bool **have)
{
    static const char *const keys[] = {VT_K_ALLOCATIONS, VT_K_SITES, VT_K_HISTORY_ALLOCATIONS,
                                       VT_K_HISTORY_EVENTS};
    vt_member *m[] = {&big->allocations, &big->sites, &big->hallocs, &big->hevents};
    bool *h[] = {&big->have_allocations, &big->have_sites, &big->have_hallocs, &big->have_hevents};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!strcmp(key, keys[i])) {
            *have = h[i];
            return m[i];
        }
    return NULL;
}

static int collect_members(vt_snapshot *s, big_members *big, vt_err *err)
{
    vt_member *members;
    size_t n;
    int r = vt_split_object(s->path, s->buf, s->buflen, &members, &n, err);
    if (r > 0)
        return not_an_object(s, err);
    if (r < 0)
        return -1;
    s->root = json_object();
    for (size_t i = 0; i < n && r == 0; i++) {
        json_t *key = parse_piece(s, members[i].key, err);
        if (!key) {
            r = -1;
            break;
        }
        const char *k = json_string_value(key);
        bool *have = NULL;
        vt_member *bm = big_member(big, k, &have);
        if (json_object_get(s->root, k) || (bm && *have)) {
            vt_err_set(err, "%s: the key \"%.60s\" appears twice", s->path, k);
            r = -1;
        } else if (bm) {
            *bm = members[i];
            *have = true;
            members[i].elems = NULL;
        } else {
            json_t *v = parse_piece(s, members[i].value, err);
            if (!v || json_object_set_new(s->root, k, v))
                r = -1;
        }
        json_decref(key);
    }
    vt_members_free(members, n);
    return r;
}

static int check_format(vt_snapshot *s, vt_err *err)
{
    json_t *format = json_object_get(s->root, VT_K_FORMAT);
    if (!format) {
        const char *hint = json_object_get(s->root, "traceEvents")
                               ? ": it looks like a PyTorch profiler trace; convert it with "
                                 "'vramtap import'"
                           : json_object_get(s->root, "segments")
                               ? ": it looks like a PyTorch memory snapshot; convert it with "
                                 "'vramtap import'"
                               : " (no \"format\" key)";
        vt_err_set(err, "%s: not a vramtap snapshot%s", s->path, hint);
        return -1;
    }
    if (!json_is_string(format) || strcmp(json_string_value(format), VT_SNAPSHOT_FORMAT)) {
        vt_err_set(err, "%s: not a vramtap snapshot (format is %s%.40s%s, not \"%s\")", s->path,
                   json_is_string(format) ? "\"" : "",
                   json_is_string(format) ? json_string_value(format) : type_name(format),
                   json_is_string(format) ? "\"" : "", VT_SNAPSHOT_FORMAT);
        return -1;
    }
    int64_t version;
    if (get_int(s->root, VT_K_VERSION, 1, INT64_MAX, REQUIRED, &version, err))
        return fail_file(s, err);
    if (version > VT_SNAPSHOT_VERSION) {
        vt_err_set(err,
                   "%s: snapshot format version %lld is newer than this vramtap reads (%d): "
                   "update vramtap",
                   s->path, (long long)version, VT_SNAPSHOT_VERSION);
        return -1;
    }
    const char *kind;
    if (get_str(s->root, VT_K_KIND, REQUIRED, &kind, err))
        return fail_file(s, err);
    if (!strcmp(kind, "exit"))
        s->kind = VT_SNAP_EXIT;
    else if (!strcmp(kind, "oom"))
        s->kind = VT_SNAP_OOM;
    else if (!strcmp(kind, "import"))
        s->kind = VT_SNAP_IMPORT;
    else if (!strcmp(kind, "interim"))
        s->kind = VT_SNAP_INTERIM;
    else {
        vt_err_set(err, "%s: kind: \"%.40s\" is not a snapshot kind (exit, oom, import, interim)",
                   s->path, kind);
        return -1;
    }
    return 0;
}

/* One counts object of "copies" (docs/snapshot-format.md). Totals of a long run may pass any
 * bound that fits one device, so only signs are checked. */
static int get_copy_counts(json_t *obj, vt_copy_counts *c, vt_err *err)
{
    static const struct {
        const char *dir, *bytes, *calls;
        vt_copy_kind kind;
    } fields[] = {
        {"h2d", "pageable_bytes", "pageable_calls", VT_CP_H2D_PAGEABLE},
        {"h2d", "pinned_bytes", "pinned_calls", VT_CP_H2D_PINNED},
        {"d2h", "pageable_bytes", "pageable_calls", VT_CP_D2H_PAGEABLE},
        {"d2h", "pinned_bytes", "pinned_calls", VT_CP_D2H_PINNED},
        {"d2d", "bytes", "calls", VT_CP_D2D},
        {"h2h", "bytes", "calls", VT_CP_H2H},
    };
    if (!json_is_object(obj))
        return wrong(err, "", "an object", obj);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        json_t *dir;
        if (get_container(obj, fields[i].dir, JSON_OBJECT, REQUIRED, &dir, err) ||
            get_int(dir, fields[i].bytes, 0, INT64_MAX, REQUIRED, &c->bytes[fields[i].kind], err) ||
            get_int(dir, fields[i].calls, 0, INT64_MAX, REQUIRED, &c->calls[fields[i].kind], err))
            return -1;
    }
    return get_int(obj, "sync_d2h_calls", 0, INT64_MAX, REQUIRED, &c->sync_d2h, err);
}

static int load_copies(vt_snapshot *s, vt_err *err)
{
    json_t *copies, *phases, *steps, *later, *step;
    s->copies.present = false;
    if (get_container(s->root, VT_K_COPIES, JSON_OBJECT, NULLABLE, &copies, err))
        return fail_file(s, err);
    if (!copies)
        return 0;
    if (get_container(copies, "total", JSON_OBJECT, REQUIRED, &step, err) ||
        get_copy_counts(step, &s->copies.total, err) ||
        get_container(copies, "phases", JSON_OBJECT, REQUIRED, &phases, err) ||
        get_container(copies, "steps", JSON_ARRAY, REQUIRED, &steps, err) ||
        get_container(copies, "later_steps", JSON_OBJECT, NULLABLE, &later, err))
        return fail_at(s, err, VT_K_COPIES);
    for (int p = 0; p < VT_NPHASES; p++)
        if (get_container(phases, vt_phase_name((vt_phase)p), JSON_OBJECT, REQUIRED, &step, err) ||
            get_copy_counts(step, &s->copies.phase[p], err))
            return fail_at(s, err, VT_K_COPIES ".phases");
    s->copies.steps = calloc(json_array_size(steps) + 1, sizeof *s->copies.steps);
    if (!s->copies.steps) {
        vt_err_set(err, "%s: out of memory", s->path);
        return -1;
    }
    size_t i;
    json_array_foreach(steps, i, step)
    {
        vt_copy_step *cs = &s->copies.steps[i];
        json_t *c;
        int64_t least = i ? s->copies.steps[i - 1].step + 1 : 0;
        if (!json_is_object(step)
                ? wrong(err, "", "an object", step)
                : get_int(step, "step", least, INT64_MAX, REQUIRED, &cs->step, err) ||
                      get_container(step, "copies", JSON_OBJECT, REQUIRED, &c, err) ||
                      get_copy_counts(c, &cs->c, err))
            return fail_at(s, err, VT_K_COPIES ".steps[%zu]", i);
    }
    s->copies.nsteps = json_array_size(steps);
    s->copies.has_later = later != NULL;
    json_t *c;
    if (later && (get_int(later, "first", 0, INT64_MAX, REQUIRED, &s->copies.later_first, err) ||
                  get_int(later, "last", s->copies.later_first, INT64_MAX, REQUIRED,
                          &s->copies.later_last, err) ||
                  get_container(later, "copies", JSON_OBJECT, REQUIRED, &c, err) ||
                  get_copy_counts(c, &s->copies.later, err)))
        return fail_at(s, err, VT_K_COPIES ".later_steps");
    s->copies.present = true;
    return 0;
}

static int load_offloaded(vt_snapshot *s, vt_err *err)
{
    static const char *const names[5] = {"parameters", "gradients", "optimizer_state",
                                         "activations", "temporary"};
    json_t *off, *bytes;
    s->offloaded.present = false;
    if (get_container(s->root, VT_K_HOST_OFFLOADED, JSON_OBJECT, NULLABLE, &off, err))
        return fail_file(s, err);
    if (!off)
        return 0;
    if (get_container(off, "pinned_bytes", JSON_OBJECT, REQUIRED, &bytes, err) ||
        get_int(off, "ranges", 0, INT64_MAX, REQUIRED, &s->offloaded.ranges, err))
        return fail_at(s, err, VT_K_HOST_OFFLOADED);
    for (int c = 0; c < 5; c++)
        if (get_int(bytes, names[c], 0, INT64_MAX, REQUIRED, &s->offloaded.pinned_bytes[c], err))
            return fail_at(s, err, VT_K_HOST_OFFLOADED ".pinned_bytes");
    s->offloaded.present = true;
    return 0;
}

static int load_host_ram(vt_snapshot *s, vt_err *err)
{
    s->ram.high_water = s->ram.sampled = s->ram.machine = s->ram.cgroup_limit = -1;
    s->ram.workers_high = -1;
    s->ram.workers = NULL;
    json_t *ram, *high = NULL, *workers = NULL;
    if (get_container(s->root, VT_K_HOST_RAM, JSON_OBJECT, NULLABLE, &ram, err))
        return fail_file(s, err);
    if (!ram)
        return 0;
    if (get_bytes(ram, "high_water_bytes", NULLABLE, &s->ram.high_water, err) ||
        get_bytes(ram, "machine_bytes", NULLABLE, &s->ram.machine, err) ||
        get_bytes(ram, "cgroup_limit_bytes", NULLABLE, &s->ram.cgroup_limit, err) ||
        get_container(ram, "sampled_high", JSON_OBJECT, NULLABLE, &high, err) ||
        get_container(ram, "workers", JSON_ARRAY, NULLABLE, &workers, err) ||
        get_bytes(ram, "workers_high_bytes", NULLABLE, &s->ram.workers_high, err))
        return fail_at(s, err, VT_K_HOST_RAM);
    size_t i;
    json_t *w;
    json_array_foreach(workers, i, w)
    {
        int64_t pid, high_pss, last_pss;
        if (!json_is_object(w) ? wrong(err, "", "an object", w)
                               : get_int(w, "pid", 1, MAX_PID, REQUIRED, &pid, err) ||
                                     get_bytes(w, "pss_high_bytes", REQUIRED, &high_pss, err) ||
                                     get_bytes(w, "pss_last_bytes", REQUIRED, &last_pss, err))
            return fail_at(s, err, VT_K_HOST_RAM ".workers[%zu]", i);
    }
    s->ram.workers = workers && json_array_size(workers) ? workers : NULL;
    if (high && (get_bytes(high, "bytes", REQUIRED, &s->ram.sampled, err) ||
                 get_phase(high, "phase", &s->ram.sampled_phase, err) ||
                 get_int(high, "step", 0, s->steps, REQUIRED, &s->ram.sampled_step, err)))
        return fail_at(s, err, VT_K_HOST_RAM ".sampled_high");
    return 0;
}

static int load_process(vt_snapshot *s, vt_err *err)
{
    json_t *r = s->root, *command, *rank, *launcher, *modes, *counters, *host, *pytorch = NULL;
    if (get_bool(r, VT_K_PHASE_MARKERS, &s->phase_markers, err) ||
        get_int(r, VT_K_STEPS, 0, VT_MAX_COUNT, REQUIRED, &s->steps, err) ||
        get_str(r, VT_K_PROG, NULLABLE, &s->prog, err) ||
        get_int(r, VT_K_PID, 0, MAX_PID, NULLABLE, &s->pid, err) ||
        get_time(r, VT_K_END_TIME_S, NULLABLE, &s->end_time_s, err) ||
        get_container(r, VT_K_COMMAND, JSON_ARRAY, NULLABLE, &command, err) ||
        get_container(r, VT_K_RANK, JSON_OBJECT, NULLABLE, &rank, err) ||
        get_container(r, VT_K_LAUNCHER, JSON_OBJECT, NULLABLE, &launcher, err) ||
        get_container(r, VT_K_ENV, JSON_OBJECT, NULLABLE, &s->env, err) ||
        get_container(r, VT_K_MODES, JSON_OBJECT, NULLABLE, &modes, err) ||
        get_container(r, VT_K_COUNTERS, JSON_OBJECT, NULLABLE, &counters, err) ||
        get_container(r, VT_K_HOST, JSON_OBJECT, NULLABLE, &host, err))
        return fail_file(s, err);
    s->rank = s->local_rank = -1;
    if (rank && (get_int(rank, "rank", 0, MAX_PID, NULLABLE, &s->rank, err) ||
                 get_int(rank, "local_rank", 0, MAX_PID, NULLABLE, &s->local_rank, err)))
        return fail_at(s, err, "rank");
    s->world_size = -1;
    const char *slurm_job = NULL;
    if (launcher && (get_str(launcher, "name", NULLABLE, &s->launcher, err) ||
                     get_str(launcher, "job_id", NULLABLE, &s->job_id, err) ||
                     get_str(launcher, "slurm_job_id", NULLABLE, &slurm_job, err) ||
                     get_int(launcher, "world_size", 1, MAX_WORLD, NULLABLE, &s->world_size, err)))
        return fail_at(s, err, "launcher");
    if (!s->job_id)
        s->job_id = slurm_job;
    if (modes && get_container(modes, "pytorch", JSON_OBJECT, NULLABLE, &pytorch, err))
        return fail_at(s, err, "modes");
    if (pytorch && (get_str(pytorch, "mode", REQUIRED, &s->pytorch_mode, err) ||
                    get_str(pytorch, "reason", NULLABLE, &s->pytorch_mode_reason, err)))
        return fail_at(s, err, "modes.pytorch");
    s->dropped = s->unknown_frees = 0;
    if (counters &&
        (get_int(counters, "dropped", 0, INT64_MAX, NULLABLE, &s->dropped, err) ||
         get_int(counters, "unknown_frees", 0, INT64_MAX, NULLABLE, &s->unknown_frees, err)))
        return fail_at(s, err, "counters");
    if (load_host_ram(s, err) || load_copies(s, err) || load_offloaded(s, err))
        return -1;
    s->host_peak_bytes = -1;
    if (host) {
        int64_t peak, count;
        if (get_str(host, "name", NULLABLE, &s->host, err) ||
            get_bytes(host, "peak_bytes", REQUIRED, &peak, err) ||
            get_int(host, "allocations", 0, INT64_MAX, REQUIRED, &count, err))
            return fail_at(s, err, "host");
        if (count > 0)
            s->host_peak_bytes = peak;
    }
    if (s->env) {
        const char *k;
        json_t *v;
        json_object_foreach(s->env, k, v) if (!json_is_string(v))
        {
            wrong(err, k, "a string", v);
            return fail_at(s, err, "env");
        }
    }
    /* an import's empty env means the trace does not record it: unknown, not unset */
    if (s->kind == VT_SNAP_IMPORT && !json_object_size(s->env))
        s->env = NULL;
    if (command) {
        s->argc = json_array_size(command);
        s->argv = calloc(s->argc ? s->argc : 1, sizeof *s->argv);
        if (!s->argv) {
            vt_err_set(err, "%s: out of memory", s->path);
            return -1;
        }
        for (size_t i = 0; i < s->argc; i++) {
            s->argv[i] = json_string_value(json_array_get(command, i));
            if (!s->argv[i]) {
                vt_err_set(err, "%s: command[%zu]: expected a string, found %s", s->path, i,
                           type_name(json_array_get(command, i)));
                return -1;
            }
        }
    }
    return 0;
}

static int load_device(vt_snapshot *s, json_t *d, vt_device *dev, vt_err *err)
{
    json_t *reserved;
    int64_t ordinal;
    if (!json_is_object(d))
        return wrong(err, "", "an object", d);
    if (get_int(d, "device", 0, VT_MAX_DEVICE, REQUIRED, &ordinal, err) ||
        get_str(d, "name", NULLABLE, &dev->name, err) ||
        get_str(d, "uuid", NULLABLE, &dev->uuid, err) ||
        get_str(d, "pci_bus_id", NULLABLE, &dev->pci_bus_id, err) ||
        get_bytes(d, "total_bytes", NULLABLE, &dev->total_bytes, err) ||
        get_bytes(d, "peak_bytes", REQUIRED, &dev->peak_bytes, err) ||
        get_time(d, "peak_time_s", REQUIRED, &dev->peak_time_s, err) ||
        get_phase(d, "peak_phase", &dev->peak_phase, err) ||
        get_int(d, "peak_step", 0, s->steps, REQUIRED, &dev->peak_step, err) ||
        get_bytes(d, "used_at_peak_bytes", NULLABLE, &dev->used_at_peak_bytes, err) ||
        get_bytes(d, "rss_at_peak_bytes", NULLABLE, &dev->rss_at_peak_bytes, err) ||
        get_container(d, "reserved", JSON_OBJECT, NULLABLE, &reserved, err))
        return -1;
    dev->device = (int)ordinal;
    dev->reserved_peak_bytes = -1;
    if (reserved && (get_str(reserved, "source", REQUIRED, &dev->reserved_source, err) ||
                     get_bytes(reserved, "peak_bytes", REQUIRED, &dev->reserved_peak_bytes, err)))
        return fail_in(err, "reserved");
    return 0;
}

static int load_devices(vt_snapshot *s, vt_err *err)
{
    json_t *devices;
    if (get_container(s->root, VT_K_DEVICES, JSON_ARRAY, REQUIRED, &devices, err))
        return fail_file(s, err);
    s->ndevices = json_array_size(devices);
    s->devices = calloc(s->ndevices ? s->ndevices : 1, sizeof *s->devices);
    if (!s->devices) {
        vt_err_set(err, "%s: out of memory", s->path);
        return -1;
    }
    for (size_t i = 0; i < s->ndevices; i++) {
        if (load_device(s, json_array_get(devices, i), &s->devices[i], err))
            return fail_at(s, err, "devices[%zu]", i);
        for (size_t j = 0; j < i; j++)
            if (s->devices[j].device == s->devices[i].device) {
                vt_err_set(err, "%s: devices[%zu]: device %d is listed twice", s->path, i,
                           s->devices[i].device);
                return -1;
            }
    }
    return 0;
}

static int load_oom(vt_snapshot *s, json_t *o, bool post_mortem, vt_oom *oom, vt_err *err)
{
    int64_t device;
    if (!json_is_object(o))
        return wrong(err, "", "an object", o);
    /* A failed request may be absurdly large: that is often the bug being chased. */
    if (get_int(o, "n", 1, VT_MAX_COUNT, REQUIRED, &oom->n, err) ||
        get_time(o, "time_s", REQUIRED, &oom->time_s, err) ||
        get_int(o, "device", 0, VT_MAX_DEVICE, REQUIRED, &device, err) ||
        get_int(o, "size", 0, INT64_MAX, REQUIRED, &oom->size, err) ||
        get_str(o, "api", REQUIRED, &oom->api, err) || get_phase(o, "phase", &oom->phase, err) ||
        get_int(o, "step", 0, s->steps, REQUIRED, &oom->step, err))
        return -1;
    int64_t site;
    if (get_site(o, s, &site, err))
        return -1;
    oom->site = (int32_t)site;
    oom->device = (int)device;
    oom->error = oom->free_bytes = oom->total_bytes = -1;
    if (post_mortem)
        return get_int(o, "error", INT64_MIN, INT64_MAX, NULLABLE, &oom->error, err) ||
                       get_bytes(o, "free_bytes", NULLABLE, &oom->free_bytes, err) ||
                       get_bytes(o, "total_bytes", NULLABLE, &oom->total_bytes, err)
                   ? -1
                   : 0;
    return get_bool(o, "retry_succeeded", &oom->retry_succeeded, err) ||
                   get_str(o, "file", NULLABLE, &oom->file, err)
               ? -1
               : 0;
}

static int load_ooms(vt_snapshot *s, vt_err *err)
{
    json_t *events, *oom;
    if (get_container(s->root, VT_K_OOM_EVENTS, JSON_ARRAY, NULLABLE, &events, err))
        return fail_file(s, err);
    s->noom_events = json_array_size(events);
    s->oom_events = calloc(s->noom_events ? s->noom_events : 1, sizeof *s->oom_events);
    if (!s->oom_events) {
        vt_err_set(err, "%s: out of memory", s->path);
        return -1;
    }
    for (size_t i = 0; i < s->noom_events; i++)
        if (load_oom(s, json_array_get(events, i), false, &s->oom_events[i], err))
            return fail_at(s, err, "oom_events[%zu]", i);
    if (s->kind != VT_SNAP_OOM)
        return 0;
    if (get_container(s->root, VT_K_OOM, JSON_OBJECT, REQUIRED, &oom, err))
        return fail_file(s, err);
    if (load_oom(s, oom, true, &s->oom, err))
        return fail_at(s, err, "oom");
    s->has_oom = true;
    return 0;
}

/* --- allocations, parsed in parallel ---------------------------------------------------- */

typedef struct {
    const vt_snapshot *s;
    const vt_piece *spans;
    vt_alloc_limits lim;
    vt_alloc *out;
    const char *key;
    bool check; /* VT_CHECK_READERS: the tree reader reads what the fast one took, to compare */
} alloc_ctx;

/* Identity labels: bytes per category, each byte counted once (the first label over it, in
 * offset order). A category this reader does not know is ignored. */
static int get_labels(json_t *o, vt_alloc *a, vt_err *err)
{
    json_t *labels;
    a->labelled = NULL;
    if (get_container(o, "labels", JSON_ARRAY, NULLABLE, &labels, err))
        return -1;
    size_t n = labels ? json_array_size(labels) : 0;
    if (!n)
        return 0;
    vt_label_range *r = malloc(n * sizeof *r);
    if (!r) {
        vt_err_set(err, "labels: out of memory");
        return -1;
    }
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *l = json_array_get(labels, i);
        int64_t off, len;
        const char *cat;
        if (!json_is_object(l)) {
            free(r);
            return wrong(err, "labels[]", "an object", l);
        }
        if (get_bytes(l, "offset", REQUIRED, &off, err) ||
            get_bytes(l, "bytes", REQUIRED, &len, err) ||
            get_str(l, "category", REQUIRED, &cat, err)) {
            free(r);
            return -1;
        }
        if (off + len > a->size) {
            vt_err_set(err, "labels[%zu]: bytes %lld to %lld lie outside the allocation (%lld)", i,
                       (long long)off, (long long)(off + len), (long long)a->size);
            free(r);
            return -1;
        }
        int c = vt_label_category(cat, strlen(cat));
        if (c >= 0)
            r[used++] = (vt_label_range){off, off + len, c};
    }
    int rc = vt_labels_sum(r, used, a);
    free(r);
    if (rc)
        vt_err_set(err, "labels: out of memory");
    return rc;
}

static int alloc_fields(const alloc_ctx *c, json_t *o, vt_alloc *a, vt_err *err)
{
    int64_t size, device, site, mpath;
    const char *kind;
    json_t *death;
    if (!json_is_object(o))
        return wrong(err, "", "an object", o);
    if (get_int(o, "id", 0, VT_MAX_COUNT, NULLABLE, &a->id, err) ||
        get_int(o, "birth_seq", 0, VT_MAX_COUNT, NULLABLE, &a->birth_seq, err) ||
        get_int(o, "death_seq", 0, VT_MAX_COUNT, NULLABLE, &a->death_seq, err) ||
        get_bytes(o, "size", REQUIRED, &size, err) ||
        get_int(o, "device", 0, VT_MAX_DEVICE, REQUIRED, &device, err) ||
        get_str(o, "kind", REQUIRED, &kind, err) || get_site(o, c->s, &site, err) ||
        get_int(o, "module_path", 0, (int64_t)c->s->nmpaths - 1, NULLABLE, &mpath, err) ||
        get_moment(o, "birth", c->s->steps, &a->birth, err) ||
        get_container(o, "death", JSON_OBJECT, NULLABLE, &death, err) ||
        (death && get_moment(o, "death", c->s->steps, &a->death, err)))
        return -1;
    if (c->lim.device_index[device] < 0) {
        vt_err_set(err, "device: %lld is not in devices[]", (long long)device);
        return -1;
    }
    if (death && vt_alloc_death_check(a, err))
        return -1;
    a->size = size;
    a->device = (int32_t)device;
    a->site = (int32_t)site;
    a->mpath = (int32_t)mpath;
    a->recomputed = json_is_true(json_object_get(o, "recomputed"));
    a->kind = (uint8_t)vt_alloc_kind_of(kind, strlen(kind));
    a->alive_at_end = !death;
    json_t *from = json_object_get(o, "birth_phase_from");
    a->birth_from_stack =
        json_is_string(from) && !strcmp(json_string_value(from), "allocation_stack");
    a->before_window = json_is_true(json_object_get(o, "before_window"));
    return get_labels(o, a, err);
}

/* The tree reader's reading of an element the fast reader took: the same, or an error. */
static int cross_check(const alloc_ctx *c, size_t i, vt_err *err)
{
    vt_alloc tree;
    memset(&tree, 0, sizeof tree);
    json_t *o = parse_piece(c->s, c->spans[i], err);
    int r = o ? alloc_fields(c, o, &tree, err) : -1;
    json_decref(o);
    if (r == 0 && !vt_alloc_same(&tree, &c->out[i]))
        vt_err_set(err, ": " VT_READERS_DIFFER " (%s)", VT_CHECK_READERS);
    else if (r == 0)
        r = 1;
    free(tree.labelled);
    return r == 1 ? 0 : fail_at(c->s, err, "%s[%zu]", c->key, i);
}

static int parse_alloc(void *ctx, size_t i, vt_err *err)
{
    const alloc_ctx *c = ctx;
    if (vt_alloc_sax(&c->lim, c->spans[i].p, c->spans[i].len, &c->out[i]))
        return c->check ? cross_check(c, i, err) : 0;
    json_t *o = parse_piece(c->s, c->spans[i], err);
    if (!o)
        return -1;
    int r = alloc_fields(c, o, &c->out[i], err);
    json_decref(o);
    return r ? fail_at(c->s, err, "%s[%zu]", c->key, i) : 0;
}

/* --- work over many elements, on every CPU ---------------------------------------------- */

typedef int (*element_fn)(void *ctx, size_t i, vt_err *err);

typedef struct {
    element_fn fn;
    void *ctx;
    size_t from, to, failed_at;
    vt_err err;
} share;

static void *run_share(void *arg)
{
    share *sh = arg;
    for (size_t i = sh->from; i < sh->to; i++)
        if (sh->fn(sh->ctx, i, &sh->err)) {
            sh->failed_at = i;
            break;
        }
    return NULL;
}

/* fn(ctx, i) for every i < n, in contiguous shares on as many threads as there are CPUs; fn
 * must touch only what belongs to element i. On failure, the error of the lowest failing i. */
static int parallel_for(size_t n, element_fn fn, void *ctx, vt_err *err)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t nthreads = n < PARALLEL_MIN || cpus < 2 ? 1
                      : cpus > MAX_THREADS         ? MAX_THREADS
                                                   : (size_t)cpus;
    share shares[MAX_THREADS];
    pthread_t threads[MAX_THREADS];
    bool started[MAX_THREADS] = {false};
    for (size_t t = 0; t < nthreads; t++) {
        shares[t] = (share){fn, ctx, n * t / nthreads, n * (t + 1) / nthreads, SIZE_MAX, {{0}}};
        /* The first share runs here; a thread that cannot start runs here too. */
        if (t > 0)
            started[t] = pthread_create(&threads[t], NULL, run_share, &shares[t]) == 0;
    }
    run_share(&shares[0]);
    for (size_t t = 1; t < nthreads; t++) {
        if (started[t])
            pthread_join(threads[t], NULL);
        else
            run_share(&shares[t]);
    }
    /* Shares are in index order, so the first failing share holds the lowest failure. */
    for (size_t t = 0; t < nthreads; t++)
        if (shares[t].failed_at != SIZE_MAX) {
            *err = shares[t].err;
            return -1;
        }
    return 0;
}

/* A big member must be an array; parsing it says what it is instead. */
static int want_array(const vt_snapshot *s, const char *key, const vt_member *m, vt_err *err)
{
    if (m->value.p[0] == '[')
        return 0;
    json_t *v = parse_piece(s, m->value, err);
    if (!v)
        return -1;
    vt_err_set(err, "%s: %s: expected an array, found %s", s->path, key, type_name(v));
    json_decref(v);
    return -1;
}

/* ordinal -> index in devices, -1 when not listed */
static void device_indexes(const vt_snapshot *s, int16_t index[VT_MAX_DEVICE + 1])
{
    memset(index, 0xff, (VT_MAX_DEVICE + 1) * sizeof *index);
    for (size_t d = 0; d < s->ndevices; d++)
        index[s->devices[d].device] = (int16_t)d;
}

/* Each device's listed bytes and count. */
static int sum_allocations(vt_snapshot *s, const int16_t device_index[VT_MAX_DEVICE + 1],
                           vt_err *err)
{
    for (size_t i = 0; i < s->nallocs; i++) {
        vt_device *dev = &s->devices[device_index[s->allocs[i].device]];
        dev->listed_bytes += s->allocs[i].size;
        dev->listed_count++;
        if (dev->listed_bytes > VT_MAX_BYTES) {
            vt_err_set(err, "%s: the allocations on device %d add up to more than 1 PiB", s->path,
                       dev->device);
            return -1;
        }
    }
    return 0;
}

static int load_allocations(vt_snapshot *s, const vt_member *m, vt_err *err)
{
    const vt_piece *spans = m->elems;
    size_t n = m->nelems;
    if (want_array(s, VT_K_ALLOCATIONS, m, err))
        return -1;
    int16_t device_index[VT_MAX_DEVICE + 1];
    device_indexes(s, device_index);
    s->nallocs = n;
    s->allocs = calloc(n ? n : 1, sizeof *s->allocs);
    if (!s->allocs) {
        vt_err_set(err, "%s: out of memory for %zu allocations", s->path, n);
        return -1;
    }
    alloc_ctx c = {s,         spans,         {s->steps, s->nsites, s->nmpaths, device_index},
                   s->allocs, "allocations", getenv(VT_CHECK_READERS) != NULL};

    if (parallel_for(n, parse_alloc, &c, err))
        return -1;
    return sum_allocations(s, device_index, err);
}

/* A compact file's section of allocation records into *out (*n of them). */
static int read_records(vt_snapshot *s, const char *key, const uint8_t *p, size_t len,
                        const vt_cnames *names, vt_alloc **out, size_t *n, vt_err *err)
{
    int16_t device_index[VT_MAX_DEVICE + 1];
    device_indexes(s, device_index);
    vt_alloc_limits lim = {s->steps, s->nsites, s->nmpaths, device_index};
    vt_creader r;
    size_t at, count;
    if (vt_csection_start(p, len, &r, &count, err))
        return fail_at(s, err, "%s", key);
    *out = calloc(count ? count : 1, sizeof **out);
    if (!*out) {
        vt_err_set(err, "%s: out of memory for %zu allocations", s->path, count);
        return -1;
    }
    *n = count;
    int rc = vt_callocs_read(&r, count, names, &lim, *out, &at, err);
    vt_creader_free(&r);
    return rc ? fail_at(s, err, "%s[%zu]", key, at) : 0;
}

static int load_compact_allocations(vt_snapshot *s, const vt_compact *c, const vt_cnames *names,
                                    vt_err *err)
{
    if (!c->allocations) {
        vt_err_set(err, "%s: the compact file has no %s section (%s)", s->path, VT_SEC_ALLOCATIONS,
                   VT_K_ALLOCATIONS);
        return -1;
    }
    if (read_records(s, VT_K_ALLOCATIONS, c->allocations, c->allocations_len, names, &s->allocs,
                     &s->nallocs, err))
        return -1;
    int16_t device_index[VT_MAX_DEVICE + 1];
    device_indexes(s, device_index);
    return sum_allocations(s, device_index, err);
}

static int index_sites(vt_snapshot *s, const vt_member *m, vt_err *err)
{
    if (want_array(s, VT_K_SITES, m, err))
        return -1;
    s->nsites = m->nelems;
    if (s->nsites > INT32_MAX) {
        vt_err_set(err, "%s: sites: more than %d sites", s->path, INT32_MAX);
        return -1;
    }
    s->sites = calloc(s->nsites ? s->nsites : 1, sizeof *s->sites);
    if (!s->sites) {
        vt_err_set(err, "%s: out of memory", s->path);
        return -1;
    }
    for (size_t i = 0; i < s->nsites; i++) {
        s->sites[i].text = m->elems[i].p;
        s->sites[i].len = m->elems[i].len;
    }
    return 0;
}

static int frame_fields(const vt_snapshot *s, json_t *o, vt_frame *f, vt_err *err)
{
    const char *type;
    if (!json_is_object(o))
        return wrong(err, "", "an object", o);
    if (get_str(o, "type", REQUIRED, &type, err))
        return -1;
    f->line = -1;
    f->module_id = -1;
    if (!strcmp(type, "python")) {
        f->python = true;
        return get_str(o, "file", NULLABLE, &f->file, err) ||
                       get_str(o, "function", NULLABLE, &f->function, err) ||
                       get_int(o, "line", 0, INT32_MAX, NULLABLE, &f->line, err)
                   ? -1
                   : 0;
    }
    /* A PyTorch op or profiler annotation from an imported trace: shown by its name. */
    if (!strcmp(type, "op"))
        return get_str(o, "name", NULLABLE, &f->symbol, err);
    if (strcmp(type, "native")) {
        /* a frame type from a newer library: shown by its type alone */
        f->module = type;
        return 0;
    }
    int64_t id;
    if (get_str(o, "module", NULLABLE, &f->module, err) ||
        get_str(o, "offset", NULLABLE, &f->offset, err) ||
        get_str(o, "symbol", NULLABLE, &f->symbol, err) ||
        get_int(o, "module_id", 0, INT32_MAX, NULLABLE, &id, err))
        return -1;
    for (size_t i = 0; id >= 0 && i < s->nmodules; i++)
        if (s->modules[i].id == id)
            f->module_id = (int32_t)i;
    if (id >= 0 && f->module_id < 0) {
        vt_err_set(err, "module_id: %lld is not the id of a module in modules[]", (long long)id);
        return -1;
    }
    return 0;
}

/* Optional: snapshots from before it, and imports, have none. */
static int load_modules(vt_snapshot *s, vt_err *err)
{
    json_t *mods;
    if (get_container(s->root, VT_K_MODULES, JSON_ARRAY, NULLABLE, &mods, err))
        return fail_file(s, err);
    s->nmodules = mods ? json_array_size(mods) : 0;
    s->modules = calloc(s->nmodules ? s->nmodules : 1, sizeof *s->modules);
    if (!s->modules) {
        vt_err_set(err, "%s: out of memory", s->path);
        return -1;
    }
    for (size_t i = 0; i < s->nmodules; i++) {
        json_t *m = json_array_get(mods, i);
        vt_module *v = &s->modules[i];
        if (!json_is_object(m))
            wrong(err, "", "an object", m);
        else if (!get_int(m, "id", 0, INT32_MAX, REQUIRED, &v->id, err) &&
                 !get_str(m, "path", REQUIRED, &v->path, err) &&
                 !get_str(m, "build_id", NULLABLE, &v->build_id, err))
            continue;
        return fail_at(s, err, "modules[%zu]", i);
    }
    return 0;
}

/* Optional: snapshots from before it have none. */
static int load_mpaths(vt_snapshot *s, vt_err *err)
{
    json_t *paths;
    if (get_container(s->root, VT_K_MODULE_PATHS, JSON_ARRAY, NULLABLE, &paths, err))
        return fail_file(s, err);
    s->nmpaths = paths ? json_array_size(paths) : 0;
    if (s->nmpaths > INT32_MAX) {
        vt_err_set(err, "%s: %s: more than %d paths", s->path, VT_K_MODULE_PATHS, INT32_MAX);
        return -1;
    }
    s->mpaths = calloc(s->nmpaths ? s->nmpaths : 1, sizeof *s->mpaths);
    if (!s->mpaths) {
        vt_err_set(err, "%s: out of memory", s->path);
        return -1;
    }
    for (size_t i = 0; i < s->nmpaths; i++) {
        json_t *p = json_array_get(paths, i);
        if (!json_is_string(p)) {
            wrong(err, "", "a string", p);
            return fail_at(s, err, "%s[%zu]", VT_K_MODULE_PATHS, i);
        }
        s->mpaths[i] = json_string_value(p);
    }
    return 0;
}

static int site_fields(const vt_snapshot *s, vt_site *site, size_t i, json_t *o, vt_err *err)
{
    int64_t id;
    json_t *frames;
    if (!json_is_object(o))
        return wrong(err, "", "an object", o);
    if (get_int(o, "id", 0, INT32_MAX, REQUIRED, &id, err) ||
        get_str(o, "signature", REQUIRED, &site->signature, err) ||
        get_container(o, "frames", JSON_ARRAY, REQUIRED, &frames, err))
        return -1;
    if ((size_t)id != i) {
        vt_err_set(err, "id: %lld, but it is at index %zu", (long long)id, i);
        return -1;
    }
    site->nframes = json_array_size(frames);
    site->frames = calloc(site->nframes ? site->nframes : 1, sizeof *site->frames);
    if (!site->frames) {
        vt_err_set(err, "out of memory");
        return -1;
    }
    for (size_t f = 0; f < site->nframes; f++)
        if (frame_fields(s, json_array_get(frames, f), &site->frames[f], err))
            return fail_in(err, "frames[%zu]", f);
    return 0;
}

static int load_site(void *s, size_t i, vt_err *err)
{
    return vt_site_load(s, i, err);
}

int vt_sites_load_all(vt_snapshot *s, vt_err *err)
{
    return parallel_for(s->nsites, load_site, s, err);
}

int vt_site_load(vt_snapshot *s, size_t i, vt_err *err)
{
    vt_site *site = &s->sites[i];
    if (site->json)
        return 0;
    json_t *o = parse_piece(s, (vt_piece){site->text, site->len}, err);
    if (!o)
        return -1;
    if (site_fields(s, site, i, o, err) || vt_lines_expand(s, site, err)) {
        free(site->frames);
        site->frames = NULL;
        json_decref(o);
        return fail_at(s, err, "sites[%zu]", i);
    }
    site->json = o;
    return 0;
}

/* --- the allocation history ------------------------------------------------------------- */

static int load_window(const vt_snapshot *s, json_t *o, size_t nevents, vt_window *w, vt_err *err)
{
    static const char *const reasons[] = {"first_steps", "peak_step", "trace"};
    const char *reason;
    int64_t first, n;
    json_t *devices;
    if (!json_is_object(o))
        return wrong(err, "", "an object", o);
    if (get_str(o, "reason", REQUIRED, &reason, err) ||
        get_time(o, "start_s", REQUIRED, &w->start_s, err) ||
        get_time(o, "end_s", REQUIRED, &w->end_s, err) ||
        get_int(o, "start_seq", 0, VT_MAX_COUNT, REQUIRED, &w->start_seq, err) ||
        get_int(o, "first_event", 0, (int64_t)nevents, REQUIRED, &first, err) ||
        get_int(o, "events", 0, (int64_t)nevents - first, REQUIRED, &n, err) ||
        get_bool(o, "truncated", &w->truncated, err) ||
        get_container(o, "devices", JSON_ARRAY, REQUIRED, &devices, err))
        return -1;
    w->reason = VT_WIN_TRACE + 1;
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
        if (!strcmp(reason, reasons[i]))
            w->reason = (vt_window_reason)i;
    if (w->reason > VT_WIN_TRACE) {
        vt_err_set(err, "reason: \"%.40s\" is not first_steps, peak_step or trace", reason);
        return -1;
    }
    size_t nd = json_array_size(devices), k = 0;
    for (size_t i = 0; i < nd; i++) {
        json_t *d = json_array_get(devices, i);
        if (!json_is_integer(d) || !vt_snapshot_device(s, (int)json_integer_value(d))) {
            vt_err_set(err, "devices[%zu]: not a device of devices[]", i);
            return -1;
        }
        if (k + 1 < sizeof w->devices / sizeof w->devices[0])
            w->devices[k++] = (int)json_integer_value(d);
    }
    w->devices[k] = -1;
    w->first = (size_t)first;
    w->n = (size_t)n;
    return 0;
}

typedef struct {
    const vt_snapshot *s;
    const vt_piece *spans;
    int64_t *ids;
} hevent_ctx;

/* [time_s, allocation id, bytes]: bytes > 0 allocates, < 0 frees */
static int parse_hevent(void *ctx, size_t i, vt_err *err)
{
    const hevent_ctx *c = ctx;
    json_t *o = parse_piece(c->s, c->spans[i], err);
    if (!o)
        return -1;
    json_t *t = json_array_get(o, 0), *id = json_array_get(o, 1), *b = json_array_get(o, 2);
    int r = -1;
    if (!json_is_array(o) || json_array_size(o) != 3 || !json_is_number(t) ||
        !json_is_integer(id) || !json_is_integer(b))
        vt_err_set(err, "expected [time_s, allocation id, bytes]");
    else if (!(json_number_value(t) >= 0 && json_number_value(t) <= VT_MAX_TIME_S))
        vt_err_set(err, "%g is not a plausible time in seconds", json_number_value(t));
    else if (json_integer_value(b) == 0 || json_integer_value(b) > VT_MAX_BYTES ||
             json_integer_value(b) < -VT_MAX_BYTES)
        vt_err_set(err, "%lld is not a plausible number of bytes",
                   (long long)json_integer_value(b));
    else {
        c->s->hevents[i].t = json_number_value(t);
        c->s->hevents[i].bytes = json_integer_value(b);
        c->ids[i] = json_integer_value(id);
        r = 0;
    }
    json_decref(o);
    return r ? fail_at(c->s, err, "history_events[%zu]", i) : 0;
}

static int by_id(const void *pa, const void *pb)
{
    const vt_alloc *a = *(const vt_alloc *const *)pa, *b = *(const vt_alloc *const *)pb;
    return (a->id > b->id) - (a->id < b->id);
}

/* hallocs[0..n) by id: a slot per id over their span when that takes at most 48 bytes an
 * allocation (a million of them are indexed in milliseconds, where sorting pointers to them
 * took most of a report), else sorted for bsearch. Events name ids in about the order they
 * were born, so their sizes are read from the slots in order too, not from allocations all
 * over memory. */
typedef struct {
    int64_t lo;
    uint32_t *slot; /* id - lo -> index in hallocs, UINT32_MAX for none */
    int64_t *size;  /* id - lo -> its size */
    size_t span;
} id_index;

/* -1 with err when an id appears twice (the smallest such id is named). */
static int index_ids(vt_snapshot *s, size_t n, id_index *x, vt_err *err)
{
    int64_t lo = INT64_MAX, hi = -1, twice = -1;
    for (size_t i = 0; i < n; i++) {
        lo = s->hallocs[i]->id < lo ? s->hallocs[i]->id : lo;
        hi = s->hallocs[i]->id > hi ? s->hallocs[i]->id : hi;
    }
    *x = (id_index){.lo = lo};
    if (n && (uint64_t)(hi - lo) < 4 * (uint64_t)n) {
        x->span = (size_t)(hi - lo) + 1;
        x->slot = malloc(x->span * sizeof *x->slot);
        x->size = malloc(x->span * sizeof *x->size);
    }
    if (x->slot && x->size) {
        memset(x->slot, 0xff, x->span * sizeof *x->slot);
        for (size_t i = 0; i < n; i++) {
            uint32_t *sl = &x->slot[s->hallocs[i]->id - lo];
            if (*sl != UINT32_MAX && (twice < 0 || s->hallocs[i]->id < twice))
                twice = s->hallocs[i]->id;
            *sl = (uint32_t)i;
            x->size[s->hallocs[i]->id - lo] = s->hallocs[i]->size;
        }
    } else {
        free(x->slot);
        free(x->size);
        x->slot = NULL;
        x->size = NULL;
        qsort(s->hallocs, n, sizeof *s->hallocs, by_id);
        for (size_t i = 1; i < n && twice < 0; i++)
            if (s->hallocs[i]->id == s->hallocs[i - 1]->id)
                twice = s->hallocs[i]->id;
    }
    if (twice < 0)
        return 0;
    vt_err_set(err, "%s: allocation id %lld appears twice", s->path, (long long)twice);
    return -1;
}

/* The index in hallocs of allocation id and its size, or -1. */
static int64_t find_id(const vt_snapshot *s, const id_index *x, int64_t id, int64_t *size)
{
    if (x->slot) {
        if (id < x->lo || (uint64_t)(id - x->lo) >= x->span || x->slot[id - x->lo] == UINT32_MAX)
            return -1;
        *size = x->size[id - x->lo];
        return x->slot[id - x->lo];
    }
    vt_alloc key = {.id = id};
    const vt_alloc *kp = &key;
    const vt_alloc **hit = bsearch(&kp, s->hallocs, s->nhallocs, sizeof *s->hallocs, by_id);
    if (hit)
        *size = (*hit)->size;
    return hit ? hit - s->hallocs : -1;
}

/* Points each event at its allocation, which must exist and have the event's size. */
static int resolve_hevents(vt_snapshot *s, const int64_t *ids, vt_err *err)
{
    size_t n = 0;
    s->hallocs = malloc((s->nallocs + s->nhextra + 1) * sizeof *s->hallocs);
    if (!s->hallocs) {
        vt_err_set(err, "%s: out of memory", s->path);
        return -1;
    }
    for (size_t i = 0; i < s->nallocs; i++)
        if (s->allocs[i].id >= 0)
            s->hallocs[n++] = &s->allocs[i];
    for (size_t i = 0; i < s->nhextra; i++)
        s->hallocs[n++] = &s->hextra[i];
    id_index x;
    if (index_ids(s, n, &x, err)) {
        free(x.slot);
        free(x.size);
        return -1;
    }
    s->nhallocs = n;
    for (size_t i = 0; i < s->nhevents; i++) {
        int64_t size, hit = find_id(s, &x, ids[i], &size);
        int64_t b = s->hevents[i].bytes;
        /* A history that does not match the allocations (a file someone cut down) is set
         * aside, not trusted: nothing else depends on it. */
        if (hit < 0)
            snprintf(s->history_unused, sizeof s->history_unused,
                     "history_events[%zu] names allocation %lld, which is in neither allocations "
                     "nor history_allocations",
                     i, (long long)ids[i]);
        else if ((b < 0 ? -b : b) != size)
            snprintf(s->history_unused, sizeof s->history_unused,
                     "history_events[%zu] has %lld bytes, but allocation %lld has %lld", i,
                     (long long)b, (long long)ids[i], (long long)size);
        if (s->history_unused[0]) {
            s->nwindows = 0;
            break;
        }
        s->hevents[i].alloc = (uint32_t)hit;
    }
    free(x.slot);
    free(x.size);
    return 0;
}

/* Where a file's history allocations and events are: big members of a JSON file, or the
 * sections of a compact one. */
typedef struct {
    const big_members *big;
    const vt_compact *compact;
    const vt_cnames *names;
    vt_creader events; /* compact: on the first event */
    size_t nevents, nextra;
} history_source;

static int history_sizes(vt_snapshot *s, history_source *h, vt_err *err)
{
    if (h->compact) {
        const vt_compact *c = h->compact;
        if (!c->history_allocations || !c->history_events) {
            vt_err_set(err, "%s: the compact file has a history but no %s section", s->path,
                       c->history_events ? VT_SEC_HISTORY_ALLOCATIONS : VT_SEC_HISTORY_EVENTS);
            return -1;
        }
        if (vt_csection_start(c->history_events, c->history_events_len, &h->events, &h->nevents,
                              err))
            return fail_at(s, err, "%s", VT_K_HISTORY_EVENTS);
        return 0;
    }
    const big_members *big = h->big;
    if (!big->have_hallocs || !big->have_hevents) {
        vt_err_set(err, "%s: %s: missing (expected an array)", s->path,
                   big->have_hallocs ? VT_K_HISTORY_EVENTS : VT_K_HISTORY_ALLOCATIONS);
        return -1;
    }
    if (want_array(s, VT_K_HISTORY_ALLOCATIONS, &big->hallocs, err) ||
        want_array(s, VT_K_HISTORY_EVENTS, &big->hevents, err))
        return -1;
    h->nevents = big->hevents.nelems;
    h->nextra = big->hallocs.nelems;
    return 0;
}

static int read_history(vt_snapshot *s, history_source *h, int64_t *ids, vt_err *err)
{
    if (h->compact) {
        size_t at;
        const vt_compact *c = h->compact;
        if (read_records(s, VT_K_HISTORY_ALLOCATIONS, c->history_allocations,
                         c->history_allocations_len, h->names, &s->hextra, &s->nhextra, err))
            return -1;
        if (s->nhextra > UINT32_MAX / 2) {
            vt_err_set(err, "%s: %s: more than %u allocations", s->path, VT_K_HISTORY_ALLOCATIONS,
                       UINT32_MAX / 2);
            return -1;
        }
        if (vt_cevents_read(&h->events, h->nevents, s->hevents, ids, &at, err))
            return fail_at(s, err, "%s[%zu]", VT_K_HISTORY_EVENTS, at);
        return 0;
    }
    int16_t device_index[VT_MAX_DEVICE + 1];
    device_indexes(s, device_index);
    s->hextra = calloc(h->nextra + 1, sizeof *s->hextra);
    if (!s->hextra) {
        vt_err_set(err, "%s: out of memory", s->path);
        return -1;
    }
    s->nhextra = h->nextra;
    alloc_ctx ac = {
        s,         h->big->hallocs.elems,    {s->steps, s->nsites, s->nmpaths, device_index},
        s->hextra, VT_K_HISTORY_ALLOCATIONS, getenv(VT_CHECK_READERS) != NULL};
    hevent_ctx ec = {s, h->big->hevents.elems, ids};
    return parallel_for(h->nextra, parse_alloc, &ac, err) ||
                   parallel_for(h->nevents, parse_hevent, &ec, err)
               ? -1
               : 0;
}

static int load_history(vt_snapshot *s, history_source *src, vt_err *err)
{
    json_t *h, *windows;
    if (get_container(s->root, VT_K_HISTORY, JSON_OBJECT, NULLABLE, &h, err))
        return fail_file(s, err);
    if (!h)
        return 0;
    if (history_sizes(s, src, err))
        return -1;
    size_t nev = src->nevents;
    if (nev > UINT32_MAX || src->nextra > UINT32_MAX / 2) {
        vt_err_set(err, "%s: history_events: more than %u events", s->path, UINT32_MAX);
        return -1;
    }
    if (get_int(h, "steps", 0, VT_MAX_COUNT, NULLABLE, &s->history_steps, err) ||
        get_int(h, "max_events", 0, VT_MAX_COUNT, NULLABLE, &s->history_max_events, err) ||
        get_int(h, "dropped", 0, VT_MAX_COUNT, REQUIRED, &s->history_dropped, err) ||
        get_container(h, "windows", JSON_ARRAY, REQUIRED, &windows, err))
        return fail_at(s, err, "history");
    json_t *paths = json_object_get(h, "module_paths");
    if (paths && !json_is_boolean(paths)) {
        wrong(err, "module_paths", "true or false", paths);
        return fail_at(s, err, "history");
    }
    s->history_module_paths = json_is_true(paths);
    s->nwindows = json_array_size(windows);
    s->windows = calloc(s->nwindows + 1, sizeof *s->windows);
    s->hevents = malloc((nev + 1) * sizeof *s->hevents);
    int64_t *ids = malloc((nev + 1) * sizeof *ids);
    if (!s->windows || !s->hevents || !ids) {
        free(ids);
        vt_err_set(err, "%s: out of memory", s->path);
        return -1;
    }
    s->nhevents = nev;
    for (size_t i = 0; i < s->nwindows; i++)
        if (load_window(s, json_array_get(windows, i), nev, &s->windows[i], err)) {
            free(ids);
            return fail_at(s, err, "history.windows[%zu]", i);
        }
    int r = read_history(s, src, ids, err) || resolve_hevents(s, ids, err);
    free(ids);
    return r ? -1 : 0;
}

/* --- the whole snapshot ----------------------------------------------------------------- */

static void forget_phases(vt_snapshot *s)
{
    for (size_t i = 0; i < s->ndevices; i++)
        s->devices[i].peak_phase = VT_NOPHASE;
    for (size_t i = 0; i < s->nallocs; i++)
        s->allocs[i].birth.phase = s->allocs[i].death.phase = VT_NOPHASE;
    for (size_t i = 0; i < s->nhextra; i++)
        s->hextra[i].birth.phase = s->hextra[i].death.phase = VT_NOPHASE;
    for (size_t i = 0; i < s->noom_events; i++)
        s->oom_events[i].phase = VT_NOPHASE;
    s->oom.phase = VT_NOPHASE;
}

/* A compact file: buf becomes its head, the JSON text the rest of the loader reads. */
static int open_compact(vt_snapshot *s, vt_compact *c, vt_err *err)
{
    char why[160];
    if (vt_compact_open(s->buf, s->buflen, c, why, sizeof why)) {
        vt_err_set(err, "%s: %s", s->path, why);
        return -1;
    }
    s->file = s->buf;
    s->filelen = s->buflen;
    s->buf = (char *)c->head;
    s->buflen = c->head_len;
    return 0;
}

int vt_snapshot_load(const char *path, vt_snapshot *s, vt_err *err)
{
    memset(s, 0, sizeof *s);
    s->pid = -1;
    s->end_time_s = NAN;
    s->path = strdup(path);
    if (!s->path) {
        vt_err_set(err, "%s: out of memory", path);
        return -1;
    }
    big_members big = {0};
    vt_compact compact;
    vt_cnames names = {0};
    int r = -1;
    if (read_file(path, &s->buf, &s->buflen, err))
        goto done;
    bool is_compact = vt_compact_is(s->buf, s->buflen);
    if ((is_compact && open_compact(s, &compact, err)) || collect_members(s, &big, err) ||
        check_format(s, err) || load_process(s, err) || load_devices(s, err) ||
        load_modules(s, err) || load_mpaths(s, err))
        goto done;
    if (is_compact && vt_cnames_load(s->root, &names, err)) {
        fail_file(s, err);
        goto done;
    }
    if (!big.have_sites || (!big.have_allocations && !is_compact)) {
        vt_err_set(err, "%s: %s: missing (expected an array)", path,
                   big.have_sites ? VT_K_ALLOCATIONS : VT_K_SITES);
        goto done;
    }
    if (is_compact && (big.have_allocations || big.have_hallocs || big.have_hevents)) {
        vt_err_set(err, "%s: the compact file's head holds an array its sections hold", path);
        goto done;
    }
    history_source hs = {&big, is_compact ? &compact : NULL, &names, {0}, 0, 0};
    if (index_sites(s, &big.sites, err) ||
        (is_compact ? load_compact_allocations(s, &compact, &names, err)
                    : load_allocations(s, &big.allocations, err)) ||
        load_ooms(s, err) || load_history(s, &hs, err))
        goto done;
    if (!s->phase_markers)
        forget_phases(s);
    r = 0;
done:
    vt_cnames_free(&names);
    free(big.sites.elems);
    free(big.allocations.elems);
    free(big.hallocs.elems);
    free(big.hevents.elems);
    if (r)
        vt_snapshot_free(s);
    return r;
}

void vt_snapshot_free(vt_snapshot *s)
{
    vt_lines_free(s);
    for (size_t i = 0; i < s->nsites; i++) {
        free(s->sites[i].frames);
        json_decref(s->sites[i].json);
    }
    free(s->sites);
    free(s->modules);
    free(s->mpaths);
    free(s->site_evidence);
    for (size_t i = 0; i < s->nallocs; i++)
        free(s->allocs[i].labelled);
    free(s->allocs);
    free(s->windows);
    free(s->hevents);
    free(s->hallocs);
    for (size_t i = 0; s->hextra && i < s->nhextra; i++)
        free(s->hextra[i].labelled);
    free(s->hextra);
    free(s->devices);
    free(s->oom_events);
    free(s->copies.steps);
    free(s->argv);
    json_decref(s->root);
    free(s->file ? s->file : s->buf);
    free(s->path);
    memset(s, 0, sizeof *s);
}

const vt_device *vt_snapshot_device(const vt_snapshot *s, int device)
{
    for (size_t i = 0; i < s->ndevices; i++)
        if (s->devices[i].device == device)
            return &s->devices[i];
    return NULL;
}

bool vt_snapshot_native(const vt_snapshot *s)
{
    return s->pytorch_mode && !strcmp(s->pytorch_mode, "native");
}
