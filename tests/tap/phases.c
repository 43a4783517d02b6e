/* Phases and steps from NVTX ranges (push/pop, start/end, ASCII and Ex forms, an alias from
 * VRAMTAP_PHASES, nested and foreign ranges ignored) and the C API, with backward allocations
 * made on a worker thread and an optimizer range ended on another thread. Every allocation's
 * birth and death phase and step must be exactly right. Runs with VRAMTAP_PHASES=bwd=backward. */
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>

#include "check.h"
#include "vramtap.h"

#define KiB 1024
#define MiB (1024 * KiB)

static void *alloc(size_t size)
{
    void *p = NULL;
    if (cudaMalloc(&p, size) != cudaSuccess)
        fprintf(stderr, "cudaMalloc(%zu) failed\n", size);
    return p;
}

static void *grad;
static void *activation0;

static void *backward_worker(void *arg)
{
    (void)arg;
    grad = alloc(1 * MiB);
    cudaFree(activation0);
    return NULL;
}

static void *end_range(void *id)
{
    nvtxRangeEnd((nvtxRangeId_t)(uintptr_t)id);
    return NULL;
}

static void expect(void *p, const char *birth, int bstep, const char *death, int dstep)
{
    printf("EXPECT birth %p %s %d\n", p, birth, bstep);
    if (death)
        printf("EXPECT death %p %s %d\n", p, death, dstep);
    else
        printf("EXPECT death %p null null\n", p);
}

int main(void)
{
    CHECK_EQ_INT(vramtap_loaded(), 1);
    void *param = alloc(1 * MiB);
    void *batch = alloc(64 * KiB);

    /* Step 0: forward by NVTX push/pop, with ranges inside that must not matter. */
    nvtxRangePushA("forward");
    activation0 = alloc(100 * KiB);
    nvtxRangePushA("forward"); /* nested: not a new phase instance */
    nvtxRangePushA("layer1");  /* not a phase */
    cudaFree(alloc(10 * KiB));
    nvtxRangePop();
    nvtxRangePop();
    nvtxRangePop();

    /* Backward by the C API, its allocations made on a worker thread. */
    CHECK_EQ_INT(vramtap_begin(VRAMTAP_BACKWARD), VRAMTAP_OK);
    pthread_t t;
    pthread_create(&t, NULL, backward_worker, NULL);
    pthread_join(t, NULL);
    CHECK_EQ_INT(vramtap_end(VRAMTAP_BACKWARD), VRAMTAP_OK);

    /* Optimizer by a start/end range, ended on another thread. */
    nvtxRangeId_t opt = nvtxRangeStartA("optimizer");
    void *state = alloc(2 * MiB);
    pthread_create(&t, NULL, end_range, (void *)(uintptr_t)opt);
    pthread_join(t, NULL);

    /* Step 1: forward by an Ex range with a capitalised name, backward by an alias. */
    nvtxEventAttributes_t attr = {0};
    attr.version = NVTX_VERSION;
    attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attr.message.ascii = "Forward";
    nvtxRangePushEx(&attr);
    void *activation1 = alloc(200 * KiB);
    nvtxRangePop();
    nvtxRangePushA("bwd");
    void *workspace = alloc(8 * MiB); /* the peak */
    cudaFree(workspace);
    cudaFree(activation1);
    nvtxRangePop();
    cudaFree(batch); /* between phases: "other" */
    CHECK_EQ_INT(vramtap_begin(VRAMTAP_OPTIMIZER), VRAMTAP_OK);
    CHECK_EQ_INT(vramtap_end(VRAMTAP_OPTIMIZER), VRAMTAP_OK);
    CHECK_EQ_INT(vramtap_end(VRAMTAP_OPTIMIZER), VRAMTAP_ENOTOPEN);
    CHECK_EQ_INT(vramtap_begin("sideways"), VRAMTAP_EUNKNOWN);

    expect(param, "setup", 0, NULL, 0);
    expect(batch, "setup", 0, "other", 1);
    expect(grad, "backward", 0, NULL, 0);
    expect(state, "optimizer", 0, NULL, 0);
    expect(activation1, "forward", 1, "backward", 1);
    expect(workspace, "backward", 1, "backward", 1);
    printf("EXPECT at_peak_count 0 6\n");
    printf("EXPECT peak 0 %d\n", 1 * MiB + 64 * KiB + 1 * MiB + 2 * MiB + 200 * KiB + 8 * MiB);
    printf("EXPECT peak_at 0 backward 1\nEXPECT markers true\nEXPECT steps 2\n");
    return CHECK_DONE();
}
