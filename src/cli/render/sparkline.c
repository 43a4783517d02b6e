/* The report's one-line picture: the highest live bytes of each phase instance of the
 * per-phase timeline, as block characters, with the instance that holds the peak marked. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

#define WIDTH 64

static const char *const blocks[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
static const char ascii_levels[] = "_.-:=+*#";

void vt_print_sparkline(FILE *out, const vt_snapshot *s, const vt_device *d, bool ascii)
{
    vt_tl_span *sp;
    size_t n;
    vt_err err;
    if (vt_timeline_load(s, d->device, &sp, &n, &err) || !n) {
        free(sp);
        return;
    }
    /* more instances than cells: each cell the highest of a run of them */
    size_t per = (n + WIDTH - 1) / WIDTH, cells = (n + per - 1) / per, peak_cell = SIZE_MAX;
    int64_t top = 1, high[WIDTH] = {0};
    for (size_t i = 0; i < n; i++) {
        size_t c = i / per;
        double end = isnan(sp[i].end_s) ? INFINITY : sp[i].end_s;
        if (sp[i].live_max > high[c])
            high[c] = sp[i].live_max;
        if (sp[i].live_max > top)
            top = sp[i].live_max;
        if (peak_cell == SIZE_MAX && d->peak_time_s >= sp[i].start_s && d->peak_time_s <= end)
            peak_cell = c;
    }
    fprintf(out, "  timeline   ");
    for (size_t c = 0; c < cells; c++) {
        int level = high[c] <= 0 ? 0 : (int)((high[c] * 8 - 1) / top);
        if (c == peak_cell)
            fputs(vt_on(VT_STYLE_BAD), out);
        fputs(ascii ? (char[]){ascii_levels[level], 0} : blocks[level], out);
        if (c == peak_cell)
            fputs(vt_off(), out);
    }
    char b[32];
    fprintf(out, "  %zu phase instance%s%s, highest %s\n", n, n == 1 ? "" : "s",
            per > 1 ? " (a cell: the highest of several)" : "", vt_fmt_bytes(b, top));
    if (peak_cell != SIZE_MAX)
        fprintf(out, "%*s^ the peak\n", (int)(13 + peak_cell), "");
    free(sp);
}
