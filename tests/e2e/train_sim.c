/* A simulated training job over the stand-in: the allocation pattern of a small model trained
 * with an Adam-style optimizer, phase-marked through the C API. It knows what each buffer is,
 * so it prints the bill vramtap must find at the peak (one "EXPECT category NAME BYTES" line
 * per category) without applying vramtap's rules.
 *
 *   train_sim [--batch B] [--steps S] [--accum K] [--no-markers] [--killed-after N]
 *             [--opt-workspace MIB] [--layers N] [--modules]
 *
 * --killed-after N: after N steps, print the bill so far and die by SIGKILL, as a job killed at
 * its time limit does. --opt-workspace M: a temporary of M MiB inside each optimizer step (a
 * fused optimizer's flat buffer), which makes the optimizer step the peak at small batches.
 * It also prints each phase's largest live bytes ("EXPECT phase NAME BYTES"). --modules: each
 * layer's forward and backward run under the module path "net.layers.L", the output is made
 * under "net.head" (through include/vramtap.h, as a framework's hooks would).
 *
 * Per layer (4 unless --layers N, up to 16): a 4 MiB weight (layer 0 through VMM), a 4 MiB gradient
 * made in the first backward (on a worker thread, as PyTorch's autograd does), two 4 MiB optimizer
 * state tensors made in the first optimizer step through a driver entry point. Per micro-batch: the
 * input batch (B x 256 KiB) uploaded before forward; B x 512 KiB of activations per layer kept for
 * backward; a 1 MiB workspace inside each layer's forward; the output (B x 128 KiB) kept until
 * the next forward replaces it; a 2 MiB workspace inside each layer's backward. A 1 MiB cache
 * is built lazily in the first forward and kept. */
#define CUDA_ENABLE_DEPRECATED
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vramtap.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define MAX_LAYERS 16

static size_t batch = 4, opt_workspace = 0;
static int markers = 1, layers = 4;
/* --modules: ids of "net.layers.L" and, last, "net.head" (0 when off) */
static unsigned module_ids[MAX_LAYERS + 1];
static void *acts[MAX_LAYERS], *grads[MAX_LAYERS];
static CUresult (*driver_alloc)(CUdeviceptr *, size_t);

/* The program's own account: live bytes by what the buffer is, and the first maximum. */
enum { PARAM, GRAD, OPT, ACT, TEMP, NCAT };
static const char *const cat_names[NCAT] = {"parameters", "gradients", "optimizer_state",
                                            "activations", "temporary"};
static size_t live[NCAT], peak_total, at_peak[NCAT];
/* the phase open now (0: none) and each phase's largest live bytes */
enum { NO_PHASE, FORWARD, BACKWARD, OPTIMIZER, NPHASE };
static const char *const phase_names[NPHASE] = {"", "forward", "backward", "optimizer"};
static int phase_now;
static size_t phase_max[NPHASE];

static size_t live_total(void)
{
    size_t total = 0;
    for (int c = 0; c < NCAT; c++)
        total += live[c];
    return total;
}

static void account(int cat, long long delta)
{
    live[cat] += (size_t)delta;
    size_t total = live_total();
    if (total > phase_max[phase_now])
        phase_max[phase_now] = total;
    if (total > peak_total) {
        peak_total = total;
        memcpy(at_peak, live, sizeof live);
    }
}

static void print_bill(void)
{
    printf("EXPECT peak %zu\n", peak_total);
    for (int c = 0; c < NCAT; c++)
        printf("EXPECT category %s %zu\n", cat_names[c], at_peak[c]);
    for (int p = FORWARD; p < NPHASE && markers; p++)
        printf("EXPECT phase %s %zu\n", phase_names[p], phase_max[p]);
}

/* a frame of its own in every build: the tests read it in the stacks of a stripped binary */
__attribute__((noinline)) static void *alloc(size_t size, int cat)
{
    void *p;
    if (cudaMalloc(&p, size) != cudaSuccess) {
        fprintf(stderr, "train_sim: out of memory allocating %zu bytes\n", size);
        exit(1);
    }
    account(cat, (long long)size);
    return p;
}

static void release(void *p, size_t size, int cat)
{
    cudaFree(p);
    account(cat, -(long long)size);
}

/* A phase instance's maximum starts at what is live when it begins, as vramtap's does. */
static void begin(const char *phase, int which)
{
    if (!markers)
        return;
    vramtap_begin(phase);
    phase_now = which;
    if (live_total() > phase_max[which])
        phase_max[which] = live_total();
}

static void end(const char *phase)
{
    if (!markers)
        return;
    vramtap_end(phase);
    phase_now = NO_PHASE;
}

static unsigned enter_module(unsigned id)
{
    return vramtap_module_enter ? vramtap_module_enter(id) : 0;
}

