#include <stdio.h>

#include "cli.h"

int vt_cmd_import(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "vramtap import: not available in this build yet\n");
    return 2;
}
