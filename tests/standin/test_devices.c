/* Several devices: names, UUIDs, per-thread current device shared by runtime and driver, streams
 * that remember their device, and what each kind of pointer says about itself. */
#include "check.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>

/* The per-thread-default-stream forms, which the headers only name under
 * CUDA_API_PER_THREAD_DEFAULT_STREAM. */
cudaError_t cudaStreamGetDevice_ptsz(cudaStream_t stream, int *device);
CUresult cuStreamGetDevice_ptsz(CUstream stream, CUdevice *device);

static void *other_thread(void *arg)
{
    int *device = arg;
    /* A new thread starts on device 0 whatever other threads chose. */
    CHECK_EQ_INT(cuCtxGetDevice(&device[0]), CUDA_SUCCESS);
    CHECK_EQ_INT(cudaGetDevice(&device[1]), cudaSuccess);
    return NULL;
}

int main(void)
{
    setenv("STANDIN_DEVICES", "3", 1);

    int n = 0;
    CHECK_EQ_INT(cuInit(0), CUDA_SUCCESS);
    CHECK_EQ_INT(cuDeviceGetCount(&n), CUDA_SUCCESS);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(cudaGetDeviceCount(&n), cudaSuccess);
    CHECK_EQ_INT(n, 3);
    int version = 0;
    CHECK_EQ_INT(cuDriverGetVersion(&version), CUDA_SUCCESS);
    CHECK_EQ_INT(version, 13000);
    char name[64];
    CHECK_EQ_INT(cuDeviceGetName(name, sizeof name, 2), CUDA_SUCCESS);
    CHECK_EQ_STR(name, "Stand-in GPU 2");
    CHECK_EQ_INT(cuDeviceGetName(name, sizeof name, 3), CUDA_ERROR_INVALID_DEVICE);
    CUuuid u0, u1, again;
    CHECK_EQ_INT(cuDeviceGetUuid(&u0, 0), CUDA_SUCCESS);
    CHECK_EQ_INT(cuDeviceGetUuid(&u1, 1), CUDA_SUCCESS);
    CHECK_EQ_INT(cuDeviceGetUuid_v2(&again, 1), CUDA_SUCCESS);
    CHECK(memcmp(&u0, &u1, sizeof u0) != 0);
    CHECK(memcmp(&u1, &again, sizeof u1) == 0);
    CHECK(memcmp(u1.bytes, "stand-in-gpu", 12) == 0 && u1.bytes[15] == 1);
    CHECK(memcmp(u0.bytes, u1.bytes, 15) == 0);
    char bus[16];
    CHECK_EQ_INT(cuDeviceGetPCIBusId(bus, sizeof bus, 2), CUDA_SUCCESS);
    CHECK_EQ_STR(bus, "0000:03:00.0");
    CHECK_EQ_INT(cuDeviceGetPCIBusId(bus, 5, 0), CUDA_SUCCESS);
    CHECK_EQ_STR(bus, "0000");
    CHECK_EQ_INT(cuDeviceGetPCIBusId(bus, sizeof bus, 3), CUDA_ERROR_INVALID_DEVICE);
    CHECK_EQ_INT(cuDeviceGetPCIBusId(NULL, sizeof bus, 0), CUDA_ERROR_INVALID_VALUE);
    int cc = 0;
    CHECK_EQ_INT(cuDeviceGetAttribute(&cc, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 1),
                 CUDA_SUCCESS);
    CHECK_EQ_INT(cc, 9);

    /* Device 0's primary context is current from the start; cudaSetDevice moves the driver too. */
    CUdevice dev = -1;
    CHECK_EQ_INT(cuCtxGetDevice(&dev), CUDA_SUCCESS);
    CHECK_EQ_INT(dev, 0);
    CHECK_EQ_INT(cudaSetDevice(1), cudaSuccess);
    CHECK_EQ_INT(cuCtxGetDevice(&dev), CUDA_SUCCESS);
    CHECK_EQ_INT(dev, 1);
    CHECK_EQ_INT(cudaSetDevice(3), cudaErrorInvalidDevice);
    CHECK_EQ_INT(cudaSetDevice(-1), cudaErrorInvalidDevice);
    int other[2] = {-1, -1};
    pthread_t t;
    pthread_create(&t, NULL, other_thread, other);
    pthread_join(t, NULL);
    CHECK_EQ_INT(other[0], 0);
    CHECK_EQ_INT(other[1], 0);

    /* A context made current through the driver is what the runtime then uses. */
    CUcontext ctx2;
    CHECK_EQ_INT(cuDevicePrimaryCtxRetain(&ctx2, 2), CUDA_SUCCESS);
    CHECK_EQ_INT(cuCtxSetCurrent(ctx2), CUDA_SUCCESS);
    int rdev = -1;
    CHECK_EQ_INT(cudaGetDevice(&rdev), cudaSuccess);
    CHECK_EQ_INT(rdev, 2);
    CHECK_EQ_INT(cuCtxGetDevice_v2(&dev, NULL), CUDA_SUCCESS);
    CHECK_EQ_INT(dev, 2);
    CUcontext ctx0;
    CHECK_EQ_INT(cuDevicePrimaryCtxRetain(&ctx0, 0), CUDA_SUCCESS);
    CHECK_EQ_INT(cuCtxGetDevice_v2(&dev, ctx0), CUDA_SUCCESS);
    CHECK_EQ_INT(dev, 0);
    CHECK_EQ_INT(cuCtxGetDevice_v2(&dev, (CUcontext)&dev), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_EQ_INT(cuDevicePrimaryCtxRelease(2), CUDA_SUCCESS);
    CHECK_EQ_INT(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);

    /* Streams remember the device current at creation; NULL means the current device. */
    cudaStream_t s1;
    CHECK_EQ_INT(cudaSetDevice(1), cudaSuccess);
    CHECK_EQ_INT(cudaStreamCreate(&s1), cudaSuccess);
    CHECK_EQ_INT(cudaSetDevice(0), cudaSuccess);
    CHECK_EQ_INT(cudaStreamGetDevice(s1, &rdev), cudaSuccess);
    CHECK_EQ_INT(rdev, 1);
    CHECK_EQ_INT(cudaStreamGetDevice_ptsz(s1, &rdev), cudaSuccess);
    CHECK_EQ_INT(rdev, 1);
    CHECK_EQ_INT(cudaStreamGetDevice(NULL, &rdev), cudaSuccess);
    CHECK_EQ_INT(rdev, 0);
    CHECK_EQ_INT(cuStreamGetDevice(CU_STREAM_PER_THREAD, &dev), CUDA_SUCCESS);
    CHECK_EQ_INT(dev, 0);
    CHECK_EQ_INT(cuStreamGetDevice_ptsz(s1, &dev), CUDA_SUCCESS);
    CHECK_EQ_INT(dev, 1);

    /* A stream-ordered allocation lands on the stream's device, not the current one. */
    void *on1;
    CHECK_EQ_INT(cudaMallocAsync(&on1, 4096, s1), cudaSuccess);
    int ordinal = -1;
    CHECK_EQ_INT(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                       (CUdeviceptr)on1 + 4095),
                 CUDA_SUCCESS);
    CHECK_EQ_INT(ordinal, 1);
    CHECK_EQ_INT(cuStreamSynchronize(s1), CUDA_SUCCESS);
    CHECK_EQ_INT(cudaFreeAsync(on1, s1), cudaSuccess);
    CHECK_EQ_INT(cudaStreamDestroy(s1), cudaSuccess);
    CHECK_EQ_INT(cuStreamGetDevice(s1, &dev), CUDA_ERROR_INVALID_HANDLE);
    CHECK_EQ_INT(cudaStreamGetDevice(s1, &rdev), cudaErrorInvalidResourceHandle);
    CHECK_EQ_INT(cudaDeviceSynchronize(), cudaSuccess);

    /* Pointer attributes, through the runtime and the driver. */
    void *d, *m, *h;
    int stack = 0;
    CHECK_EQ_INT(cudaMalloc(&d, 100), cudaSuccess);
    CHECK_EQ_INT(cudaMallocManaged(&m, 100, cudaMemAttachGlobal), cudaSuccess);
    CHECK_EQ_INT(cudaSetDevice(2), cudaSuccess);
    CHECK_EQ_INT(cudaHostAlloc(&h, 100, cudaHostAllocPortable), cudaSuccess);
    CHECK_EQ_INT(cudaSetDevice(0), cudaSuccess);
    struct cudaPointerAttributes a;
    CHECK_EQ_INT(cudaPointerGetAttributes(&a, (char *)d + 50), cudaSuccess);
    CHECK_EQ_INT(a.type, cudaMemoryTypeDevice);
    CHECK_EQ_INT(a.device, 0);
    CHECK(a.devicePointer == (char *)d + 50 && a.hostPointer == NULL);
    CHECK_EQ_INT(cudaPointerGetAttributes(&a, m), cudaSuccess);
    CHECK_EQ_INT(a.type, cudaMemoryTypeManaged);
    CHECK(a.devicePointer == m && a.hostPointer == m);
    CHECK_EQ_INT(cudaPointerGetAttributes(&a, h), cudaSuccess);
    CHECK_EQ_INT(a.type, cudaMemoryTypeHost);
    CHECK_EQ_INT(a.device, 2);
    CHECK(a.hostPointer == h);
    CHECK_EQ_INT(cudaPointerGetAttributes(&a, &stack), cudaSuccess);
    CHECK_EQ_INT(a.type, cudaMemoryTypeUnregistered);
    CHECK_EQ_INT(a.device, -2);
    unsigned int type = 0;
    CHECK_EQ_INT(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)d),
                 CUDA_SUCCESS);
    CHECK_EQ_INT(type, CU_MEMORYTYPE_DEVICE);
    CHECK_EQ_INT(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)h),
                 CUDA_SUCCESS);
    CHECK_EQ_INT(type, CU_MEMORYTYPE_HOST);
    CHECK_EQ_INT(
        cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)&stack),
        CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ_INT(cudaFree(d), cudaSuccess);
    CHECK_EQ_INT(cudaFree(m), cudaSuccess);
    CHECK_EQ_INT(cudaFreeHost(h), cudaSuccess);
    return CHECK_DONE();
}
