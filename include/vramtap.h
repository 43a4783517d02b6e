/* vramtap: the public C API.
 *
 * Mark training phases so that vramtap can tell parameters, gradients, optimizer state,
 * activations and temporaries apart. A program built with this header runs unchanged without
 * vramtap: the functions are weak references, and the inline helpers below do nothing when
 * libvramtap.so is not loaded (LD_PRELOAD or `vramtap run`).
 *
 *     vramtap_begin(VRAMTAP_FORWARD);  ... forward ...  vramtap_end(VRAMTAP_FORWARD);
 *     vramtap_begin(VRAMTAP_BACKWARD); ... backward ... vramtap_end(VRAMTAP_BACKWARD);
 *     vramtap_begin(VRAMTAP_OPTIMIZER); ... step ...    vramtap_end(VRAMTAP_OPTIMIZER);
 *
 * The step counter advances when an optimizer phase ends; a program without an optimizer
 * (inference) calls vramtap_step() once per iteration instead. Phase state is process-wide:
 * a phase opened on one thread covers allocations made by every thread.
 */
#ifndef VRAMTAP_H
#define VRAMTAP_H

#ifdef __cplusplus
extern "C" {
#endif

#define VRAMTAP_FORWARD "forward"
#define VRAMTAP_BACKWARD "backward"
#define VRAMTAP_OPTIMIZER "optimizer"

/* Status values returned by the API. */
#define VRAMTAP_OK 0
#define VRAMTAP_EUNKNOWN -1 /* not a phase name (see VRAMTAP_PHASES in docs/api.md) */
#define VRAMTAP_ENESTED                                                                            \
    -2                      /* begun inside an open phase: no new phase instance; end it as usual  \
                             */
#define VRAMTAP_ENOTOPEN -3 /* end of a phase that is not the innermost open one: ignored */

/* Open the phase `name` ("forward", "backward", "optimizer", case-insensitive, or an alias
 * from VRAMTAP_PHASES). */
int vramtap_phase_begin(const char *name) __attribute__((weak));
/* Close it. Closing "optimizer" completes a step. */
int vramtap_phase_end(const char *name) __attribute__((weak));
/* Advance the step counter by one (for loops without an optimizer phase). */
int vramtap_step_mark(void) __attribute__((weak));
/* 1 when libvramtap.so is loaded and recording. */
int vramtap_is_loaded(void) __attribute__((weak));
/* An out-of-memory error raised by the framework itself, with no failed CUDA call for vramtap
 * to see (PyTorch's per-process memory fraction): `size` bytes were asked of `device`. A
 * post-mortem is written as for a failed call. Returns 1 when recorded, 0 when vramtap had
 * already recorded this failure. */
int vramtap_note_oom(unsigned long long size, int device) __attribute__((weak));
/* Correct the recorded allocator mode of a framework ("pytorch", "jax", "tensorflow") when the
 * program changed it after start: mode "tensor" or "native", a short reason. 0 on success. */
int vramtap_note_mode(const char *framework, const char *mode, const char *reason)
    __attribute__((weak));

/* What a range of device memory holds, when the timing of phases cannot tell: the categories
 * of the bill (docs/categories.md). */
#define VRAMTAP_PARAMETERS "parameters"
#define VRAMTAP_GRADIENTS "gradients"
#define VRAMTAP_OPTIMIZER_STATE "optimizer_state"
#define VRAMTAP_ACTIVATIONS "activations"
#define VRAMTAP_TEMPORARY "temporary"

/* Label [address, address + bytes) with a category. The range may be a whole allocation or part
 * of one (a view into a flat buffer, a tensor inside an allocator's segment): at the peak the
 * allocation's bytes are split by range and the rest keeps the category its timing gives. A
 * label holds for the allocation live at that address when it was made; label again after
 * memory is re-made. Ranges outside any allocation vramtap saw (host memory) are ignored.
 * Returns VRAMTAP_OK, or VRAMTAP_EUNKNOWN for a category not listed above. */
int vramtap_label_range(const void *address, unsigned long long bytes, const char *category)
    __attribute__((weak));
/* The same for n ranges at once: ranges[2*i] is an address, ranges[2*i+1] its length. */
int vramtap_label_ranges(const unsigned long long *ranges, unsigned long long n,
                         const char *category) __attribute__((weak));
/* The run record (`vramtap report --record`): what ran, as key and value, e.g.
 * ("model", "GPT"), ("batch_size", 8). Keys are lowercase letters, digits and '_' (at most 47);
 * setting a key again replaces it; values longer than 255 bytes are cut. Well-known keys are
 * listed in docs/api.md. VRAMTAP_EUNKNOWN for a bad key or a full record (48 keys). */
int vramtap_record_text(const char *key, const char *value) __attribute__((weak));
int vramtap_record_int(const char *key, long long value) __attribute__((weak));

/* The nn.Module path (or any name of a part of the program, dot-separated: "enc.layers.0.attn")
 * that the allocations made from now on belong to, for the report's bill by module
 * (docs/modules.md). vramtap_module_path interns a path once and returns its id (0 when
 * vramtap is not loaded or out of room); vramtap_module_enter makes an id current, for every
 * thread, and returns the one it replaces, to be made current again on leaving. 0: no module.
 * OR an id with VRAMTAP_MODULE_RECOMPUTED for a forward that runs again inside backward
 * (activation checkpointing). The current id is also the library's variable
 * vramtap_module_current (a uint32), which Python hooks write directly (cheaper than a call). */
#define VRAMTAP_MODULE_RECOMPUTED 0x80000000u
unsigned int vramtap_module_path(const char *path) __attribute__((weak));
unsigned int vramtap_module_enter(unsigned int id) __attribute__((weak));

static inline int vramtap_label(const void *address, unsigned long long bytes, const char *category)
{
    return vramtap_label_range ? vramtap_label_range(address, bytes, category) : VRAMTAP_OK;
}

static inline int vramtap_begin(const char *name)
{
    return vramtap_phase_begin ? vramtap_phase_begin(name) : VRAMTAP_OK;
}
static inline int vramtap_end(const char *name)
{
    return vramtap_phase_end ? vramtap_phase_end(name) : VRAMTAP_OK;
}
static inline int vramtap_step(void)
{
    return vramtap_step_mark ? vramtap_step_mark() : VRAMTAP_OK;
}
static inline int vramtap_loaded(void)
{
    return vramtap_is_loaded ? vramtap_is_loaded() : 0;
}

#ifdef __cplusplus
}
#endif

#endif
