#include <stdio.h>

#include "cli.h"

int vt_cmd_report(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "vramtap report: not available in this build yet\n");
    return 2;
}
