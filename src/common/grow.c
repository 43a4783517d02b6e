#include "grow.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int vt_grow(void *arrp, size_t *cap, size_t need, size_t elem, size_t first)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : first ? first : 1;
    while (n < need) {
        if (n > SIZE_MAX / 2)
            return -1;
        n *= 2;
    }
    if (elem && n > SIZE_MAX / elem)
        return -1;
    /* The array's pointer is copied as bytes: it is a T *, read and written here as a void *. */
    void *old, *grown;
    memcpy(&old, arrp, sizeof old);
    if (!(grown = realloc(old, n * elem)))
        return -1;
    memcpy(arrp, &grown, sizeof grown);
    *cap = n;
    return 0;
}
