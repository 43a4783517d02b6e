/* The snapshot file (docs/snapshot-format.md). Under the state lock the writer copies what the
 * file needs (a frozen copy: devices, counters, timeline, out-of-memory events, the records of
 * the allocations it lists) and lets go; formatting, symbol names and the disk all happen with
 * no vramtap lock held, so an allocating thread waits for the copy only, never for the disk.
 * The file is written to a new temporary file and put in place when complete (outfile.c), so
 * a reader never sees half a file. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "command.h"
#include "attach.h"
#include "compact.h"
#include "freeze.h"
#include "grow.h"
#include "history.h"
#include "hostram.h"
#include "offload.h"
#include "identity.h"
#include "json_out.h"
#include "launcher.h"
#include "locks.h"
#include "modules.h"
#include "mpath.h"
#include "notice.h"
#include "outfile.h"
#include "peak.h"
#include "pystack.h"
#include "record.h"
#include "snapshot.h"
#include "snapshot_keys.h"
#include "stacks.h"
#include "table.h"

#define INTERIM_AT_ONCE 3

/* Sites are written densely: only those the file's allocations and events refer to. */
typedef struct {
    uint32_t *index; /* interned id -> index in the file, VT_NO_SITE if not referenced */
    uint32_t *order; /* index in the file -> interned id */
    uint32_t n, cap;
} sitemap;

/* Times in a file are converted with one time base, taken when the file is begun; each writing
 * thread has its own. */
static VT_TLS vt_timebase timebase;

static double secs(uint64_t ticks)
{
    return vt_seconds(&timebase, ticks);
}

/* The site's index in the file, numbered at its first reference; VT_NO_SITE for none. */
static uint32_t site_index(sitemap *sm, uint32_t site)
{
    if (site == VT_NO_SITE || site >= sm->cap || !sm->index)
        return VT_NO_SITE;
    if (sm->index[site] == VT_NO_SITE) {
        sm->index[site] = sm->n;
        sm->order[sm->n++] = site;
    }
    return sm->index[site];
}

static void site_ref(FILE *f, sitemap *sm, uint32_t site)
{
    uint32_t i = site_index(sm, site);
    if (i == VT_NO_SITE)
        fputs("null", f);
    else
        fprintf(f, "%u", i);
}

/* A section of the compact file, filled record by record. */
typedef struct {
    vt_cbuf buf;
    vt_cdelta d;
    uint64_t n;
} section;

/* What the records refer to while they are encoded. */
typedef struct {
    sitemap *sm;
    uint32_t npaths; /* the module paths the file lists */
    section allocs, hallocs, hevents;
    vt_clabel *labels; /* the current record's */
    size_t nlabels, caplabels;
    int history, failed;
} records;

static uint64_t micros(uint64_t ticks)
{
    double s = secs(ticks) * 1e6 + 0.5;
    return s > 0 ? (uint64_t)s : 0;
}

static uint64_t phase_index(uint8_t phase)
{
    return phase <= VT_PHASE_OTHER ? phase : VT_PHASE_OTHER;
}

static void add_label(void *ctx, uint64_t off, uint64_t len, int cat)
{
    records *o = ctx;
    if (vt_grow(&o->labels, &o->caplabels, o->nlabels + 1, sizeof *o->labels, 16)) {
        o->failed = 1;
        return;
    }
    o->labels[o->nlabels++] = (vt_clabel){off, len, (uint64_t)cat};
}

static void put_rec(records *o, section *sec, const frozen_rec *r, vt_identity_frozen *identity)
{
    o->nlabels = 0;
    vt_identity_labels(identity, r->id, r->address, r->size, r->birth.seq, r->dead, r->death.seq,
                       add_label, o);
    uint32_t site = site_index(o->sm, r->site);
    vt_crec c = {.id = r->id,
                 .device = (uint64_t)r->device,
                 .size = r->size,
                 .address = r->address,
                 .api = r->api,
                 .kind = r->kind,
                 .birth_us = micros(r->birth.time),
                 .birth_seq = r->birth.seq,
                 .birth_phase = phase_index(r->birth.phase),
                 .birth_step = r->birth.step,
                 .birth_instance = r->birth.instance,
                 .dead = r->dead,
                 .site = site == VT_NO_SITE ? VT_CREC_NO_SITE : site,
                 .nlabels = o->nlabels,
                 .labels = o->labels,
                 .mpath = vt_mpath_ref(r->mpath, o->npaths),
                 .recomputed = r->mpath & VT_MPATH_RECOMPUTED && vt_mpath_ref(r->mpath, o->npaths)};
    if (r->dead) {
        c.death_us = micros(r->death.time);
        c.death_seq = r->death.seq;
        c.death_phase = phase_index(r->death.phase);
        c.death_step = r->death.step;
        c.death_instance = r->death.instance;
    }
    vt_crec_put(&sec->buf, &sec->d, &c);
    sec->n++;
}

