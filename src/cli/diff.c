#include <stdio.h>

#include "cli.h"

int vt_cmd_diff(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "vramtap diff: not available in this build yet\n");
    return 2;
}
