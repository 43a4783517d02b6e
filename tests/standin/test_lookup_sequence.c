/* The runtime stand-in reaches the driver the way NVIDIA's libcudart.so.13 does: lazily, one
 * dlopen, one dlsym (cuGetProcAddress_v2), a probe, cuGetProcAddress at 11030 and 12000, then the
 * entry points it uses, stream-ordered ones and copies also with flags 2 (_ptsz, _ptds). */
#include "check.h"
#include "test_log.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

static const char *const expected[] = {
    "[gpa]  ver=0 flags=0",
    "[gpa] cuInit ver=2000 flags=0",
    "[gpa] cuGetProcAddress ver=11030 flags=0",
    "[gpa] cuGetProcAddress ver=12000 flags=0",
    "[gpa] cuDeviceGet ver=2000 flags=0",
    "[gpa] cuDeviceGetCount ver=2000 flags=0",
    "[gpa] cuDeviceGetDefaultMemPool ver=11020 flags=0",
    "[gpa] cuDevicePrimaryCtxRetain ver=7000 flags=0",
    "[gpa] cuCtxSetCurrent ver=4000 flags=0",
    "[gpa] cuCtxGetCurrent ver=4000 flags=0",
    "[gpa] cuCtxGetDevice ver=2000 flags=0",
    "[gpa] cuCtxSynchronize ver=2000 flags=0",
    "[gpa] cuMemGetInfo ver=3020 flags=0",
    "[gpa] cuMemAllocManaged ver=6000 flags=0",
    "[gpa] cuMemAlloc ver=3020 flags=0",
    "[gpa] cuMemAllocPitch ver=3020 flags=0",
    "[gpa] cuMemFree ver=3020 flags=0",
    "[gpa] cuMemFreeHost ver=2000 flags=0",
    "[gpa] cuMemHostAlloc ver=2020 flags=0",
    "[gpa] cuPointerGetAttribute ver=4000 flags=0",
    "[gpa] cuMemAllocAsync ver=11020 flags=0",
    "[gpa] cuMemAllocAsync ver=11020 flags=2",
    "[gpa] cuMemAllocFromPoolAsync ver=11020 flags=0",
    "[gpa] cuMemAllocFromPoolAsync ver=11020 flags=2",
    "[gpa] cuMemFreeAsync ver=11020 flags=0",
    "[gpa] cuMemFreeAsync ver=11020 flags=2",
    "[gpa] cuMemPoolTrimTo ver=11020 flags=0",
    "[gpa] cuMemPoolSetAttribute ver=11020 flags=0",
    "[gpa] cuMemPoolGetAttribute ver=11020 flags=0",
    "[gpa] cuMemPoolCreate ver=11020 flags=0",
    "[gpa] cuMemPoolDestroy ver=11020 flags=0",
    "[gpa] cuStreamCreate ver=2000 flags=0",
    "[gpa] cuStreamGetDevice ver=12080 flags=0",
    "[gpa] cuStreamGetDevice ver=12080 flags=2",
    "[gpa] cuStreamDestroy ver=4000 flags=0",
    "[gpa] cuGetExportTable ver=3000 flags=0",
    /* copies and stream waits: the per-thread default stream forms with flags 2 */
    "[gpa] cuMemHostRegister ver=6050 flags=0",
    "[gpa] cuMemHostUnregister ver=4000 flags=0",
    "[gpa] cuMemcpy ver=4000 flags=0",
    "[gpa] cuMemcpy ver=7000 flags=2",
    "[gpa] cuMemcpyAsync ver=4000 flags=0",
    "[gpa] cuMemcpyAsync ver=7000 flags=2",
    "[gpa] cuMemcpyPeer ver=4000 flags=0",
    "[gpa] cuMemcpyPeer ver=7000 flags=2",
    "[gpa] cuMemcpyPeerAsync ver=4000 flags=0",
    "[gpa] cuMemcpyPeerAsync ver=7000 flags=2",
    "[gpa] cuMemcpyHtoD ver=3020 flags=0",
    "[gpa] cuMemcpyHtoD ver=7000 flags=2",
    "[gpa] cuMemcpyHtoDAsync ver=3020 flags=0",
    "[gpa] cuMemcpyHtoDAsync ver=7000 flags=2",
    "[gpa] cuMemcpyDtoH ver=3020 flags=0",
    "[gpa] cuMemcpyDtoH ver=7000 flags=2",
    "[gpa] cuMemcpyDtoHAsync ver=3020 flags=0",
    "[gpa] cuMemcpyDtoHAsync ver=7000 flags=2",
    "[gpa] cuMemcpyDtoD ver=3020 flags=0",
    "[gpa] cuMemcpyDtoD ver=7000 flags=2",
    "[gpa] cuMemcpyDtoDAsync ver=3020 flags=0",
    "[gpa] cuMemcpyDtoDAsync ver=7000 flags=2",
    "[gpa] cuMemcpy2DUnaligned ver=3020 flags=0",
    "[gpa] cuMemcpy2DUnaligned ver=7000 flags=2",
    "[gpa] cuMemcpy2DAsync ver=3020 flags=0",
    "[gpa] cuMemcpy2DAsync ver=7000 flags=2",
    "[gpa] cuMemcpy3D ver=3020 flags=0",
    "[gpa] cuMemcpy3D ver=7000 flags=2",
    "[gpa] cuMemcpy3DAsync ver=3020 flags=0",
    "[gpa] cuMemcpy3DAsync ver=7000 flags=2",
    "[gpa] cuMemcpy3DPeer ver=4000 flags=0",
    "[gpa] cuMemcpy3DPeer ver=7000 flags=2",
    "[gpa] cuMemcpy3DPeerAsync ver=4000 flags=0",
    "[gpa] cuMemcpy3DPeerAsync ver=7000 flags=2",
    "[gpa] cuMemcpyBatchAsync ver=13000 flags=0",
    "[gpa] cuMemcpyBatchAsync ver=13000 flags=2",
    "[gpa] cuMemcpy3DBatchAsync ver=13000 flags=0",
    "[gpa] cuMemcpy3DBatchAsync ver=13000 flags=2",
    "[gpa] cuStreamSynchronize ver=2000 flags=0",
    "[gpa] cuStreamSynchronize ver=7000 flags=2",
};

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

