/* `vramtap export`: a snapshot as a Perfetto trace (--perfetto) or as JSON (--json). */
#include <errno.h>
#include <getopt.h>
#include <string.h>

#include "cli.h"
#include "pictures.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vramtap export --perfetto [--by category|module] [-o FILE.json] SNAPSHOT\n"
            "       vramtap export --json [-o FILE.json] SNAPSHOT\n"
            "\n"
            "--perfetto writes the snapshot as Chrome trace-event JSON, which Perfetto UI\n"
            "(ui.perfetto.dev, 'Open trace file') and chrome://tracing open: per device a counter\n"
            "of live bytes for each category (from the allocation history, and at the peak from\n"
            "its bill), the phases and steps as slices, the peak and each out-of-memory error as\n"
            "instant events. With --by module the counters are per module group instead of per\n"
            "category: the heaviest nn.Module subtrees at the peak (at most five), 'other\n"
            "modules' and '(outside modules)'.\n"
            "\n"
            "--json writes the snapshot as the JSON document docs/snapshot-format.md describes,\n"
            "for people and tools (jq, Python's json): the library writes a compact binary file,\n"
            "and this spells it out; a snapshot that is JSON already is copied as it is.\n"
            "\n"
            "options:\n"
            "  --perfetto  the trace\n"
            "  --json      the snapshot as JSON\n"
            "  --by module with --perfetto: live bytes by module group (default: by category)\n"
            "  -o FILE     where to write it ('-': standard output). Default: for --perfetto the\n"
            "              snapshot's name with .perfetto.json instead of .json, in the working\n"
            "              directory; for --json standard output\n"
            "\n"
            "Exit status: 0, or 2 for bad usage, an unreadable snapshot or an unwritable file.\n");
}

static int export_json(const char *snapshot, const char *path)
{
    vt_snapshot s;
    vt_err err;
    if (vt_snapshot_load(snapshot, &s, &err)) {
        fprintf(stderr, "vramtap export: %s\n", err.msg);
        return 2;
    }
    bool to_stdout = !path || !strcmp(path, "-");
    FILE *f = to_stdout ? stdout : fopen(path, "w");
    int rc = 0;
    if (!f) {
        fprintf(stderr, "vramtap export: %s: cannot create: %s\n", path, strerror(errno));
        rc = 2;
    } else if (vt_export_json(f, &s, &err)) {
        fprintf(stderr, "vramtap export: %s\n", err.msg);
        rc = 2;
    }
    if (f && (to_stdout ? fflush(f) : fclose(f)) && !rc) {
        fprintf(stderr, "vramtap export: %s: cannot write: %s\n", to_stdout ? "stdout" : path,
                strerror(errno));
        rc = 2;
    }
    if (f && !to_stdout && rc)
        remove(path);
    vt_snapshot_free(&s);
    return rc;
}

int vt_cmd_export(int argc, char **argv)
{
    static const vt_picture_verb verb = {"export", ".perfetto.json", "perfetto", usage,
                                         vt_render_perfetto};
    const struct option longopts[] = {{"output", required_argument, NULL, 'o'},
                                      {"json", no_argument, NULL, 'j'},
                                      {NULL, 0, NULL, 0}};
    bool json = false;
    const char *output = NULL;
    for (int i = 1; i < argc && !json; i++)
        json = !strcmp(argv[i], "--json");
    if (!json)
        return vt_picture_command(argc, argv, &verb);
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":o:", longopts, NULL)) != -1) {
        if (c == 'o') {
            output = optarg;
        } else if (c != 'j') {
            fprintf(stderr, "vramtap export: bad option '%s' (try 'vramtap export --help')\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (argc - optind != 1) {
        usage(stderr);
        return 2;
    }
    return export_json(argv[optind], output);
}