static void name_modules(void)
{
    char path[32];
    for (int l = 0; l <= layers && vramtap_module_path; l++) {
        if (l < layers)
            snprintf(path, sizeof path, "net.layers.%d", l);
        module_ids[l] = vramtap_module_path(l < layers ? path : "net.head");
    }
}

static void *backward_worker(void *arg)
{
    (void)arg;
    for (int l = layers - 1; l >= 0; l--) {
        unsigned outer = enter_module(module_ids[l]);
        if (!grads[l])
            grads[l] = alloc(4 * MiB, GRAD);
        release(alloc(2 * MiB, TEMP), 2 * MiB, TEMP);
        release(acts[l], batch * 512 * KiB, ACT);
        enter_module(outer);
    }
    return NULL;
}

/* Layer 0's weight through VMM: physical memory mapped into a reserved range. */
static void vmm_weight(void)
{
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    if (cuMemAddressReserve(&va, 4 * MiB, 0, 0, 0) != CUDA_SUCCESS ||
        cuMemCreate(&h, 4 * MiB, &prop, 0) != CUDA_SUCCESS || cuMemMap(va, 4 * MiB, 0, h, 0)) {
        fprintf(stderr, "train_sim: VMM failed\n");
        exit(1);
    }
    account(PARAM, 4 * MiB);
}

int main(int argc, char **argv)
{
    int steps = 3, accum = 1, killed_after = -1, name_modules_later = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = (size_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--accum") && i + 1 < argc)
            accum = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-markers"))
            markers = 0;
        else if (!strcmp(argv[i], "--killed-after") && i + 1 < argc)
            killed_after = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--opt-workspace") && i + 1 < argc)
            opt_workspace = (size_t)atoi(argv[++i]) * MiB;
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc && atoi(argv[i + 1]) >= 1 &&
                 atoi(argv[i + 1]) <= MAX_LAYERS)
            layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--modules"))
            name_modules_later = 1;
        else {
            fprintf(stderr,
                    "usage: train_sim [--batch B] [--steps S] [--accum K] [--no-markers] "
                    "[--killed-after N] [--opt-workspace MIB] [--layers 1-16] [--modules]\n");
            return 2;
        }
    }
    if (cudaGetDriverEntryPoint("cuMemAlloc", (void **)&driver_alloc, cudaEnableDefault, NULL) !=
        cudaSuccess) {
        fprintf(stderr, "train_sim: no driver entry point\n");
        return 1;
    }

    if (name_modules_later)
        name_modules();
    vmm_weight();
    for (int l = 1; l < layers; l++)
        alloc(4 * MiB, PARAM);
    void *cache = NULL, *output = NULL, *state[2 * MAX_LAYERS] = {0};
    for (int s = 0; s < steps; s++) {
        for (int m = 0; m < accum; m++) {
            void *input = alloc(batch * 256 * KiB, ACT);
            begin(VRAMTAP_FORWARD, FORWARD);
            if (!cache)
                cache = alloc(1 * MiB, PARAM);
            if (output)
                release(output, batch * 128 * KiB, ACT);
            for (int l = 0; l < layers; l++) {
                unsigned outer = enter_module(module_ids[l]);
                acts[l] = alloc(batch * 512 * KiB, ACT);
                release(alloc(1 * MiB, TEMP), 1 * MiB, TEMP);
                enter_module(outer);
            }
            unsigned outer = enter_module(module_ids[layers]);
            output = alloc(batch * 128 * KiB, ACT);
            enter_module(outer);
            end(VRAMTAP_FORWARD);

            begin(VRAMTAP_BACKWARD, BACKWARD);
            pthread_t t;
            pthread_create(&t, NULL, backward_worker, NULL);
            pthread_join(t, NULL);
            end(VRAMTAP_BACKWARD);
            release(input, batch * 256 * KiB, ACT);
        }
        begin(VRAMTAP_OPTIMIZER, OPTIMIZER);
        for (int k = 0; k < 2 * layers && !state[k]; k++) {
            CUdeviceptr p;
            if (driver_alloc(&p, 4 * MiB) != CUDA_SUCCESS) {
                fprintf(stderr, "train_sim: out of memory in the optimizer\n");
                return 1;
            }
            state[k] = (void *)p;
            account(OPT, 4 * MiB);
        }
        release(alloc(512 * KiB, TEMP), 512 * KiB, TEMP);
        if (opt_workspace)
            release(alloc(opt_workspace, TEMP), opt_workspace, TEMP);
        end(VRAMTAP_OPTIMIZER);
        if (s + 1 == killed_after) {
            print_bill();
            fflush(stdout);
            raise(SIGKILL);
        }
    }
    print_bill();
    return 0;
}
