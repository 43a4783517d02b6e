/* Where the command finds the library and the Python files: a command in the build tree uses
 * the build and source trees, an installed one the installed files, each falling back on the
 * other. */
#ifndef VT_PATHS_H
#define VT_PATHS_H

/* `build` and `install` in the order to try them. */
void vt_paths_order(const char *build, const char *install, const char *order[2]);

/* The library to preload, as an absolute path (the command may change directory before it
 * starts a child): VRAMTAP_LIB, else the one built or installed with the command. -1 after one
 * line on stderr naming `verb`. */
#include <limits.h>
int vt_find_library(char out[PATH_MAX], const char *verb);

#endif
