/* Arrays that grow by doubling, shared by the library and the command. */
#ifndef VT_GROW_H
#define VT_GROW_H

#include <stddef.h>

/* Makes room for `need` elements of `elem` bytes in the array whose address is at `arrp` (a
 * T ** passed as void *), of capacity *cap: an empty one gets `first` (at least 1), then the
 * capacity doubles until it holds `need`. 0, or -1 when memory ran out or the size would
 * overflow (the array and *cap are then as they were, still the caller's). realloc and nothing
 * else: the library calls it under its books' lock. */
int vt_grow(void *arrp, size_t *cap, size_t need, size_t elem, size_t first);

#endif