static int id_order(const void *pa, const void *pb)
{
    uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
    return (a > b) - (a < b);
}

static void history_alloc(void *ctx, const frozen_rec *r)
{
    records *o = ctx;
    put_rec(o, &o->hallocs, r, NULL); /* history_allocations carry no labels */
}

static void history_event(void *ctx, uint64_t ticks, uint64_t id, int64_t bytes)
{
    records *o = ctx;
    vt_cevent e = {micros(ticks), id, bytes};
    vt_cevent_put(&o->hevents.buf, &o->hevents.d, &e);
    o->hevents.n++;
}

static void copy_site(FILE *f, void *sm, uint32_t site)
{
    site_ref(f, sm, site);
}

static double history_seconds(void *ctx, uint64_t ticks)
{
    (void)ctx;
    return secs(ticks);
}

/* The history's allocations that `allocations` does not list, and its events. The listed ids
 * are a bit each over their span when that takes at most 8 bytes a record (no sort, no search,
 * whatever order the copy took the records in), else sorted. */
static void write_history(FILE *f, const frozen *fz, records *o)
{
    const vt_rec *recs = fz->out.recs;
    size_t n = fz->out.n;
    vt_history_listed l = {.nids = n, .lo = UINT64_MAX};
    for (size_t i = 0; i < n; i++) {
        uint64_t id = vt_rec_id(&recs[i]);
        l.lo = id < l.lo ? id : l.lo;
        l.hi = id > l.hi ? id : l.hi;
    }
    uint64_t *bits = NULL, *ids = NULL;
    if (n && (l.hi - l.lo) / 64 < n) {
        bits = calloc((l.hi - l.lo) / 64 + 1, sizeof *bits);
        for (size_t i = 0; bits && i < n; i++) {
            uint64_t at = vt_rec_id(&recs[i]) - l.lo;
            bits[at >> 6] |= UINT64_C(1) << (at & 63);
        }
    } else if (n) {
        ids = malloc(n * sizeof *ids);
        for (size_t i = 0; ids && i < n; i++)
            ids[i] = vt_rec_id(&recs[i]);
        if (ids)
            qsort(ids, n, sizeof *ids, id_order);
    }
    if (n && !bits && !ids) {
        o->failed = 1;
        return;
    }
    l.bits = bits;
    l.ids = ids;
    for (int i = 0; i < fz->ndev; i++)
        l.used_devices |= 1u << fz->ordinal[i];
    o->history = vt_history_write(
        f, fz->history, &l, &(vt_history_out){history_alloc, history_event, history_seconds, o});
    free(bits);
    free(ids);
}

static void write_section(FILE *f, const char tag[4], const section *sec)
{
    uint8_t head[VT_CSECTION_HEAD_MAX];
    fwrite(head, 1, vt_csection_head(head, tag, sec->n, sec->buf.len), f);
    if (sec->buf.len)
        fwrite(sec->buf.p, 1, sec->buf.len, f);
}

/* The names the records' api, kind, phase and label category indexes stand for. */
static void write_names(FILE *f)
{
    fputs(VT_JSON_KEY(VT_K_COMPACT) "{\"apis\": [", f);
    for (int i = 0; i < VT_API_COUNT; i++)
        fprintf(f, "%s\"%s\"", i ? ", " : "", vt_api_name((vt_api)i));
    fputs("], \"kinds\": [", f);
    for (int i = 0; i <= VT_KIND_HOST; i++)
        fprintf(f, "%s\"%s\"", i ? ", " : "", vt_kind_name((vt_kind)i));
    fputs("], \"phases\": [", f);
    for (int i = 0; i <= VT_PHASE_OTHER; i++)
        fprintf(f, "%s\"%s\"", i ? ", " : "", vt_phase_name((vt_phase)i));
    fputs("], \"categories\": [", f);
    for (int i = 0; i < VT_ID_COUNT; i++)
        fprintf(f, "%s\"%s\"", i ? ", " : "", vt_identity_category_name(i));
    fputs("]},\n", f);
}

