/* The snapshot file (docs/snapshot-format.md). Written under the state lock, straight to a
 * temporary file that is renamed into place, so a reader never sees half a file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json_out.h"
#include "notice.h"
#include "peak.h"
#include "snapshot.h"
#include "stacks.h"
#include "table.h"

#define FORMAT_VERSION 1
#define INTERIM_AT_ONCE 3

/* Sites are written densely: only those the file's allocations and events refer to. */
typedef struct {
    uint32_t *index; /* interned id -> index in the file, VT_NO_SITE if not referenced */
    uint32_t *order; /* index in the file -> interned id */
    uint32_t n, cap;
} sitemap;

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

static void write_rec(FILE *f, const vt_rec *r, int *first, sitemap *sm)
{
    fprintf(f,
            "%s\n  {\"id\": %llu, \"device\": %d, \"size\": %llu, \"address\": ", *first ? "" : ",",
            (unsigned long long)r->id, r->device, (unsigned long long)r->size);
    *first = 0;
    vt_json_addr(f, r->address);
    fprintf(f, ", \"api\": \"%s\", \"kind\": \"%s\", \"birth_time_s\": ", vt_api_name(r->api),
            vt_kind_name(r->kind));
    vt_json_time(f, vt_seconds(r->birth.time));
    fputs(", \"death_time_s\": ", f);
    vt_json_time(f, r->dead ? vt_seconds(r->death.time) : -1);
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
    fputc('}', f);
}

/* Exit: the live set at each device's peak. Post-mortem: what is live on the failing device. */
static void write_allocations(FILE *f, const vt_oom *oom, sitemap *sm)
{
    int first = 1;
    vt_rec *tables[] = {vt_state.live, vt_state.vmm};
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++) {
        for (vt_rec *r = tables[t]; r; r = r->hh.next) {
            if (vt_table_anchor(r))
                continue;
            if (oom ? r->device == oom->device : vt_peak_holds(r))
                write_rec(f, r, &first, sm);
        }
    }
    if (oom)
        return;
    for (int d = 0; d < VT_MAX_DEVICES; d++)
        for (vt_rec *r = vt_state.dev[d].dead_head; r; r = r->next)
            write_rec(f, r, &first, sm);
}

static void write_env(FILE *f)
{
    static const char *const names[] = {"PYTORCH_CUDA_ALLOC_CONF",
                                        "PYTORCH_ALLOC_CONF",
                                        "XLA_PYTHON_CLIENT_ALLOCATOR",
                                        "XLA_PYTHON_CLIENT_PREALLOCATE",
                                        "TF_GPU_ALLOCATOR",
                                        "CUDA_VISIBLE_DEVICES",
                                        "VRAMTAP_MODE"};
    fputs("\"env\": {", f);
    int first = 1;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (!v)
            continue;
        fprintf(f, "%s\"%s\": ", first ? "" : ", ", names[i]);
        vt_json_str(f, v);
        first = 0;
    }
    fputs("},\n\"env_set\": {", f);
    for (int i = 0; i < vt_env_set_count(); i++) {
        fprintf(f, "%s", i ? ", " : "");
        vt_json_str(f, vt_env_set_name(i));
        fputs(": ", f);
        vt_json_str(f, vt_env_set_value(i));
    }
    fputs("},\n\"modes\": {", f);
    static const char *const frameworks[] = {"pytorch", "jax", "tensorflow"};
    first = 1;
    for (size_t i = 0; i < sizeof frameworks / sizeof frameworks[0]; i++) {
        const char *reason, *mode = vt_mode_of(frameworks[i], &reason);
        if (!mode)
            continue;
        fprintf(f, "%s\"%s\": {\"mode\": \"%s\", \"reason\": \"%s\"}", first ? "" : ", ",
                frameworks[i], mode, reason);
        first = 0;
    }
    fputs("},\n", f);
}

