/* `vramtap export --perfetto`: a snapshot as Chrome trace-event JSON. */
#include "cli.h"
#include "pictures.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vramtap export --perfetto [-o FILE.json] SNAPSHOT\n"
            "\n"
            "Writes the snapshot as Chrome trace-event JSON, which Perfetto UI\n"
            "(ui.perfetto.dev, 'Open trace file') and chrome://tracing open: per device a counter\n"
            "of live bytes for each category (from the allocation history, and at the peak from\n"
            "its bill), the phases and steps as slices, the peak and each out-of-memory error as\n"
            "instant events.\n"
            "\n"
            "options:\n"
            "  --perfetto  the format (the only one)\n"
            "  -o FILE     where to write it ('-': standard output; default: the snapshot's name\n"
            "              with .perfetto.json instead of .json, in the working directory)\n"
            "\n"
            "Exit status: 0, or 2 for bad usage, an unreadable snapshot or an unwritable file.\n");
}

int vt_cmd_export(int argc, char **argv)
{
    static const vt_picture_verb verb = {"export", ".perfetto.json", "perfetto", usage,
                                         vt_render_perfetto};
    return vt_picture_command(argc, argv, &verb);
}