static void write_env(FILE *f)
{
    static const char *const names[] = {"PYTORCH_CUDA_ALLOC_CONF",
                                        "PYTORCH_ALLOC_CONF",
                                        "XLA_PYTHON_CLIENT_ALLOCATOR",
                                        "XLA_PYTHON_CLIENT_PREALLOCATE",
                                        "TF_GPU_ALLOCATOR",
                                        "CUDA_VISIBLE_DEVICES",
                                        "CUDA_DEVICE_ORDER",
                                        "VRAMTAP_MODE"};
    fputs(VT_JSON_KEY(VT_K_ENV) "{", f);
    int first = 1;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (!v)
            continue;
        fprintf(f, "%s\"%s\": ", first ? "" : ", ", names[i]);
        vt_json_str(f, v);
        first = 0;
    }
    fputs("},\n" VT_JSON_KEY(VT_K_ENV_SET) "{", f);
    for (int i = 0; i < vt_env_set_count(); i++) {
        fprintf(f, "%s", i ? ", " : "");
        vt_json_str(f, vt_env_set_name(i));
        fputs(": ", f);
        vt_json_str(f, vt_env_set_value(i));
    }
    fputs("},\n" VT_JSON_KEY(VT_K_MODES) "{", f);
    static const char *const frameworks[] = {"pytorch", "jax", "tensorflow"};
    first = 1;
    for (size_t i = 0; i < sizeof frameworks / sizeof frameworks[0]; i++) {
        const char *reason, *mode = vt_mode_of(frameworks[i], &reason);
        if (!mode)
            continue;
        /* The PyTorch hooks may have set both (vramtap_note_mode): escaped like any string. */
        fprintf(f, "%s\"%s\": {\"mode\": ", first ? "" : ", ", frameworks[i]);
        vt_json_str(f, mode);
        fputs(", \"reason\": ", f);
        vt_json_str(f, reason);
        fputc('}', f);
        first = 0;
    }
    fputs("},\n", f);
}

static void write_counters(FILE *f, const vt_counters *c)
{
    fprintf(
        f,
        VT_JSON_KEY(
            VT_K_COUNTERS) "{\"allocs\": %llu, \"frees\": %llu, \"unknown_frees\": %llu, "
                           "\"failed_calls\": %llu, \"oom_calls\": %llu, \"host_allocs\": %llu, "
                           "\"host_frees\": %llu, \"vmm_creates\": %llu, \"vmm_releases\": %llu, "
                           "\"vmm_maps\": %llu, \"vmm_unmaps\": %llu, \"nested_calls\": %llu, "
                           "\"dropped\": %llu},\n",
        (unsigned long long)c->allocs, (unsigned long long)c->frees,
        (unsigned long long)c->unknown_frees, (unsigned long long)c->failed_calls,
        (unsigned long long)c->oom_calls, (unsigned long long)c->host_allocs,
        (unsigned long long)c->host_frees, (unsigned long long)c->vmm_creates,
        (unsigned long long)c->vmm_releases, (unsigned long long)c->vmm_maps,
        (unsigned long long)c->vmm_unmaps, (unsigned long long)c->nested_calls,
        (unsigned long long)c->dropped);
}

static void write_samples(FILE *f, const vt_device *dev)
{
    static const char *const reasons[] = {"phase", "peak", "oom"};
    fputs("[", f);
    for (int i = 0; i < dev->nsamples; i++) {
        const vt_sample *s = &dev->samples[i];
        fprintf(f, "%s{\"time_s\": ", i ? ", " : "");
        vt_json_time(f, secs(s->time));
        fprintf(f, ", \"reason\": \"%s\", \"free_bytes\": %lld, \"total_bytes\": %lld",
                reasons[s->reason], (long long)s->free_bytes, (long long)s->total_bytes);
        fputs(", \"rss_bytes\": ", f);
        vt_json_int_or_null(f, s->rss_bytes);
        static const char *const pool_keys[4] = {"pool_reserved_bytes", "pool_used_bytes",
                                                 "pool_reserved_high_bytes",
                                                 "pool_used_high_bytes"};
        for (int k = 0; k < 4; k++) {
            fprintf(f, ", \"%s\": ", pool_keys[k]);
            vt_json_int_or_null(f, s->have_pool ? (int64_t)s->pool[k] : -1);
        }
        fputc('}', f);
    }
    fputs("]", f);
}

