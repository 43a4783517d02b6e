/* PyTorch memory snapshots (pickles). C has no safe unpickler, so a small Python helper
 * (src/python/vramtap/import_pickle.py, standard library only, refusing every class) decodes
 * the file and writes one JSON record per line; this side turns the records into a trace. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "grow.h"
#include "paths.h"
#include "import.h"

extern char **environ;

#define HELPER "vramtap/import_pickle.py"

/* Set on entries without Python frames until the whole file says whether it has any. */
#define NO_PYTHON 0x80

typedef struct {
    vt_trace *tr;
    int32_t *site_map; /* the helper's site ids -> trace site ids */
    size_t nmap, map_cap;
    double origin; /* µs */
    bool ended;
} pctx;

static int64_t num(json_t *o, const char *key)
{
    int64_t v = 0;
    vt_json_i64(o, key, &v);
    return v;
}

static double t_of(json_t *o, const char *key)
{
    return json_number_value(json_object_get(o, key));
}

static int32_t site_of(pctx *p, json_t *o)
{
    int64_t s = num(o, "s");
    return s >= 0 && (size_t)s < p->nmap ? p->site_map[s] : -1;
}

static int on_site(pctx *p, json_t *rec, vt_err *err)
{
    json_t *frames = json_object_get(rec, "frames");
    size_t n = json_array_size(frames), i;
    int32_t *ids = malloc((n + 1) * sizeof *ids);
    if (!ids)
        return vt_imp_nomem(err);
    json_t *f;
    json_array_foreach(frames, i, f)
    {
        const char *type = json_string_value(json_array_get(f, 0));
        if (type && !strcmp(type, "p"))
            ids[i] = vt_iframe_python(&p->tr->sites, json_string_value(json_array_get(f, 1)),
                                      json_string_value(json_array_get(f, 2)),
                                      (int32_t)json_integer_value(json_array_get(f, 3)));
        else
            ids[i] = vt_iframe_native(&p->tr->sites, NULL, json_string_value(json_array_get(f, 1)));
        if (ids[i] < 0) {
            free(ids);
            return vt_imp_nomem(err);
        }
    }
    int32_t site = n ? vt_isite(&p->tr->sites, ids, n) : -1;
    free(ids);
    if (n && site < 0)
        return vt_imp_nomem(err);
    if (vt_grow(&p->site_map, &p->map_cap, p->nmap + 1, sizeof *p->site_map, 16))
        return vt_imp_nomem(err);
    p->site_map[p->nmap++] = site;
    return 0;
}

static int on_record(pctx *p, json_t *rec, vt_err *err)
{
    vt_trace *tr = p->tr;
    const char *type = json_string_value(json_object_get(rec, "type"));
    if (!type)
        return 0;
    if (!strcmp(type, "site"))
        return on_site(p, rec, err);
    if (!strcmp(type, "ev")) {
        vt_mev e = {.t = t_of(rec, "t"),
                    .bytes = num(rec, "b"),
                    .addr = (uint64_t)num(rec, "a"),
                    .total = VT_NO_TOTAL,
                    .site = site_of(p, rec),
                    .device = (int32_t)num(rec, "d"),
                    .category = VT_NO_CATEGORY};
        e.evidence = e.site >= 0 ? vt_isite_evidence(&tr->sites, e.site) : 0;
        if (!json_is_true(json_object_get(rec, "py")))
            e.evidence |= NO_PYTHON;
        p->origin = fmin(p->origin, e.t);
        return e.bytes ? vt_trace_add_ev(tr, &e, err) : 0;
    }
    if (!strcmp(type, "block")) {
        vt_block b = {.device = (int32_t)num(rec, "d"),
                      .addr = (uint64_t)num(rec, "a"),
                      .size = num(rec, "b"),
                      .site = site_of(p, rec),
                      .category = VT_NO_CATEGORY};
        return b.size > 0 ? vt_trace_add_block(tr, true, &b, err) : 0;
    }
    if (!strcmp(type, "span")) {
        const char *kind = json_string_value(json_object_get(rec, "kind"));
        vt_span sp = {.start = t_of(rec, "start"),
                      .end = t_of(rec, "end"),
                      .kind = kind && !strcmp(kind, "zero_grad") ? VT_SPAN_ZERO_GRAD
                                                                 : VT_SPAN_OPTIMIZER};
        return vt_trace_add_span(tr, &sp, err);
    }
    if (!strcmp(type, "oom")) {
        vt_ioom o = {.t = t_of(rec, "t"),
                     .device = (int32_t)num(rec, "d"),
                     .size = num(rec, "b"),
                     .site = site_of(p, rec)};
        return vt_trace_add_oom(tr, &o, err);
    }
    if (!strcmp(type, "device")) {
        vt_devinfo *d = vt_trace_dev(tr, (int32_t)num(rec, "d"), err);
        if (!d)
            return -1;
        d->reserved_peak = num(rec, "reserved_peak");
        d->reserved_end = num(rec, "reserved_end");
        return 0;
    }
    if (!strcmp(type, "meta")) {
        tr->python_stacks = json_is_true(json_object_get(rec, "python_stacks"));
        tr->times_invented = json_is_false(json_object_get(rec, "times_recorded"));
        tr->misses_memory = json_is_true(json_object_get(rec, "misses_memory"));
        size_t i;
        json_t *s;
        json_array_foreach(
            json_object_get(rec, "lacks"), i,
            s) if (vt_trace_lack(tr, err, "%s",
                                 json_string_value(s) ? json_string_value(s) : "?")) return -1;
        json_array_foreach(
            json_object_get(rec, "notes"), i,
            s) if (vt_trace_note(tr, err, "%s",
                                 json_string_value(s) ? json_string_value(s) : "?")) return -1;
        return 0;
    }
    if (!strcmp(type, "end"))
        p->ended = true;
    return 0;
}

