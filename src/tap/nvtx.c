/* vramtap as an NVTX v3 injection library: each NVTX copy in the process (every shared object
 * carries one) dlopens NVTX_INJECTION64_PATH at its first call and hands us its callback table.
 * Ranges whose names are phases open and close phases; every other range is ignored. */
#include <stdatomic.h>
#include <stdlib.h>
#include <wchar.h>

#include <nvtx3/nvToolsExt.h>

#include "phase.h"
#include "tap.h"
#include "vramtap.h"

/* Per thread, whether each pushed level opened a phase (push/pop ranges nest per thread). */
#define MAX_LEVELS 128
static VT_TLS uint8_t pushed_phase[MAX_LEVELS];
static VT_TLS int level;

/* Start/end ranges may end on another thread: the id carries the phase that it opened (0 if
 * none) in its low bits. */
static atomic_ullong next_range_id = 1;

/* A begin that was taken (a new phase instance, or nested in the open one) needs its end. */
static int begun(int phase)
{
    if (phase < 0)
        return 0;
    int rc = vt_phase_begin(phase);
    return rc == VRAMTAP_OK || rc == VRAMTAP_ENESTED;
}

static int phase_of_wide(const wchar_t *msg)
{
    if (!msg)
        return -1;
    char buf[64];
    size_t i = 0;
    for (; msg[i] && i < sizeof buf - 1; i++) {
        if (msg[i] > 0x7f)
            return -1;
        buf[i] = (char)msg[i];
    }
    buf[i] = 0;
    return msg[i] ? -1 : vt_phase_lookup(buf);
}

static int phase_of_attr(const nvtxEventAttributes_t *a)
{
    if (!a)
        return -1;
    if (a->messageType == NVTX_MESSAGE_TYPE_ASCII)
        return vt_phase_lookup(a->message.ascii);
    if (a->messageType == NVTX_MESSAGE_TYPE_UNICODE)
        return phase_of_wide(a->message.unicode);
    return -1;
}

static int push(int phase)
{
    int lvl = level++;
    if (lvl < MAX_LEVELS)
        pushed_phase[lvl] = begun(phase) ? (uint8_t)(phase + 1) : 0;
    return lvl;
}

static int NVTX_API range_push_a(const char *msg)
{
    return push(vt_phase_lookup(msg));
}

static int NVTX_API range_push_w(const wchar_t *msg)
{
    return push(phase_of_wide(msg));
}

static int NVTX_API range_push_ex(const nvtxEventAttributes_t *a)
{
    return push(phase_of_attr(a));
}

static int NVTX_API range_pop(void)
{
    if (level == 0)
        return -1;
    int lvl = --level;
    if (lvl < MAX_LEVELS && pushed_phase[lvl])
        vt_phase_end(pushed_phase[lvl] - 1);
    return lvl;
}

static nvtxRangeId_t start(int phase)
{
    unsigned long long id = atomic_fetch_add(&next_range_id, 1) << 3;
    if (begun(phase))
        id |= (unsigned long long)(phase + 1);
    return id;
}

static nvtxRangeId_t NVTX_API range_start_a(const char *msg)
{
    return start(vt_phase_lookup(msg));
}

static nvtxRangeId_t NVTX_API range_start_w(const wchar_t *msg)
{
    return start(phase_of_wide(msg));
}

static nvtxRangeId_t NVTX_API range_start_ex(const nvtxEventAttributes_t *a)
{
    return start(phase_of_attr(a));
}

static void NVTX_API range_end(nvtxRangeId_t id)
{
    if (id & 7)
        vt_phase_end((int)(id & 7) - 1);
}

static void set(NvtxFunctionTable table, unsigned size, unsigned id, NvtxFunctionPointer fn)
{
    if (id < size && table[id])
        *table[id] = fn;
}

VT_EXPORT int NVTX_API InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table)
{
    if (!get_export_table)
        return 0;
    const NvtxExportTableCallbacks *cb = get_export_table(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable table = NULL;
    unsigned size = 0;
    if (!cb || !cb->GetModuleFunctionTable ||
        !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) || !table)
        return 0;
    set(table, size, NVTX_CBID_CORE_RangePushA, (NvtxFunctionPointer)range_push_a);
    set(table, size, NVTX_CBID_CORE_RangePushW, (NvtxFunctionPointer)range_push_w);
    set(table, size, NVTX_CBID_CORE_RangePushEx, (NvtxFunctionPointer)range_push_ex);
    set(table, size, NVTX_CBID_CORE_RangePop, (NvtxFunctionPointer)range_pop);
    set(table, size, NVTX_CBID_CORE_RangeStartA, (NvtxFunctionPointer)range_start_a);
    set(table, size, NVTX_CBID_CORE_RangeStartW, (NvtxFunctionPointer)range_start_w);
    set(table, size, NVTX_CBID_CORE_RangeStartEx, (NvtxFunctionPointer)range_start_ex);
    set(table, size, NVTX_CBID_CORE_RangeEnd, (NvtxFunctionPointer)range_end);
    return 1;
}
