/* The command line as the snapshot records it, with secrets left out. */
#ifndef VT_COMMAND_H
#define VT_COMMAND_H

#include <stdio.h>

#include "tap.h"

/* "command": [...],\n  Values of options whose names look secret are written as "***". */
VT_HIDDEN void vt_command_write_json(FILE *f);

#endif