static void write_devices(FILE *f, const frozen *fz)
{
    fputs(VT_JSON_KEY(VT_K_DEVICES) "[", f);
    for (int i = 0; i < fz->ndev; i++) {
        const vt_device *dev = &fz->dev[i];
        fprintf(f, "%s\n  {\"device\": %d, \"uuid\": ", i ? "," : "", fz->ordinal[i]);
        vt_json_str(f, dev->uuid[0] ? dev->uuid : NULL);
        fputs(", \"pci_bus_id\": ", f);
        vt_json_str(f, dev->pci_bus_id[0] ? dev->pci_bus_id : NULL);
        fputs(", \"name\": ", f);
        vt_json_str(f, dev->name[0] ? dev->name : NULL);
        fputs(", \"total_bytes\": ", f);
        vt_json_int_or_null(f, dev->total ? (int64_t)dev->total : -1);
        fprintf(f, ", \"peak_bytes\": %llu, \"peak_time_s\": ", (unsigned long long)dev->peak);
        vt_json_time(f, secs(dev->peak_time));
        fprintf(f,
                ", \"peak_seq\": %llu, \"peak_phase\": \"%s\", \"peak_step\": %u, "
                "\"live_bytes_at_end\": %llu, \"allocs\": %llu, \"reserved\": ",
                (unsigned long long)dev->peak_seq, vt_phase_name(dev->peak_phase), dev->peak_step,
                (unsigned long long)dev->live, (unsigned long long)dev->allocs);
        if (dev->have_pool)
            fprintf(f, "{\"source\": \"pool\", \"peak_bytes\": %llu, \"current_bytes\": %llu}",
                    (unsigned long long)dev->pool_reserved_high,
                    (unsigned long long)dev->pool_reserved_now);
        else
            fputs("null", f);
        fputs(", \"samples\": ", f);
        write_samples(f, dev);
        fputs(", \"used_at_peak_bytes\": ", f);
        vt_json_int_or_null(f, dev->used_at_peak);
        fputs(", \"rss_at_peak_bytes\": ", f);
        vt_json_int_or_null(f, dev->rss_at_peak);
        fputs(", \"workers_at_peak_bytes\": ", f);
        vt_json_int_or_null(f, dev->workers_at_peak);
        fputc('}', f);
    }
    fputs("],\n", f);
}

static void write_timeline(FILE *f, const frozen *fz)
{
    fputs(VT_JSON_KEY(VT_K_TIMELINE) "[", f);
    for (size_t i = 0; i < fz->nspans; i++) {
        const vt_span *s = &fz->spans[i];
        fprintf(f, "%s\n  {\"instance\": %u, \"phase\": \"%s\", \"step\": %u, \"start_s\": ",
                i ? "," : "", s->instance, vt_phase_name(s->phase), s->step);
        vt_json_time(f, secs(s->start));
        fputs(", \"end_s\": ", f);
        vt_json_time(f, s->end ? secs(s->end) : -1);
        fputs(", \"devices\": [", f);
        for (int k = 0; k < fz->ndev; k++) {
            int d = fz->ordinal[k];
            fprintf(f,
                    "%s{\"device\": %d, \"live_start\": %llu, \"live_end\": %llu, "
                    "\"live_max\": %llu}",
                    k ? ", " : "", d, (unsigned long long)s->live_start[d],
                    (unsigned long long)s->live_end[d], (unsigned long long)s->live_max[d]);
        }
        fputs("]}", f);
    }
    fputs("],\n" VT_JSON_KEY(VT_K_TIMELINE_SUMMARY), f);
    if (!fz->folded_instances) {
        fputs("null,\n", f);
        return;
    }
    fprintf(f, "{\"instances\": %llu, \"first_step\": %u, \"last_step\": %u, \"live_max\": {",
            (unsigned long long)fz->folded_instances, fz->folded_first_step, fz->folded_last_step);
    for (int k = 0; k < fz->ndev; k++)
        fprintf(f, "%s\"%d\": %llu", k ? ", " : "", fz->ordinal[k],
                (unsigned long long)fz->folded_live_max[fz->ordinal[k]]);
    fputs("}},\n", f);
}

