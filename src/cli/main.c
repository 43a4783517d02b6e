#include <stdio.h>
#include <string.h>

#include "cli.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"run", vt_cmd_run, "run a command under vramtap (sets LD_PRELOAD and the PyTorch hooks)"},
    {"lib", vt_cmd_lib, "print the library's absolute path, for LD_PRELOAD=$(vramtap lib)"},
    {"report", vt_cmd_report, "the memory bill at the peak, or an out-of-memory post-mortem"},
    {"diff", vt_cmd_diff, "compare two snapshots"},
    {"fit", vt_cmd_fit, "what fits: how the bill grows with the batch size or another dimension"},
    {"import", vt_cmd_import, "turn a PyTorch profiler trace or memory snapshot into a snapshot"},
    {"view", vt_cmd_view, "a snapshot as one HTML page: memory over time, flame graph, bill"},
    {"export", vt_cmd_export,
     "a snapshot as a Perfetto / chrome://tracing trace (--perfetto) or as JSON (--json)"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: vramtap COMMAND [ARGS...]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].help);
    fprintf(out, "\n'vramtap COMMAND --help' tells more. vramtap %s\n", VT_VERSION);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("vramtap %s\n", VT_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "vramtap: unknown command '%s' (try 'vramtap --help')\n", argv[1]);
    return 2;
}
