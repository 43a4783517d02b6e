/* Stands in for libcuda looking itself up: built as a library whose file name starts with
 * "libcuda.so", so vramtap must hand its lookups through unchanged. */
#include <dlfcn.h>

void *self_lookup(void *handle, const char *name)
{
    /* Not a tail call: glibc judges RTLD_NEXT by the return address of dlsym's caller. */
    void *volatile p = dlsym(handle, name);
    return p;
}