/* Each bounded table: its cap and what it left out once full. */
static void write_bounds(FILE *f, const frozen *fz)
{
    uint64_t stacks, modules;
    vt_stack_count(&stacks);
    vt_module_count(&modules);
    const struct {
        const char *name;
        uint64_t cap, dropped;
    } b[] = {
        {"timeline", VT_TIMELINE_MAX, fz->left_out.timeline},
        {"samples", VT_MAX_SAMPLES, fz->left_out.samples},
        {"oom_events", VT_MAX_OOMS, fz->left_out.oom_events},
        {"pools", VT_MAX_POOLS, fz->left_out.pools},
        {"devices", VT_MAX_DEVICES, fz->left_out.devices},
        {"stacks", VT_MAX_STACKS, stacks},
        {"modules", VT_MAX_MODULES, modules},
        {"python_locations", VT_PYSTACK_MAX_LOCS, vt_pystack_dropped()},
    };
    fputs(VT_JSON_KEY(VT_K_BOUNDS) "{", f);
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
        fprintf(f, "%s\"%s\": {\"cap\": %llu, \"dropped\": %llu}", i ? ", " : "", b[i].name,
                (unsigned long long)b[i].cap, (unsigned long long)b[i].dropped);
    fputs("},\n", f);
}

/* Every module a site may refer to: those recorded so far, which the sites written before
 * this include. */
static void write_modules(FILE *f)
{
    fputs(VT_JSON_KEY(VT_K_MODULES) "[", f);
    int n = vt_module_count(NULL);
    for (int i = 0; i < n; i++) {
        vt_module m = vt_module_get(i);
        fprintf(f, "%s\n  {\"id\": %d, \"path\": ", i ? "," : "", i);
        vt_json_str(f, m.path);
        fputs(", \"build_id\": ", f);
        vt_json_str(f, m.build_id);
        fputs(", \"base\": ", f);
        fprintf(f, "\"0x%lx\"}", (unsigned long)m.base);
    }
    fputs("]", f);
}

static void write_oom_fields(FILE *f, const vt_oom *o, sitemap *sm)
{
    fprintf(f,
            "\"n\": %d, \"time_s\": %.6f, \"device\": %d, \"size\": %llu, \"api\": \"%s\", "
            "\"phase\": \"%s\", \"step\": %u, \"site\": ",
            o->n, secs(o->time), o->device, (unsigned long long)o->size, vt_api_name(o->api),
            vt_phase_name(o->phase), o->step);
    site_ref(f, sm, o->site);
}

static void write_ooms(FILE *f, const frozen *fz, sitemap *sm)
{
    fputs(VT_JSON_KEY(VT_K_OOM_EVENTS) "[", f);
    for (int i = 0; i < fz->nooms; i++) {
        const vt_oom *o = &fz->ooms[i];
        fprintf(f, "%s\n  {", i ? "," : "");
        write_oom_fields(f, o, sm);
        fprintf(f, ", \"retry_succeeded\": %s, \"file\": ", o->retry_succeeded ? "true" : "false");
        if (o->n <= vt_cfg.oom_max) {
            char name[VT_OUTFILE_NAME_MAX];
            vt_outfile_oom_name(name, sizeof name, o->n);
            vt_json_str(f, name);
        } else {
            fputs("null", f);
        }
        fputc('}', f);
    }
    fputs("],\n", f);
}

