/* Every string in a snapshot is escaped, those the program hands to vramtap included: a
 * framework's mode and reason with a quote, a backslash and a control character (the file must
 * still parse, and read back as given). */
#include <cuda_runtime_api.h>

#include "check.h"
#include "vramtap.h"

int main(void)
{
    CHECK_EQ_INT(vramtap_note_mode("jax", "native\"x", "a\\b\x01"), 0);
    void *p;
    CHECK_EQ_INT(cudaMalloc(&p, 4096), cudaSuccess);
    printf("EXPECT mode jax native\"x a\\b\x01\nEXPECT peak 0 4096\n");
    return CHECK_DONE();
}
