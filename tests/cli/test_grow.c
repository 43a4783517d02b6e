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
    CHECK_EQ_INT(vt_grow(&v, &cap, 1, sizeof *v, 16), 0);
    CHECK_EQ_INT(cap, 16);
    CHECK(v != NULL);
    for (size_t i = 0; i < 16; i++)
        v[i] = 1000 + i;
    uint64_t *before = v;
    CHECK_EQ_INT(vt_grow(&v, &cap, 16, sizeof *v, 16), 0); /* room already: nothing moves */
    CHECK(v == before);
    CHECK_EQ_INT(cap, 16);
    CHECK_EQ_INT(vt_grow(&v, &cap, 17, sizeof *v, 16), 0);
    CHECK_EQ_INT(cap, 32);
    CHECK_EQ_INT(vt_grow(&v, &cap, 100, sizeof *v, 16), 0);
    CHECK_EQ_INT(cap, 128);
    int kept = 1;
    for (size_t i = 0; i < 16; i++)
        kept &= v[i] == 1000 + i;
    CHECK(kept);

    before = v;
    CHECK_EQ_INT(vt_grow(&v, &cap, SIZE_MAX / 4, sizeof *v, 16), -1); /* the bytes overflow */
    CHECK_EQ_INT(vt_grow(&v, &cap, SIZE_MAX, 1, 16), -1);             /* the count overflows */
    CHECK(v == before);
    CHECK_EQ_INT(cap, 128);
    CHECK_EQ_INT(v[15], 1015);
    free(v);

    /* An empty array gets `first`, or the first doubling of it that holds `need`; then a
     * capacity not a power of two doubles from where it is. */
    char *s = NULL;
    size_t scap = 0;
    CHECK_EQ_INT(vt_grow(&s, &scap, 1, 1, 5), 0);
    CHECK_EQ_INT(scap, 5);
    CHECK_EQ_INT(vt_grow(&s, &scap, 6, 1, 5), 0);
    CHECK_EQ_INT(scap, 10);
    CHECK_EQ_INT(vt_grow(&s, &scap, 41, 1, 5), 0);
    CHECK_EQ_INT(scap, 80);
    free(s);
    s = NULL, scap = 0;
    CHECK_EQ_INT(vt_grow(&s, &scap, 100, 1, 64), 0);
    CHECK_EQ_INT(scap, 128);
    free(s);
    s = NULL, scap = 0;
    CHECK_EQ_INT(vt_grow(&s, &scap, 3, 1, 0), 0); /* no first: from 1 */
    CHECK_EQ_INT(scap, 4);
    free(s);
    return CHECK_DONE();
}
