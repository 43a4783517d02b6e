/* `vramtap view`: a snapshot as one self-contained HTML page. */
#include "cli.h"
#include "pictures.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vramtap view [--by category|module] [-o FILE.html] SNAPSHOT\n"
            "\n"
            "Writes one HTML page (no network access, open it in any browser) that draws, per\n"
            "device: live bytes over time stacked by category with phases, steps and the peak\n"
            "marked, from the snapshot's allocation history, and the per-phase timeline where\n"
            "there is no history; the bill and top sites at the peak; the bytes live at the\n"
            "peak by stack as a flame graph; out-of-memory post-mortems. When the snapshot has\n"
            "nn.Module paths, the page also groups both pictures by module (its 'group by'\n"
            "control): the chart stacked by the heaviest module subtrees, the flame graph as the\n"
            "module tree.\n"
            "\n"
            "options:\n"
            "  --by module  open the page grouped by module (default: --by category)\n"
            "  -o FILE      where to write the page ('-': standard output; default: the\n"
            "               snapshot's name with .html instead of .json, in the working\n"
            "               directory)\n"
            "\n"
            "Exit status: 0, or 2 for bad usage, an unreadable snapshot or an unwritable page.\n");
}

int vt_cmd_view(int argc, char **argv)
{
    static const vt_picture_verb verb = {"view", ".html", NULL, usage, vt_render_html};
    return vt_picture_command(argc, argv, &verb);
}