/* -1 when memory ran out for the records: the file would be incomplete. */
static int write_doc(FILE *f, const char *kind, const vt_oom *oom, const frozen *fz)
{
    timebase = vt_clock_calibrate();
    uint32_t nsites = vt_stack_count(NULL);
    sitemap sm = {.cap = nsites};
    if (nsites) {
        sm.index = malloc(nsites * sizeof *sm.index);
        sm.order = malloc(nsites * sizeof *sm.order);
        if (!sm.index || !sm.order) {
            free(sm.index);
            free(sm.order);
            sm = (sitemap){0};
        } else {
            memset(sm.index, 0xff, nsites * sizeof *sm.index);
        }
    }

    fputs(VT_COMPACT_MAGIC "{" VT_JSON_KEY(VT_K_FORMAT) "\"" VT_SNAPSHOT_FORMAT "\", ", f);
    fprintf(f, VT_JSON_KEY(VT_K_VERSION) "%d, " VT_JSON_KEY(VT_K_KIND) "\"%s\",\n",
            VT_SNAPSHOT_VERSION, kind);
    fprintf(f, VT_JSON_KEY(VT_K_VRAMTAP_VERSION) "\"%s\", ", VT_VERSION);
    fprintf(f, VT_JSON_KEY(VT_K_PID) "%d, " VT_JSON_KEY(VT_K_PROG), (int)getpid());
    vt_json_str(f, vt_cfg.prog);
    fputs(",\n", f);
    vt_command_write_json(f);
    fprintf(f, VT_JSON_KEY(VT_K_START_UNIX) "%.6f, " VT_JSON_KEY(VT_K_END_TIME_S) "%.6f,\n",
            vt_start_unix(), secs(fz->end_time));
    vt_launcher_write_json(f);
    vt_attach_write(f);
    write_env(f);
    fprintf(f, VT_JSON_KEY(VT_K_PHASE_MARKERS) "%s, " VT_JSON_KEY(VT_K_STEPS) "%u,\n",
            fz->markers ? "true" : "false", fz->step);
    fprintf(f, VT_JSON_KEY(VT_K_STACKS) "{\"native\": %s, \"python\": %s, \"depth\": %d},\n",
            vt_cfg.stacks ? "true" : "false",
            vt_cfg.stacks && vt_cfg.python_stacks ? "true" : "false", vt_cfg.depth);
    write_counters(f, &fz->c);
    write_bounds(f, fz);
    write_devices(f, fz);
    char host[256];
    vt_host_name(host, sizeof host);
    fputs(VT_JSON_KEY(VT_K_HOST) "{\"name\": ", f);
    vt_json_str(f, host[0] ? host : NULL);
    fprintf(f,
            ", \"peak_bytes\": %llu, \"peak_time_s\": %.6f, \"live_bytes_at_end\": "
            "%llu, \"allocations\": %llu},\n",
            (unsigned long long)fz->host_peak, secs(fz->host_peak_time),
            (unsigned long long)fz->host_live, (unsigned long long)fz->host_allocs);
    vt_hostram_write_json(f, &fz->ram, secs(fz->ram.time), &fz->workers);
    vt_copies_write(f, fz->copies, copy_site, &sm);
    vt_offload_write(f, fz->pinned, fz->npinned, fz->out.labels);
    records o = {.sm = &sm, .npaths = vt_mpath_count()};
    for (size_t i = 0, dead_at = 0; i < fz->out.n; i++) {
        frozen_rec r;
        vt_copied_get(&fz->out, i, &dead_at, &r);
        put_rec(&o, &o.allocs, &r, fz->out.labels);
    }
    vt_identity_write_summary(f, fz->out.labels);
    vt_record_write(f, fz->record);
    write_timeline(f, fz);
    write_ooms(f, fz, &sm);
    if (oom) {
        fputs(VT_JSON_KEY(VT_K_OOM) "{", f);
        write_oom_fields(f, oom, &sm);
        fprintf(f, ", \"error\": %d, \"free_bytes\": ", oom->error);
        vt_json_int_or_null(f, oom->free_bytes);
        fputs(", \"total_bytes\": ", f);
        vt_json_int_or_null(f, oom->total_bytes);
        fputs("},\n", f);
    }
    /* after the out-of-memory events and request, so that their sites come first */
    write_history(f, fz, &o);
    /* Last, once every reference has been numbered. */
    fputs(VT_JSON_KEY(VT_K_SITES) "[", f);
    for (uint32_t i = 0; i < sm.n; i++) {
        fputs(i ? ",\n  " : "\n  ", f);
        vt_stack_write_json(f, sm.order[i], i);
    }
    fputs("],\n", f);
    write_names(f);
    vt_mpath_write_json(f, o.npaths);
    write_modules(f);
    fputs("}\n", f);
    fputc(0, f);
    /* Without its END section a reader says the file is cut short, as it is. */
    int failed = o.failed || o.allocs.buf.failed || o.hallocs.buf.failed || o.hevents.buf.failed;
    if (!failed) {
        write_section(f, VT_SEC_ALLOCATIONS, &o.allocs);
        if (o.history) {
            write_section(f, VT_SEC_HISTORY_ALLOCATIONS, &o.hallocs);
            write_section(f, VT_SEC_HISTORY_EVENTS, &o.hevents);
        }
        fwrite(VT_CSECTION_END, 1, 5, f);
    }
    vt_cbuf_free(&o.allocs.buf);
    vt_cbuf_free(&o.hallocs.buf);
    vt_cbuf_free(&o.hevents.buf);
    free(o.labels);
    free(sm.index);
    free(sm.order);
    return failed ? -1 : 0;
}

