/* `vramtap export --json`: any snapshot as the JSON document of docs/snapshot-format.md. A
 * compact file's head is copied member by member and its records are spelled out as the
 * allocation objects and event triples the format describes; a JSON file is copied as it is.
 * The snapshot is loaded (checked) first, so only files every verb accepts are exported. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "compact_read.h"
#include "snapshot_keys.h"
#include "split.h"

/* The names of one table as JSON strings, escaped once. */
typedef struct {
    char **json;
    size_t n;
} quoted;

static int quote_all(const char *const *names, size_t n, quoted *q)
{
    q->n = n;
    q->json = calloc(n + 1, sizeof *q->json);
    for (size_t i = 0; q->json && i < n; i++) {
        json_t *s = json_string(names[i]);
        q->json[i] = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
        json_decref(s);
        if (!q->json[i])
            return -1;
    }
    return q->json ? 0 : -1;
}

static void quoted_free(quoted *q)
{
    for (size_t i = 0; q->json && i < q->n; i++)
        free(q->json[i]);
    free(q->json);
}

typedef struct {
    quoted apis, kinds, phases, categories;
} tables;

static void print_us(FILE *out, uint64_t us)
{
    fprintf(out, "%" PRIu64 ".%06" PRIu64, us / 1000000, us % 1000000);
}

static void print_moment(FILE *out, const tables *t, uint64_t phase, uint64_t step,
                         uint64_t instance)
{
    fprintf(out, "{\"phase\": %s, \"step\": %" PRIu64 ", \"instance\": %" PRIu64 "}",
            t->phases.json[phase], step, instance);
}

/* The loader checked every index against its table. */
static void print_rec(FILE *out, const tables *t, const vt_crec *c)
{
    fprintf(out,
            "{\"id\": %" PRIu64 ", \"device\": %" PRIu64 ", \"size\": %" PRIu64 ", \"address\": ",
            c->id, c->device, c->size);
    if (c->address)
        fprintf(out, "\"0x%" PRIx64 "\"", c->address);
    else
        fputs("null", out);
    fprintf(out, ", \"api\": %s, \"kind\": %s, \"birth_time_s\": ", t->apis.json[c->api],
            t->kinds.json[c->kind]);
    print_us(out, c->birth_us);
    fputs(", \"death_time_s\": ", out);
    if (c->dead)
        print_us(out, c->death_us);
    else
        fputs("null", out);
    fprintf(out, ", \"birth_seq\": %" PRIu64 ", \"death_seq\": ", c->birth_seq);
    if (c->dead)
        fprintf(out, "%" PRIu64, c->death_seq);
    else
        fputs("null", out);
    fputs(", \"birth\": ", out);
    print_moment(out, t, c->birth_phase, c->birth_step, c->birth_instance);
    fputs(", \"death\": ", out);
    if (c->dead)
        print_moment(out, t, c->death_phase, c->death_step, c->death_instance);
    else
        fputs("null", out);
    if (c->site == VT_CREC_NO_SITE)
        fputs(", \"site\": null", out);
    else
        fprintf(out, ", \"site\": %" PRIu64, c->site);
    if (c->mpath)
        fprintf(out, ", \"module_path\": %" PRIu64 "%s", c->mpath - 1,
                c->recomputed ? ", \"recomputed\": true" : "");
    for (size_t i = 0; i < c->nlabels; i++)
        fprintf(out, "%s{\"offset\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"category\": %s}%s",
                i ? ", " : ", \"labels\": [", c->labels[i].off, c->labels[i].bytes,
                t->categories.json[c->labels[i].cat], i + 1 == c->nlabels ? "]" : "");
    fputc('}', out);
}

/* A section as the JSON array `key`: allocation objects, or [time_s, id, bytes] events. */
static void print_section(FILE *out, const tables *t, const char *key, const uint8_t *p, size_t len)
{
    bool events = !strcmp(key, VT_K_HISTORY_EVENTS);
    vt_creader r;
    vt_cdelta d = {0};
    size_t n;
    vt_err err;
    fprintf(out, ",\n\"%s\": [", key);
    if (!vt_csection_start(p, len, &r, &n, &err))
        for (size_t i = 0; i < n; i++) {
            vt_crec c;
            vt_cevent e;
            if (events ? vt_cevent_get(&r, &d, &e) : vt_crec_get(&r, &d, &c))
                break;
            fputs(i ? ",\n  " : "\n  ", out);
            if (events) {
                fputc('[', out);
                print_us(out, e.time_us);
                fprintf(out, ", %" PRIu64 ", %" PRId64 "]", e.id, e.bytes);
            } else {
                print_rec(out, t, &c);
            }
        }
    vt_creader_free(&r);
    fputc(']', out);
}

static int print_compact(FILE *out, const vt_snapshot *s, vt_err *err)
{
    vt_compact c;
    vt_cnames names;
    char why[160];
    vt_member *members = NULL;
    size_t n = 0;
    tables t;
    memset(&t, 0, sizeof t);
    int rc = -1;
    if (vt_compact_open(s->file, s->filelen, &c, why, sizeof why)) {
        vt_err_set(err, "%s: %s", s->path, why);
        return -1;
    }
    if (vt_cnames_load(s->root, &names, err))
        return -1;
    if (vt_split_object(s->path, s->buf, s->buflen, &members, &n, err))
        goto done;
    if (quote_all(names.apis, names.napis, &t.apis) ||
        quote_all(names.kinds, names.nkinds, &t.kinds) ||
        quote_all(names.phases, names.nphases, &t.phases) ||
        quote_all(names.categories, names.ncategories, &t.categories)) {
        vt_err_set(err, "%s: out of memory", s->path);
        goto done;
    }
    fputc('{', out);
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        if (members[i].key.len == strlen(VT_K_COMPACT) + 2 &&
            !memcmp(members[i].key.p + 1, VT_K_COMPACT, strlen(VT_K_COMPACT)))
            continue;
        fprintf(out, "%s%.*s: %.*s", first ? "" : ",\n", (int)members[i].key.len, members[i].key.p,
                (int)members[i].value.len, members[i].value.p);
        first = 0;
    }
    print_section(out, &t, VT_K_ALLOCATIONS, c.allocations, c.allocations_len);
    /* the loader checked these sections' records when the head has a history */
    if (json_is_object(json_object_get(s->root, VT_K_HISTORY))) {
        print_section(out, &t, VT_K_HISTORY_ALLOCATIONS, c.history_allocations,
                      c.history_allocations_len);
        print_section(out, &t, VT_K_HISTORY_EVENTS, c.history_events, c.history_events_len);
    }
    fputs("}\n", out);
    rc = 0;
done:
    quoted_free(&t.apis);
    quoted_free(&t.kinds);
    quoted_free(&t.phases);
    quoted_free(&t.categories);
    vt_members_free(members, n);
    vt_cnames_free(&names);
    return rc;
}

int vt_export_json(FILE *out, const vt_snapshot *s, vt_err *err)
{
    if (s->file)
        return print_compact(out, s, err);
    fwrite(s->buf, 1, s->buflen, out);
    return 0;
}
