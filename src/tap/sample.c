/* What the driver knows and vramtap cannot count itself: each device's name, UUID, PCI bus id
 * and capacity, how much of it is in use (the CUDA context, other processes, the allocator's cache)
 * and the stream-ordered pools' own figures. Read only at moments that are safe and cheap:
 * a device's first allocation, phase boundaries, new peaks, out-of-memory failures; never before
 * main nor at exit. Always outside the state lock, on a thread that just made a CUDA call or a
 * phase mark. */
#include <cuda.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "hostram.h"
#include "resolve.h"
#include "sample.h"
#include "table.h"

static void read_info(int device)
{
    CUresult (*dev_get)(CUdevice *, int) =
        (CUresult(*)(CUdevice *, int))vt_real_driver(VT_DRV_cuDeviceGet);
    CUresult (*name)(char *, int, CUdevice) =
        (CUresult(*)(char *, int, CUdevice))vt_real_driver(VT_DRV_cuDeviceGetName);
    CUresult (*total)(size_t *, CUdevice) =
        (CUresult(*)(size_t *, CUdevice))vt_real_driver(VT_DRV_cuDeviceTotalMem_v2);
    CUresult (*uuid)(CUuuid *, CUdevice) =
        (CUresult(*)(CUuuid *, CUdevice))vt_real_driver(VT_DRV_cuDeviceGetUuid_v2);
    CUresult (*bus)(char *, int, CUdevice) =
        (CUresult(*)(char *, int, CUdevice))vt_real_driver(VT_DRV_cuDeviceGetPCIBusId);
    CUdevice dev;
    int capture = vt_capture_relax();
    int have_dev = dev_get && dev_get(&dev, device) == CUDA_SUCCESS;
    char buf[sizeof vt_state.dev[0].name] = "", bus_id[sizeof vt_state.dev[0].pci_bus_id] = "";
    size_t bytes = 0;
    CUuuid u;
    int have_name = have_dev && name && name(buf, sizeof buf, dev) == CUDA_SUCCESS;
    int have_total = have_dev && total && total(&bytes, dev) == CUDA_SUCCESS;
    int have_uuid = have_dev && uuid && uuid(&u, dev) == CUDA_SUCCESS;
    int have_bus = have_dev && bus && bus(bus_id, sizeof bus_id, dev) == CUDA_SUCCESS;
    vt_capture_restore(capture);
    vt_lock();
    vt_device *d = &vt_state.dev[device];
    if (have_name)
        snprintf(d->name, sizeof d->name, "%s", buf);
    if (have_total)
        d->total = bytes;
    if (have_bus)
        snprintf(d->pci_bus_id, sizeof d->pci_bus_id, "%s", bus_id);
    if (have_uuid) {
        const unsigned char *b = (const unsigned char *)u.bytes;
        snprintf(d->uuid, sizeof d->uuid,
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                 b[14], b[15]);
    }
    vt_unlock();
}

/* Reserved and used bytes of a pool, current and high-water marks. */
static int read_pool(CUmemoryPool pool, uint64_t v[4])
{
    CUresult (*get)(CUmemoryPool, CUmemPool_attribute, void *) = (CUresult(*)(
        CUmemoryPool, CUmemPool_attribute, void *))vt_real_driver(VT_DRV_cuMemPoolGetAttribute);
    static const CUmemPool_attribute attrs[4] = {
        CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
        CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, CU_MEMPOOL_ATTR_USED_MEM_HIGH};
    for (int i = 0; i < 4; i++) {
        cuuint64_t x = 0;
        if (!get || get(pool, attrs[i], &x) != CUDA_SUCCESS)
            return -1;
        v[i] = x;
    }
    return 0;
}

/* The device's default pool and every pool allocated from explicitly, added up. */
static int read_pools(int device, uint64_t sum[4])
{
    CUresult (*def)(CUmemoryPool *, CUdevice) =
        (CUresult(*)(CUmemoryPool *, CUdevice))vt_real_driver(VT_DRV_cuDeviceGetDefaultMemPool);
    CUmemoryPool pools[VT_MAX_POOLS + 1];
    int n = 0;
    if (def && def(&pools[0], device) == CUDA_SUCCESS)
        n = 1;
    uintptr_t listed[VT_MAX_POOLS];
    int nlisted = vt_pools_listed(device, listed, VT_MAX_POOLS);
    for (int i = 0; i < nlisted; i++)
        if (!n || (CUmemoryPool)listed[i] != pools[0])
            pools[n++] = (CUmemoryPool)listed[i];
    int got = 0;
    memset(sum, 0, 4 * sizeof sum[0]);
    for (int i = 0; i < n; i++) {
        uint64_t v[4];
        if (read_pool(pools[i], v) == 0) {
            for (int k = 0; k < 4; k++)
                sum[k] += v[k];
            got = 1;
        }
    }
    vt_pools_read();
    return got ? 0 : -1;
}

/* Reading /proc costs microseconds (resident size) to a millisecond (workers): at most once a
 * gap each, the first time at once. Threads race for a turn with one compare-and-swap. */