/* oom_n: the post-mortem's number, 0 for the snapshot; wait: see vt_outfile_open. 0 when the
 * file was written or could not be (said once), 1 when an interim file was put off. */
static int write_file_frozen(int oom_n, int wait, const char *kind, const vt_oom *oom)
{
    frozen fz = {0};
    int interim = strcmp(kind, "interim") == 0;
    int frozen_rc = vt_freeze(&fz, oom, interim);
    if (frozen_rc) {
        vt_thaw(&fz);
        if (frozen_rc == 1) {
            vt_debug("interim snapshot put off: the peak moved while it was copied");
            return 1;
        }
        vt_warn_once("out of memory writing a snapshot in %s", vt_cfg.out_dir);
        return 0;
    }
    vt_outfile out;
    FILE *f = vt_outfile_open(&out, oom_n, wait);
    if (!f) {
        vt_thaw(&fz);
        return 0;
    }
    char *buf = malloc(1 << 16);
    if (buf)
        setvbuf(f, buf, _IOFBF, 1 << 16);
    if (write_doc(f, kind, oom, &fz))
        vt_warn_once("out of memory writing a snapshot in %s", vt_cfg.out_dir);
    vt_thaw(&fz);
    int placed = vt_outfile_close(&out);
    free(buf);
    if (placed == 0) {
        char path[sizeof vt_cfg.out_dir + VT_OUTFILE_NAME_MAX + 2];
        snprintf(path, sizeof path, "%s/%s", vt_cfg.out_dir, out.name);
        vt_notice_written(path, oom_n);
    }
    return 0;
}

/* A thread cancelled inside the write would leave the temporary file and, worse, whatever lock
 * stdio holds: cancellation waits until the file is done. */
static int write_file(int oom_n, int wait, const char *kind, const vt_oom *oom)
{
    int cancel;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
    int put_off = write_file_frozen(oom_n, wait, kind, oom);
    pthread_setcancelstate(cancel, NULL);
    return put_off;
}

void vt_snapshot_write_exit(void)
{
    vt_lock();
    int made = vt_state.made_device_alloc;
    vt_unlock();
    if (!made)
        return;
    write_file(0, 1, "exit", NULL);
}

/* vt_peak_rises when the last interim file was written: written with the lock held, read
 * without it too. */
static _Atomic uint64_t written_rises;

static int peak_rose(void)
{
    return atomic_load_explicit(&vt_peak_rises, memory_order_relaxed) !=
           atomic_load_explicit(&written_rises, memory_order_relaxed);
}

/* Without the lock: a phase boundary asks it at every step, and the lock and a scan of the
 * devices took 300 instructions. A rise it misses on another thread is written all the same,
 * with the GIL held. */
int vt_snapshot_interim_may_write(void)
{
    return vt_cfg.interim_s && peak_rose();
}

void vt_snapshot_write_interim(void)
{
    static double last;
    static int written;
    /* most step boundaries, once the peaks have stopped rising: no lock, no clock */
    if (!vt_cfg.interim_s || !peak_rose())
        return;
    double now = vt_mono_seconds();
    vt_lock();
    /* Peaks stop rising after the first steps: then nothing more is written. The first few
     * steps, where the peak is usually reached, are written at once. */
    uint64_t rises = atomic_load_explicit(&vt_peak_rises, memory_order_relaxed);
    int due = peak_rose() && (written < INTERIM_AT_ONCE || now - last >= vt_cfg.interim_s);
    if (due) {
        last = now;
        written++;
        atomic_store_explicit(&written_rises, rises, memory_order_relaxed);
    }
    vt_unlock();
    if (!due || !write_file(0, 0, "interim", NULL))
        return;
    /* put off: the next step mark writes it, whatever the peak does meanwhile (rises only
     * grows: it never comes back to one less than it was) */
    vt_lock();
    atomic_store_explicit(&written_rises, rises - 1, memory_order_relaxed);
    written--;
    vt_unlock();
}

void vt_snapshot_write_oom(int n)
{
    vt_lock();
    vt_oom oom = vt_state.ooms[n - 1];
    vt_unlock();
    write_file(n, 1, "oom", &oom);
}
