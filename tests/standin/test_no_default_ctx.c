/* STANDIN_NO_DEFAULT_CTX=1: a thread starts without a current context, as on a real driver, so
 * cuCtxGetDevice fails with 201 until the runtime (or cuCtxSetCurrent) makes one current. */
#include "check.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>

static void *bare_thread(void *arg)
{
    CUresult *r = arg;
    CUdevice dev;
    *r = cuCtxGetDevice(&dev);
    return NULL;
}

int main(void)
{
    setenv("STANDIN_NO_DEFAULT_CTX", "1", 1);

    CUdevice dev = -1;
    CUdeviceptr d;
    size_t free, total;
    CHECK_EQ_INT(cuCtxGetDevice(&dev), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_EQ_INT(cuCtxGetDevice_v2(&dev, NULL), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_EQ_INT(cuMemAlloc(&d, 100), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_EQ_INT(cuMemGetInfo(&free, &total), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_EQ_INT(cuMemAllocAsync(&d, 100, NULL), CUDA_ERROR_INVALID_CONTEXT);
    CUcontext ctx = (CUcontext)&dev;
    CHECK_EQ_INT(cuCtxGetCurrent(&ctx), CUDA_SUCCESS);
    CHECK(ctx == NULL);

    /* The runtime makes its device's primary context current, for the driver too. */
    void *p;
    CHECK_EQ_INT(cudaMalloc(&p, 100), cudaSuccess);
    CHECK_EQ_INT(cuCtxGetDevice(&dev), CUDA_SUCCESS);
    CHECK_EQ_INT(dev, 0);
    CHECK_EQ_INT(cudaFree(p), cudaSuccess);
    CHECK_EQ_INT(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    CHECK_EQ_INT(cudaSetDevice(1), cudaSuccess);
    CHECK_EQ_INT(cuCtxGetDevice(&dev), CUDA_SUCCESS);
    CHECK_EQ_INT(dev, 1);

    CUresult other = CUDA_SUCCESS;
    pthread_t t;
    pthread_create(&t, NULL, bare_thread, &other);
    pthread_join(t, NULL);
    CHECK_EQ_INT(other, CUDA_ERROR_INVALID_CONTEXT);
    return CHECK_DONE();
}