#define WORKERS_GAP_S 1.0
static _Atomic double rss_read = -1, workers_read = -1;

static int due(_Atomic double *last, double gap)
{
    double now = vt_mono_seconds(), was = atomic_load(last);
    return (was < 0 || now - was >= gap) && atomic_compare_exchange_strong(last, &was, now);
}

/* Lock held. The workers alive now: each one's highest and latest PSS, and their sum; those
 * that exited keep their figures (sum_last counts only the living). left_out: the most workers
 * one reading could not keep. */
static void note_workers(const int *pids, const int64_t *pss, int n)
{
    vt_workers *w = &vt_state.workers;
    int64_t sum = 0;
    uint64_t missed = n > VT_MAX_WORKERS ? (uint64_t)(n - VT_MAX_WORKERS) : 0;
    for (int i = 0; i < n && i < VT_MAX_WORKERS; i++) {
        if (pss[i] < 0)
            continue; /* exited meanwhile, or not ours to read */
        sum += pss[i];
        int k = 0;
        while (k < w->n && w->w[k].pid != pids[i])
            k++;
        if (k == VT_MAX_WORKERS) {
            missed++;
            continue;
        }
        if (k == w->n)
            w->w[w->n++] = (vt_worker){pids[i], pss[i], pss[i]};
        w->w[k].pss_last = pss[i];
        if (pss[i] > w->w[k].pss_high)
            w->w[k].pss_high = pss[i];
    }
    if (missed > w->left_out)
        w->left_out = missed;
    w->sum_last = sum;
    if (sum > w->sum_high)
        w->sum_high = sum;
}

static void sample(int device, uint8_t reason)
{
    /* cuMemGetInfo answers for the current context's device: an allocation on another one
     * (a stream of that device) is not sampled rather than given this one's figures. */
    if (vt_device_current() != device)
        return;
    int64_t free_bytes, total_bytes;
    int capture = vt_capture_relax();
    int have_info = vt_query_meminfo(&free_bytes, &total_bytes) == 0;
    /* A ramp of new peaks samples every allocation: the resident size is read at most once a
     * millisecond there (a /proc read costs a few microseconds), always at phases and failures. */
    int64_t rss =
        reason != VT_SAMPLE_PEAK || due(&rss_read, VT_PEAK_SAMPLE_GAP_S) ? vt_hostram_rss() : -1;
    int pids[VT_MAX_WORKERS];
    int64_t pss[VT_MAX_WORKERS];
    int nworkers =
        due(&workers_read, WORKERS_GAP_S) ? vt_hostram_workers(pids, pss, VT_MAX_WORKERS) : -1;
    uint64_t pool[4];
    int have_pool = have_info && read_pools(device, pool) == 0;
    vt_capture_restore(capture);
    if (!have_info)
        return;
    vt_lock();
    vt_device *d = &vt_state.dev[device];
    vt_sample s = {.time = vt_now_locked(),
                   .seq = vt_state.seq,
                   .reason = reason,
                   .free_bytes = free_bytes,
                   .total_bytes = total_bytes,
                   .rss_bytes = rss,
                   .have_pool = have_pool && d->pool_allocs};
    if (s.have_pool) {
        memcpy(s.pool, pool, sizeof pool);
        if (pool[2] > d->pool_reserved_high)
            d->pool_reserved_high = pool[2];
        d->pool_reserved_now = pool[0];
        d->have_pool = 1;
    }
    /* Keep the first samples and, past the bound, always the latest in the last slot. */
    if (d->nsamples < VT_MAX_SAMPLES)
        d->samples[d->nsamples++] = s;
    else {
        d->samples[VT_MAX_SAMPLES - 1] = s;
        vt_state.left_out.samples++;
    }
    d->last_used = total_bytes - free_bytes;
    if (nworkers >= 0)
        note_workers(pids, pss, nworkers);
    if (rss >= 0)
        d->last_rss = rss;
    d->last_workers = vt_state.workers.n ? vt_state.workers.sum_last : -1;
    if (s.seq == d->peak_seq) {
        d->used_at_peak = d->last_used;
        d->rss_at_peak = d->last_rss;
        d->workers_at_peak = d->last_workers;
    }
    if (rss > vt_state.ram.bytes)
        vt_state.ram = (vt_ram){rss, s.time, vt_state.phase, vt_state.step};
    vt_unlock();
}

void vt_sample_after_alloc(int device, int ask_info, int peak)
{
    if (device < 0 || device >= VT_MAX_DEVICES)
        return;
    if (ask_info)
        read_info(device);
    if (peak)
        sample(device, VT_SAMPLE_PEAK);
}

void vt_sample_phase(void)
{
    vt_lock();
    int made = vt_state.made_device_alloc;
    vt_unlock();
    if (!made)
        return;
    int device = vt_device_current();
    if (device >= 0)
        sample(device, VT_SAMPLE_PHASE);
}

void vt_sample_oom(int device)
{
    if (device >= 0 && device < VT_MAX_DEVICES)
        sample(device, VT_SAMPLE_OOM);
}
