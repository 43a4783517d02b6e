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
#include "freeze.h"
#include "history.h"
#include "hostram.h"
#include "identity.h"
#include "json_out.h"
#include "launcher.h"
#include "locks.h"
#include "modules.h"
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

static void site_ref(FILE *f, sitemap *sm, uint32_t site)
{
    if (site == VT_NO_SITE || site >= sm->cap || !sm->index) {
        fputs("null", f);
        return;
    }
    if (sm->index[site] == VT_NO_SITE) {
        sm->index[site] = sm->n;
        sm->order[sm->n++] = site;
    }
    fprintf(f, "%u", sm->index[site]);
}

static void write_mark(FILE *f, const vt_mark *m)
{
    fprintf(f, "{\"phase\": \"%s\", \"step\": %u, \"instance\": %u}", vt_phase_name(m->phase),
            m->step, m->instance);
}

static void write_rec(FILE *f, const frozen_rec *r, int *first, sitemap *sm,
                      vt_identity_frozen *identity)
{
    fprintf(f,
            "%s\n  {\"id\": %llu, \"device\": %d, \"size\": %llu, \"address\": ", *first ? "" : ",",
            (unsigned long long)r->id, r->device, (unsigned long long)r->size);
    *first = 0;
    vt_json_addr(f, r->address);
    fprintf(f, ", \"api\": \"%s\", \"kind\": \"%s\", \"birth_time_s\": ", vt_api_name(r->api),
            vt_kind_name(r->kind));
    vt_json_time(f, secs(r->birth.time));
    fputs(", \"death_time_s\": ", f);
    vt_json_time(f, r->dead ? secs(r->death.time) : -1);
    fprintf(f, ", \"birth_seq\": %llu, \"death_seq\": ", (unsigned long long)r->birth.seq);
    if (r->dead)
        fprintf(f, "%llu", (unsigned long long)r->death.seq);
    else
        fputs("null", f);
    fputs(", \"birth\": ", f);
    write_mark(f, &r->birth);
    fputs(", \"death\": ", f);
    if (r->dead)
        write_mark(f, &r->death);
    else
        fputs("null", f);
    fputs(", \"site\": ", f);
    site_ref(f, sm, r->site);
    vt_identity_write_rec(f, identity, r->id, r->address, r->size, r->birth.seq, r->dead,
                          r->death.seq);
    fputc('}', f);
}

static void history_alloc(FILE *f, void *sm, const vt_rec *r, int *first)
{
    frozen_rec fr = vt_frozen_rec(r);
    write_rec(f, &fr, first, sm, NULL); /* history_allocations carry no labels */
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

/* The history's allocations that `allocations` does not list, and its events. */
static void write_history(FILE *f, const frozen *fz, sitemap *sm)
{
    uint64_t *ids = malloc((fz->nrecs + 1) * sizeof *ids);
    if (!ids)
        return;
    for (size_t i = 0; i < fz->nrecs; i++)
        ids[i] = fz->recs[i].id;
    qsort(ids, fz->nrecs, sizeof *ids, vt_history_id_order);
    vt_history_listed l = {.ids = ids, .nids = fz->nrecs};
    for (int i = 0; i < fz->ndev; i++)
        l.used_devices |= 1u << fz->ordinal[i];
    vt_history_write(f, fz->history, &l, &(vt_history_out){history_alloc, history_seconds, sm});
    free(ids);
}

static void write_allocations(FILE *f, const frozen *fz, sitemap *sm)
{
    int first = 1;
    for (size_t i = 0; i < fz->nrecs; i++)
        write_rec(f, &fz->recs[i], &first, sm, fz->identity);
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

static void write_doc(FILE *f, const char *kind, const vt_oom *oom, const frozen *fz)
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

    fputs("{" VT_JSON_KEY(VT_K_FORMAT) "\"" VT_SNAPSHOT_FORMAT "\", ", f);
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
    fputs(VT_JSON_KEY(VT_K_ALLOCATIONS) "[", f);
    write_allocations(f, fz, &sm);
    fputs("],\n", f);
    vt_identity_write_summary(f, fz->identity);
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
    write_history(f, fz, &sm);
    /* Last, once every reference has been numbered. */
    fputs(VT_JSON_KEY(VT_K_SITES) "[", f);
    for (uint32_t i = 0; i < sm.n; i++) {
        fputs(i ? ",\n  " : "\n  ", f);
        vt_stack_write_json(f, sm.order[i], i);
    }
    fputs("],\n", f);
    write_modules(f);
    fputs("}\n", f);
    free(sm.index);
    free(sm.order);
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
    write_doc(f, kind, oom, &fz);
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

void vt_snapshot_write_interim(void)
{
    static uint64_t written_peak[VT_MAX_DEVICES];
    static double last;
    static int written;
    if (!vt_cfg.interim_s)
        return;
    double now = vt_mono_seconds();
    int rose = 0;
    vt_lock();
    /* Peaks stop rising after the first steps: then nothing more is written. The first few
     * steps, where the peak is usually reached, are written at once. */
    for (int d = 0; d < VT_MAX_DEVICES; d++)
        rose |= vt_state.dev[d].peak > written_peak[d];
    int due = rose && (written < INTERIM_AT_ONCE || now - last >= vt_cfg.interim_s);
    if (due) {
        last = now;
        written++;
        for (int d = 0; d < VT_MAX_DEVICES; d++)
            written_peak[d] = vt_state.dev[d].peak;
    }
    vt_unlock();
    if (!due || !write_file(0, 0, "interim", NULL))
        return;
    /* put off: the next step mark writes it, whatever the peak does meanwhile */
    vt_lock();
    memset(written_peak, 0, sizeof written_peak);
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
