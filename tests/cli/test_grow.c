/* vt_grow, the doubling of every growing array of the library and the command: the capacities
 * it gives, that the elements stay, and that a size past what memory can address leaves the
 * array and its capacity as they were. */
#include <stdint.h>

#include "check.h"
#include "grow.h"

int main(void)
{
    uint64_t *v = NULL;
    size_t cap = 0;
    CHECK_EQ_INT(vt_grow(&v, &cap, 1, sizeof *v), 0);
    CHECK_EQ_INT(cap, 16);
    CHECK(v != NULL);
    for (size_t i = 0; i < 16; i++)
        v[i] = 1000 + i;
    uint64_t *before = v;
    CHECK_EQ_INT(vt_grow(&v, &cap, 16, sizeof *v), 0); /* room already: nothing moves */
    CHECK(v == before);
    CHECK_EQ_INT(cap, 16);
    CHECK_EQ_INT(vt_grow(&v, &cap, 17, sizeof *v), 0);
    CHECK_EQ_INT(cap, 32);
    CHECK_EQ_INT(vt_grow(&v, &cap, 100, sizeof *v), 0);
    CHECK_EQ_INT(cap, 128);
    int kept = 1;
    for (size_t i = 0; i < 16; i++)
        kept &= v[i] == 1000 + i;
    CHECK(kept);

    before = v;
    CHECK_EQ_INT(vt_grow(&v, &cap, SIZE_MAX / 4, sizeof *v), -1); /* the bytes overflow */
    CHECK_EQ_INT(vt_grow(&v, &cap, SIZE_MAX, 1), -1);             /* the count overflows */
    CHECK(v == before);
    CHECK_EQ_INT(cap, 128);
    CHECK_EQ_INT(v[15], 1015);
    free(v);

    /* A capacity not a power of two doubles from where it is. */
    char *s = malloc(5);
    size_t scap = 5;
    CHECK_EQ_INT(vt_grow(&s, &scap, 6, 1), 0);
    CHECK_EQ_INT(scap, 10);
    CHECK_EQ_INT(vt_grow(&s, &scap, 41, 1), 0);
    CHECK_EQ_INT(scap, 80);
    free(s);
    return CHECK_DONE();
}
