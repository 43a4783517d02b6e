#include "driver.h"

#include <stdlib.h>
#include <string.h>

bool arena_init(struct arena *a, uintptr_t base, uintptr_t span)
{
    a->cap = 16;
    a->free = malloc(a->cap * sizeof *a->free);
    if (!a->free)
        return false;
    a->free[0] = (struct extent){base, base + span};
    a->n = 1;
    return true;
}

static bool insert_at(struct arena *a, size_t i, struct extent e)
{
    if (a->n == a->cap) {
        struct extent *grown = realloc(a->free, 2 * a->cap * sizeof *grown);
        if (!grown)
            return false;
        a->free = grown;
        a->cap *= 2;
    }
    memmove(&a->free[i + 1], &a->free[i], (a->n - i) * sizeof *a->free);
    a->free[i] = e;
    a->n++;
    return true;
}

static void remove_at(struct arena *a, size_t i)
{
    memmove(&a->free[i], &a->free[i + 1], (a->n - i - 1) * sizeof *a->free);
    a->n--;
}

uintptr_t arena_alloc(struct arena *a, size_t span, size_t align)
{
    for (size_t i = 0; i < a->n; i++) {
        struct extent *e = &a->free[i];
        uintptr_t start = (e->start + align - 1) & ~(uintptr_t)(align - 1);
        if (start < e->start || start >= e->end || e->end - start < span)
            continue;
        uintptr_t end = start + span;
        if (start == e->start && end == e->end) {
            remove_at(a, i);
        } else if (start == e->start) {
            e->start = end;
        } else if (end == e->end) {
            e->end = start;
        } else {
            struct extent tail = {end, e->end};
            if (!insert_at(a, i + 1, tail))
                return 0;
            a->free[i].end = start;
        }
        return start;
    }
    return 0;
}

void arena_free(struct arena *a, uintptr_t addr, size_t span)
{
    uintptr_t end = addr + span;
    size_t lo = 0, hi = a->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (a->free[mid].start < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    bool join_prev = lo > 0 && a->free[lo - 1].end == addr;
    bool join_next = lo < a->n && a->free[lo].start == end;
    if (join_prev && join_next) {
        a->free[lo - 1].end = a->free[lo].end;
        remove_at(a, lo);
    } else if (join_prev) {
        a->free[lo - 1].end = end;
    } else if (join_next) {
        a->free[lo].start = addr;
    } else {
        /* Without host memory for the free list the range is only lost to reuse. */
        (void)insert_at(a, lo, (struct extent){addr, end});
    }
}
