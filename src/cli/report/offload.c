/* Offloaded state (offload.h). */
#include "offload.h"

static const char *const names[5] = {"parameters", "gradients", "optimizer state", "activations",
                                     "temporary"};
static const char *const keys[5] = {"parameters", "gradients", "optimizer_state", "activations",
                                    "temporary"};

int64_t vt_offloaded_bytes(const vt_snapshot *s)
{
    if (!s->offloaded.present)
        return -1;
    int64_t sum = 0;
    for (int c = 0; c < 5; c++)
        sum += s->offloaded.pinned_bytes[c];
    return sum;
}

void vt_print_offloaded(FILE *out, const vt_snapshot *s)
{
    if (vt_offloaded_bytes(s) <= 0)
        return;
    char b[32];
    fputs("  offloaded  in pinned host memory, as the framework labelled it:", out);
    const char *sep = " ";
    for (int c = 0; c < 5; c++)
        if (s->offloaded.pinned_bytes[c] > 0) {
            fprintf(out, "%s%s %s", sep, names[c], vt_fmt_bytes(b, s->offloaded.pinned_bytes[c]));
            sep = ", ";
        }
    fprintf(out, " (host RAM, not part of any device peak)\n");
}

json_t *vt_offloaded_json(const vt_snapshot *s)
{
    if (!s->offloaded.present)
        return json_null();
    json_t *bytes = json_object();
    for (int c = 0; c < 5; c++)
        json_object_set_new(bytes, keys[c], json_integer(s->offloaded.pinned_bytes[c]));
    return json_pack("{s:o, s:I}", "pinned_bytes", bytes, "ranges",
                     (json_int_t)s->offloaded.ranges);
}
