#include <stddef.h>

#include "pystack.h"

int vt_pystack_capture(uint64_t *out, int max)
{
    (void)out;
    (void)max;
    return 0;
}

const char *vt_pystack_file(uint32_t code_id)
{
    (void)code_id;
    return NULL;
}

const char *vt_pystack_function(uint32_t code_id)
{
    (void)code_id;
    return NULL;
}
