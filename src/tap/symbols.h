/* Function names for return addresses from the ELF symbol tables (.symtab when the file has
 * one, else .dynsym): dladdr sees only exported symbols. Used once, when a snapshot is
 * written. */
#ifndef VT_SYMBOLS_H
#define VT_SYMBOLS_H

#include <stdint.h>

#include "tap.h"

/* The function of the module at `path` containing file address `addr`, or NULL. The string
 * lives until exit. */
VT_HIDDEN const char *vt_symbol_lookup(const char *path, uintptr_t addr);

#endif
