/* Offloaded state (offload.h): the loose labels, sorted by start, against the pinned ranges. */
#include "offload.h"
#include "json_out.h"
#include "snapshot_keys.h"

/* The pinned range holding addr, or NULL. */
static const vt_pinned_range *holding(const vt_pinned_range *v, size_t n, uintptr_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].start <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && addr < v[lo - 1].end ? &v[lo - 1] : NULL;
}

void vt_offload_write(FILE *f, const vt_pinned_range *pinned, size_t npinned,
                      const vt_identity_frozen *z)
{
    if (!z) {
        fputs(VT_JSON_KEY(VT_K_HOST_OFFLOADED) "null,\n", f);
        return;
    }
    uint64_t bytes[VT_ID_COUNT] = {0}, ranges = 0;
    uintptr_t addr, covered = 0; /* labelled bytes below `covered` are counted already */
    uint64_t len, seq_last;
    uint8_t cat;
    for (size_t i = 0; vt_identity_loose_at(z, i, &addr, &len, &cat, &seq_last); i++) {
        const vt_pinned_range *r = holding(pinned, npinned, addr);
        if (!r || seq_last < r->seq)
            continue;
        uintptr_t end = len < r->end - addr ? addr + len : r->end;
        uintptr_t from = addr > covered ? addr : covered;
        if (end > from) {
            bytes[cat] += end - from;
            covered = end;
        }
        ranges++;
    }
    fputs(VT_JSON_KEY(VT_K_HOST_OFFLOADED) "{\"pinned_bytes\": {", f);
    for (int c = 0; c < VT_ID_COUNT; c++)
        fprintf(f, "%s\"%s\": %llu", c ? ", " : "", vt_identity_category_name(c),
                (unsigned long long)bytes[c]);
    fprintf(f, "}, \"ranges\": %llu},\n", (unsigned long long)ranges);
}