int main(void)
{
    log_start();

    /* Linked like a CUDA program: against libcudart only, which must be the stand-in (this
     * machine may have NVIDIA's registered with ldconfig), and which opens the driver only on
     * first use. */
    Dl_info where;
    CHECK(dladdr((void *)cudaMalloc, &where));
    CHECK(strstr(where.dli_fname, "tests/standin/libcudart.so.13") != NULL);
    CHECK(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) == NULL);

    void *p = NULL;
    CHECK_EQ_INT(cudaMalloc(&p, 4096), cudaSuccess);
    CHECK_EQ_INT(cudaFree(p), cudaSuccess);

    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    CHECK(cuda != NULL);
    void *gpa = cuda ? dlsym(cuda, "cuGetProcAddress_v2") : NULL;
    CHECK(gpa && dladdr(gpa, &where) && strstr(where.dli_fname, "tests/standin/libcuda.so.1"));

    char *lines[LOG_MAX_LINES];
    int n = log_read(lines);
    int nexp = (int)(sizeof expected / sizeof expected[0]);
    CHECK_EQ_INT(n, nexp + 2);
    if (n >= 2) {
        CHECK(starts_with(lines[0], "[dlopen] libcuda.so.1 flags=0x2 -> 0x"));
        CHECK(starts_with(lines[1], "[dlsym] caller=/"));
        CHECK(strstr(lines[1], "tests/standin/libcudart.so.13 handle=0x") != NULL);
        CHECK(strstr(lines[1], " sym=cuGetProcAddress_v2 -> 0x") != NULL);
    }
    int dlsyms = 0;
    for (int i = 0; i < n; i++)
        dlsyms += starts_with(lines[i], "[dlsym]");
    CHECK_EQ_INT(dlsyms, 1);
    for (int i = 0; i < nexp && i + 2 < n; i++)
        CHECK_EQ_STR(lines[i + 2], expected[i]);

    /* Initialised once: later calls make no further lookups. */
    log_start();
    CHECK_EQ_INT(cudaMalloc(&p, 4096), cudaSuccess);
    CHECK_EQ_INT(cudaFree(p), cudaSuccess);
    CHECK_EQ_INT(log_read(lines + n), 0);
    for (int i = 0; i < n; i++)
        free(lines[i]);
    return CHECK_DONE();
}