static void write_rank(FILE *f)
{
    static const char *const sources[] = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"};
    static const char *const local[] = {"LOCAL_RANK", "SLURM_LOCALID",
                                        "OMPI_COMM_WORLD_LOCAL_RANK"};
    for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++) {
        const char *v = getenv(sources[i]);
        char *end;
        long rank = v ? strtol(v, &end, 10) : -1;
        if (!v || !*v || *end || rank < 0)
            continue;
        const char *l = getenv(local[i]);
        long lrank = l && *l ? strtol(l, &end, 10) : -1;
        fprintf(f, "\"rank\": {\"rank\": %ld, \"local_rank\": ", rank);
        if (l && *l && !*end && lrank >= 0)
            fprintf(f, "%ld", lrank);
        else
            fputs("null", f);
        fprintf(f, ", \"source\": \"%s\"},\n", sources[i]);
        return;
    }
    fputs("\"rank\": {\"rank\": null, \"local_rank\": null, \"source\": null},\n", f);
}

static void write_command(FILE *f)
{
    size_t len;
    const char *cmd = vt_cmdline(&len);
    fputs("\"command\": [", f);
    for (size_t i = 0; cmd && i < len;) {
        size_t n = strnlen(cmd + i, len - i);
        fputs(i ? ", " : "", f);
        vt_json_strn(f, cmd + i, n);
        i += n + 1;
    }
    fputs("],\n", f);
}

