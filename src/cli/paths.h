/* Where the command finds the library and the Python files: a command in the build tree uses
 * the build and source trees, an installed one the installed files, each falling back on the
 * other. */
#ifndef VT_PATHS_H
#define VT_PATHS_H

/* `build` and `install` in the order to try them. */
void vt_paths_order(const char *build, const char *install, const char *order[2]);

#endif
