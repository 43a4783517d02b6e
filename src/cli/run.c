#include <stdio.h>

#include "cli.h"

int vt_cmd_run(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "vramtap run: not available in this build yet\n");
    return 2;
}
