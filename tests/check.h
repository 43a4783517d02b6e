/* Minimal checks for C tests: each failure prints where and what, and the test exits 1 at the
 * end if any check failed. */
#ifndef VT_CHECK_H
#define VT_CHECK_H

#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int check_failures;

/* Seconds of CLOCK_MONOTONIC, for tests that time what they wait for. */
static inline double check_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            check_failures++;                                                                      \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                         \
    do {                                                                                           \
        long long va_ = (long long)(a), vb_ = (long long)(b);                                      \
        if (va_ != vb_) {                                                                          \
            fprintf(stderr, "%s:%d: %s == %s: %lld != %lld\n", __FILE__, __LINE__, #a, #b, va_,    \
                    vb_);                                                                          \
            check_failures++;                                                                      \
        }                                                                                          \
    } while (0)

/* Runs fn on n threads at once, each given its number (0 to n - 1), and checks that each
 * returned NULL. */
static inline void check_threads(int n, void *(*fn)(void *))
{
    pthread_t th[64];
    CHECK(n <= 64);
    for (int t = 0; t < n && t < 64; t++)
        CHECK_EQ_INT(pthread_create(&th[t], NULL, fn, (void *)(intptr_t)t), 0);
    for (int t = 0; t < n && t < 64; t++) {
        void *rc;
        pthread_join(th[t], &rc);
        CHECK(rc == NULL);
    }
}

#define CHECK_EQ_STR(a, b)                                                                         \
    do {                                                                                           \
        const char *sa_ = (a), *sb_ = (b);                                                         \
        if (!sa_ || !sb_ || strcmp(sa_, sb_)) {                                                    \
            fprintf(stderr, "%s:%d: %s == %s: \"%s\" != \"%s\"\n", __FILE__, __LINE__, #a, #b,     \
                    sa_ ? sa_ : "(null)", sb_ ? sb_ : "(null)");                                   \
            check_failures++;                                                                      \
        }                                                                                          \
    } while (0)

#define CHECK_DONE()                                                                               \
    (check_failures ? (fprintf(stderr, "%d check(s) failed\n", check_failures), 1) : 0)

#endif
