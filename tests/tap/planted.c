/* An allocation route interposition cannot see: this library is opened with RTLD_DEEPBIND, so
 * its call of cuMemAlloc_v2 binds to libcuda.so.1's own function, past LD_PRELOAD. */
#include <cuda.h>

__attribute__((visibility("default"))) CUresult planted_alloc(CUdeviceptr *p, size_t size)
{
    return cuMemAlloc_v2(p, size);
}
