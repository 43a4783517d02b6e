/* What the runtime stand-in's files share: reaching the driver, entering a call, and failing
 * one. */
#ifndef STANDIN_RUNTIME_H
#define STANDIN_RUNTIME_H

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdbool.h>

#define HIDDEN __attribute__((visibility("hidden")))

/* A driver entry point through cuGetProcAddress_v2, NULL when it has none. */
HIDDEN void *lookup(const char *symbol, int version, cuuint64_t flags);
/* The copy entry points, looked up with the others at the first call (runtime_copy.c). */
HIDDEN bool copy_lookups(void);
/* Loads the driver and makes the runtime's device current unless the thread has a context. */
HIDDEN cudaError_t enter(void);
/* Every result goes back through here, so cudaGetLastError sees what the caller saw. */
HIDDEN cudaError_t done(cudaError_t e);
HIDDEN cudaError_t to_runtime(CUresult r);
/* A device's primary context, retained once. */
HIDDEN CUresult primary_ctx(int device, CUcontext *ctx);

#endif
