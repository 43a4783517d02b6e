/* `vramtap report --folded`: the bytes live at the peak as folded stacks, one line per site and
 * category, for flamegraph.pl and speedscope. The device and the category are the two
 * outermost frames, so a flame graph splits the bill first and the code second. */
#include "report.h"

int vt_print_folded(FILE *out, vt_loaded *l, vt_err *err)
{
    vt_snapshot *s = &l->snap;
    /* every stack is read before the first line, so a bad one leaves no half output */
    if (vt_sites_load_all(s, err))
        return -1;
    char name[1024];
    for (size_t b = 0; b < l->nbills; b++) {
        const vt_bill *bill = &l->bills[b];
        for (int c = 0; c < VT_NCATS; c++)
            for (size_t i = 0; i < bill->nsites_in[c]; i++) {
                const vt_site_total *t = &bill->top[c][i];
                fprintf(out, "%s%d;%s", vt_device_word(s), bill->dev->device,
                        bill->native ? "segments" : vt_category_key((vt_category)c));
                if (t->site < 0) {
                    fputs(";[no stack]", out);
                } else {
                    const vt_site *site = &s->sites[t->site];
                    for (size_t f = site->nframes; f-- > 0;) {
                        vt_frame_name(&site->frames[f], name, sizeof name);
                        fprintf(out, ";%s", name);
                    }
                }
                fprintf(out, " %lld\n", (long long)t->bytes);
            }
    }
    return 0;
}
