/* A thread that has never run Python makes one allocation: the Python frames test needs a
 * caller that is native from its first instruction. */
#include <pthread.h>
#include <stddef.h>

typedef int (*malloc_fn)(void **, size_t);

struct job {
    malloc_fn fn;
    size_t size;
    void *ptr;
    int rc;
};

static void *run(void *arg)
{
    struct job *j = arg;
    j->rc = j->fn(&j->ptr, j->size);
    return NULL;
}

/* Calls `fn` (the program's cudaMalloc) on a new native thread; its status, or -1 when the
 * thread could not start. */
__attribute__((visibility("default"))) int pystack_alloc_on_native_thread(malloc_fn fn, size_t size)
{
    struct job j = {fn, size, NULL, -1};
    pthread_t t;
    if (pthread_create(&t, NULL, run, &j))
        return -1;
    pthread_join(t, NULL);
    return j.rc;
}