/* Times become seconds from the first event or annotation (an optimizer step's annotation can
 * begin before the first allocation the window kept); time_us is the Unix clock in µs. */
static void rebase(pctx *p)
{
    vt_trace *tr = p->tr;
    for (size_t i = 0; i < tr->nspans; i++)
        p->origin = fmin(p->origin, fmin(tr->spans[i].start, tr->spans[i].end));
    for (size_t i = 0; i < tr->nooms; i++)
        p->origin = fmin(p->origin, tr->ooms[i].t);
    double o = isfinite(p->origin) ? p->origin : 0;
    vt_trace_rebase(tr, o, 1e6);
    if (o > 1e15)
        tr->start_unix = o / 1e6;
}

/* Autograd's worker threads run no Python: when the file records Python stacks at all, an entry
 * without them is backward work. */
static void thread_rule(vt_trace *tr)
{
    for (size_t i = 0; i < tr->nev; i++) {
        vt_mev *e = &tr->ev[i];
        if ((e->evidence & NO_PYTHON) && tr->python_stacks && !(e->evidence & VT_EV_OPTIMIZER))
            e->evidence |= VT_EV_BACKWARD;
        e->evidence &= (uint8_t)~NO_PYTHON;
    }
}

static const char *helper_path(void)
{
    const char *dirs[2];
    vt_paths_order(VT_PYDIR_BUILD, VT_PYDIR_INSTALL, dirs);
    static char path[4096];
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dirs[i], HELPER);
        if (!access(path, R_OK))
            return path;
    }
    return NULL;
}

static int read_records(pctx *p, FILE *in, const char *path, vt_err *err)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    size_t lineno = 0;
    int rc = 0;
    while (!rc && (n = getline(&line, &cap, in)) > 0) {
        json_error_t je;
        lineno++;
        json_t *rec = json_loadb(line, (size_t)n, 0, &je);
        if (!rec) {
            vt_err_set(err, "%s: the pickle helper wrote a bad record %zu: %s", path, lineno,
                       je.text);
            rc = -1;
            break;
        }
        rc = on_record(p, rec, err);
        json_decref(rec);
    }
    free(line);
    return rc;
}

int vt_pickle_records(FILE *in, const char *path, vt_trace *tr, vt_err *err)
{
    pctx p = {.tr = tr, .origin = INFINITY};
    int rc = read_records(&p, in, path, err);
    free(p.site_map);
    if (rc)
        return -1;
    if (!p.ended)
        return 1;
    rebase(&p);
    thread_rule(tr);
    return 0;
}

int vt_read_pickle(const char *path, vt_trace *tr, vt_err *err)
{
    tr->format = "pytorch-snapshot";
    const char *python = getenv("VRAMTAP_PYTHON");
    if (!python || !*python)
        python = "/usr/bin/python3";
    const char *helper = helper_path();
    if (!helper) {
        vt_err_set(err, "%s: cannot find the pickle helper %s in %s or %s", path, HELPER,
                   VT_PYDIR_BUILD, VT_PYDIR_INSTALL);
        return -1;
    }
    int fds[2];
    if (pipe(fds)) {
        vt_err_set(err, "cannot create a pipe: %s", strerror(errno));
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
    /* -I: no PYTHON* variables, user site or script directory can change what runs */
    char *const argv[] = {(char *)python, "-I", (char *)helper, (char *)path, NULL};
    pid_t pid;
    int e = posix_spawn(&pid, python, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (e) {
        close(fds[0]);
        vt_err_set(err, "%s: cannot run %s for the pickle helper: %s (set VRAMTAP_PYTHON)", path,
                   python, strerror(e));
        return -1;
    }
    FILE *in = fdopen(fds[0], "r");
    int rc = in ? vt_pickle_records(in, path, tr, err) : vt_imp_nomem(err);
    if (in)
        fclose(in);
    else
        close(fds[0]);
    if (rc < 0)
        kill(pid, SIGTERM);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 2)
        return 2; /* the helper said why */
    if (rc < 0)
        return -1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) || rc) {
        vt_err_set(err, "%s: the pickle helper %s failed (%s %d)", path, helper,
                   WIFSIGNALED(status) ? "signal" : "exit status",
                   WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        return -1;
    }
    return 0;
}