static void write_counters(FILE *f)
{
    const vt_counters *c = &vt_state.c;
    fprintf(f,
            "\"counters\": {\"allocs\": %llu, \"frees\": %llu, \"unknown_frees\": %llu, "
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

static void write_int_or_null(FILE *f, int64_t v)
{
    if (v < 0)
        fputs("null", f);
    else
        fprintf(f, "%lld", (long long)v);
}

static void write_samples(FILE *f, const vt_device *dev)
{
    static const char *const reasons[] = {"phase", "peak", "oom"};
    fputs("[", f);
    for (int i = 0; i < dev->nsamples; i++) {
        const vt_sample *s = &dev->samples[i];
        fprintf(f, "%s{\"time_s\": ", i ? ", " : "");
        vt_json_time(f, vt_seconds(s->time));
        fprintf(f, ", \"reason\": \"%s\", \"free_bytes\": %lld, \"total_bytes\": %lld",
                reasons[s->reason], (long long)s->free_bytes, (long long)s->total_bytes);
        static const char *const pool_keys[4] = {"pool_reserved_bytes", "pool_used_bytes",
                                                 "pool_reserved_high_bytes",
                                                 "pool_used_high_bytes"};
        for (int k = 0; k < 4; k++) {
            fprintf(f, ", \"%s\": ", pool_keys[k]);
            write_int_or_null(f, s->have_pool ? (int64_t)s->pool[k] : -1);
        }
        fputc('}', f);
    }
    fputs("]", f);
}

static void write_devices(FILE *f)
{
    fputs("\"devices\": [", f);
    int first = 1;
    for (int d = 0; d < VT_MAX_DEVICES; d++) {
        const vt_device *dev = &vt_state.dev[d];
        if (!dev->used)
            continue;
        fprintf(f, "%s\n  {\"device\": %d, \"uuid\": ", first ? "" : ",", d);
        vt_json_str(f, dev->uuid[0] ? dev->uuid : NULL);
        fputs(", \"name\": ", f);
        vt_json_str(f, dev->name[0] ? dev->name : NULL);
        fputs(", \"total_bytes\": ", f);
        write_int_or_null(f, dev->total ? (int64_t)dev->total : -1);
        fprintf(f, ", \"peak_bytes\": %llu, \"peak_time_s\": ", (unsigned long long)dev->peak);
        vt_json_time(f, vt_seconds(dev->peak_time));
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
        write_int_or_null(f, dev->used_at_peak);
        fputc('}', f);
        first = 0;
    }
    fputs("],\n", f);
}

static void write_timeline(FILE *f)
{
    fputs("\"timeline\": [", f);
    for (size_t i = 0; i < vt_state.nspans; i++) {
        const vt_span *s = &vt_state.spans[i];
        fprintf(f, "%s\n  {\"instance\": %u, \"phase\": \"%s\", \"step\": %u, \"start_s\": ",
                i ? "," : "", s->instance, vt_phase_name(s->phase), s->step);
        vt_json_time(f, vt_seconds(s->start));
        fputs(", \"end_s\": ", f);
        vt_json_time(f, s->end ? vt_seconds(s->end) : -1);
        fputs(", \"devices\": [", f);
        int first = 1;
        for (int d = 0; d < VT_MAX_DEVICES; d++) {
            if (!vt_state.dev[d].used)
                continue;
            fprintf(f,
                    "%s{\"device\": %d, \"live_start\": %llu, \"live_end\": %llu, "
                    "\"live_max\": %llu}",
                    first ? "" : ", ", d, (unsigned long long)s->live_start[d],
                    (unsigned long long)s->live_end[d], (unsigned long long)s->live_max[d]);
            first = 0;
        }
        fputs("]}", f);
    }
    fputs("],\n\"timeline_summary\": ", f);
    if (!vt_state.folded.instances) {
        fputs("null,\n", f);
        return;
    }
    fprintf(f, "{\"instances\": %llu, \"first_step\": %u, \"last_step\": %u, \"live_max\": {",
            (unsigned long long)vt_state.folded.instances, vt_state.folded.first_step,
            vt_state.folded.last_step);
    int first = 1;
    for (int d = 0; d < VT_MAX_DEVICES; d++) {
        if (!vt_state.dev[d].used)
            continue;
        fprintf(f, "%s\"%d\": %llu", first ? "" : ", ", d,
                (unsigned long long)vt_state.folded.live_max[d]);
        first = 0;
    }
    fputs("}},\n", f);
}

static void oom_file_name(char *buf, size_t len, int n)
{
    snprintf(buf, len, "vramtap.%s.%d.oom%d.json", vt_cfg.prog, (int)getpid(), n);
}

static void write_oom_fields(FILE *f, const vt_oom *o, sitemap *sm)
{
    fprintf(f,
            "\"n\": %d, \"time_s\": %.6f, \"device\": %d, \"size\": %llu, \"api\": \"%s\", "
            "\"phase\": \"%s\", \"step\": %u, \"site\": ",
            o->n, vt_seconds(o->time), o->device, (unsigned long long)o->size, vt_api_name(o->api),
            vt_phase_name(o->phase), o->step);
    site_ref(f, sm, o->site);
}

static void write_ooms(FILE *f, sitemap *sm)
{
    fputs("\"oom_events\": [", f);
    for (int i = 0; i < vt_state.nooms; i++) {
        const vt_oom *o = &vt_state.ooms[i];
        fprintf(f, "%s\n  {", i ? "," : "");
        write_oom_fields(f, o, sm);
        fprintf(f, ", \"retry_succeeded\": %s, \"file\": ", o->retry_succeeded ? "true" : "false");
        if (o->n <= vt_cfg.oom_max) {
            char name[512];
            oom_file_name(name, sizeof name, o->n);
            vt_json_str(f, name);
        } else {
            fputs("null", f);
        }
        fputc('}', f);
    }
    fputs("],\n", f);
}

static void write_doc(FILE *f, const char *kind, const vt_oom *oom)
{
    vt_clock_calibrate();
    uint32_t nsites = vt_stack_count();
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

    fprintf(f, "{\"format\": \"vramtap-snapshot\", \"version\": %d, \"kind\": \"%s\",\n",
            FORMAT_VERSION, kind);
    fprintf(f, "\"vramtap_version\": \"%s\", \"pid\": %d, \"prog\": ", VT_VERSION, (int)getpid());
    vt_json_str(f, vt_cfg.prog);
    fputs(",\n", f);
    write_command(f);
    fprintf(f, "\"start_unix\": %.6f, \"end_time_s\": %.6f,\n", vt_start_unix(),
            vt_seconds(vt_clock()));
    write_rank(f);
    write_env(f);
    fprintf(f, "\"phase_markers\": %s, \"steps\": %u,\n", vt_state.markers ? "true" : "false",
            vt_state.step);
    fprintf(f, "\"stacks\": {\"native\": %s, \"python\": %s, \"depth\": %d},\n",
            vt_cfg.stacks ? "true" : "false",
            vt_cfg.stacks && vt_cfg.python_stacks ? "true" : "false", vt_cfg.depth);
    write_counters(f);
    write_devices(f);
    fprintf(f,
            "\"host\": {\"peak_bytes\": %llu, \"peak_time_s\": %.6f, \"live_bytes_at_end\": "
            "%llu, \"allocations\": %llu},\n",
            (unsigned long long)vt_state.hostmem.peak, vt_seconds(vt_state.hostmem.peak_time),
            (unsigned long long)vt_state.hostmem.live, (unsigned long long)vt_state.hostmem.allocs);
    fputs("\"allocations\": [", f);
    write_allocations(f, oom, &sm);
    fputs("],\n", f);
    write_timeline(f);
    write_ooms(f, &sm);
    if (oom) {
        fputs("\"oom\": {", f);
        write_oom_fields(f, oom, &sm);
        fprintf(f, ", \"error\": %d, \"free_bytes\": ", oom->error);
        write_int_or_null(f, oom->free_bytes);
        fputs(", \"total_bytes\": ", f);
        write_int_or_null(f, oom->total_bytes);
        fputs("},\n", f);
    }
    /* Last, once every reference has been numbered. */
    fputs("\"sites\": [", f);
    for (uint32_t i = 0; i < sm.n; i++) {
        fputs(i ? ",\n  " : "\n  ", f);
        vt_stack_write_json(f, sm.order[i], i);
    }
    fputs("]}\n", f);
    free(sm.index);
    free(sm.order);
}

static void write_file(const char *name, const char *kind, const vt_oom *oom)
{
    char path[8192], tmp[8300];
    snprintf(path, sizeof path, "%s/%s", vt_cfg.out_dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        vt_warn_once("cannot write %s: %s (set VRAMTAP_OUT to a writable directory)", path,
                     strerror(errno));
        return;
    }
    char *buf = malloc(1 << 16);
    if (buf)
        setvbuf(f, buf, _IOFBF, 1 << 16);
    vt_lock();
    write_doc(f, kind, oom);
    vt_unlock();
    int bad = ferror(f);
    int closed = fclose(f);
    free(buf);
    if (closed || bad || rename(tmp, path)) {
        vt_warn_once("cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return;
    }
    vt_debug("wrote %s", path);
    vt_notice_written(path, oom ? oom->n : 0);
}

static void exit_file_name(char *buf, size_t len)
{
    snprintf(buf, len, "vramtap.%s.%d.json", vt_cfg.prog, (int)getpid());
}

void vt_snapshot_write_exit(void)
{
    vt_lock();
    int made = vt_state.made_device_alloc;
    vt_unlock();
    if (!made)
        return;
    char name[512];
    exit_file_name(name, sizeof name);
    write_file(name, "exit", NULL);
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
    if (!due)
        return;
    char name[512];
    exit_file_name(name, sizeof name);
    write_file(name, "interim", NULL);
}

void vt_snapshot_write_oom(int n)
{
    vt_lock();
    vt_oom oom = vt_state.ooms[n - 1];
    vt_unlock();
    char name[512];
    oom_file_name(name, sizeof name, n);
    write_file(name, "oom", &oom);
}
