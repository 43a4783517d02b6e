/* NVIDIA's own libcudart.so.13 over the stand-in driver (skipped where the CUDA toolkit is not
 * installed): it gets through its start-up lookups exactly as recorded against a logging driver
 * in ../shared/reference/cudart13-driver-lookups.txt, and its cudaMalloc then fails instead of
 * crashing: the stand-in has no private export table, its cuGetExportTable answers
 * CUDA_ERROR_NOT_SUPPORTED and the runtime passes that on as cudaErrorNotSupported. */
#include "check.h"
#include "test_log.h"

#include <cuda.h>
#include <dlfcn.h>

#define REAL_CUDART "/usr/local/cuda/lib64/libcudart.so.13"

int main(void)
{
    /* The stand-in driver is linked in, so the real runtime's dlopen("libcuda.so.1") finds it
     * already loaded, whatever else the machine has. */
    int version = 0;
    CHECK_EQ_INT(cuDriverGetVersion(&version), CUDA_SUCCESS);
    log_start();
    void *rt = dlopen(REAL_CUDART, RTLD_NOW | RTLD_LOCAL);
    if (!rt) {
        fprintf(stderr, "skipping: %s\n", dlerror());
        return 77;
    }
    int (*cuda_malloc)(void **, size_t) = (int (*)(void **, size_t))dlsym(rt, "cudaMalloc");
    CHECK(cuda_malloc != NULL);
    void *p = NULL;
    CHECK_EQ_INT(cuda_malloc ? cuda_malloc(&p, 1024) : -1, 801 /* cudaErrorNotSupported */);

    char *lines[LOG_MAX_LINES];
    int n = log_read(lines);
    CHECK(n > 400);

    /* Every lookup the reference recorded, in the same order. */
    char path[4096];
    const char *reference = getenv("VT_REFERENCE");
    snprintf(path, sizeof path, "%s/cudart13-driver-lookups.txt", reference ? reference : ".");
    FILE *ref = fopen(path, "r");
    if (ref) {
        char want[256];
        int i = 0, matched = 0, expected = 0;
        while (fgets(want, sizeof want, ref)) {
            want[strcspn(want, "\n")] = 0;
            if (strncmp(want, "[gpa]", 5))
                continue;
            expected++;
            if (i < n && !strcmp(lines[i], want))
                matched++;
            else
                fprintf(stderr, "lookup %d: want \"%s\", got \"%s\"\n", i, want,
                        i < n ? lines[i] : "(end)");
            i++;
        }
        fclose(ref);
        CHECK(expected > 400);
        CHECK_EQ_INT(matched, expected);
        CHECK_EQ_INT(n, expected);
    } else {
        fprintf(stderr, "note: %s not found, lookup order not compared\n", path);
    }
    for (int i = 0; i < n; i++)
        free(lines[i]);
    return CHECK_DONE();
}
