/* The calls the PyTorch hooks make at every step (a phase's begin and end, the step mark, an
 * outermost module call's enter and exit, a module call's question whether it is nested in one,
 * a backward call's enter and exit, the backward hooks that make a module current), as Python
 * builtins: through ctypes each cost about 2,500 instructions, most of them ctypes' own
 * (argument conversion, libffi). Only a call that may write an interim snapshot (ending an
 * optimizer phase or a step mark, while a peak rose since the last one) lets go of the GIL, as
 * a ctypes call does. The others keep it: the books' lock they take is never held by a thread
 * that waits for the GIL, and letting go hands the GIL to any thread waiting for it (a data
 * loader's), which the training thread must then wait out, at every phase boundary. A peak that
 * rises on another thread between the look and the step boundary gets its file written with the
 * GIL held: other Python threads wait, nothing blocks. */
#include <stdatomic.h>

#include "mpath.h"
#include "phase.h"
#include "pyapi.h"
#include "snapshot.h"
#include "table.h"
#include "vramtap.h"

static const py_api *py;

/* The bytes NAME argument, or NULL with a TypeError set (by PyBytes_AsString). */
static const char *name_arg(py_object *const *args, py_ssize_t nargs)
{
    return py->BytesAsString(nargs == 1 ? args[0] : py->none);
}

static py_object *on_begin(py_object *self, py_object *const *args, py_ssize_t nargs)
{
    (void)self;
    const char *name = name_arg(args, nargs);
    return name ? py->LongFromLong(vramtap_phase_begin(name)) : NULL;
}

static py_object *on_end(py_object *self, py_object *const *args, py_ssize_t nargs)
{
    (void)self;
    const char *name = name_arg(args, nargs);
    if (!name)
        return NULL;
    int phase = vt_phase_lookup(name);
    if (phase < 0)
        return py->LongFromLong(VRAMTAP_EUNKNOWN);
    void *ts =
        phase == VT_PHASE_OPTIMIZER && vt_snapshot_interim_may_write() ? py->SaveThread() : NULL;
    int rc = vt_phase_end(phase);
    if (ts)
        py->RestoreThread(ts);
    return py->LongFromLong(rc);
}

static py_object *on_mark(py_object *self, py_object *const *args, py_ssize_t nargs)
{
    (void)self, (void)args, (void)nargs;
    void *ts = vt_snapshot_interim_may_write() ? py->SaveThread() : NULL;
    int rc = vramtap_step_mark();
    if (ts)
        py->RestoreThread(ts);
    return py->LongFromLong(rc);
}

/* Outermost module calls running now, all threads together: a call made while another thread's
 * outermost call runs (DataParallel's replicas) is part of that one. Counted here, by the GIL's
 * holder, rather than under a Python lock: taking and letting go of one cost more than the rest of
 * the outermost call's bookkeeping. */
static _Atomic int outer_calls;
/* Whether the calling thread runs an outermost module call (from forward_enter to forward_exit):
 * each module call asks on entry, and one builtin call costs less than a Python thread-local's
 * lookup and a ctypes read of the allocation count. */
static VT_TLS int in_module_call;

/* The path an outermost module call made current put back when it returns (kept: whether
 * there is one to put back). */
static VT_TLS uint32_t root_prev;
static VT_TLS int root_kept;

/* forward_enter(grad, pid): None for a call nested in another thread's outermost call, else
 * whether it began a forward: only with grad (under no_grad or inference_mode a module call
 * builds nothing for backward: evaluation, not a training forward). With a pid (module paths on;
 * None when off, or left out by hooks older than this library, which keep the path themselves),
 * makes that path current, marked as a recomputation inside a backward. Every call is paired with
 * forward_exit. */
static py_object *on_forward_enter(py_object *self, py_object *const *args, py_ssize_t nargs)
{
    (void)self;
    long grad = py->LongAsLong(nargs == 1 || nargs == 2 ? args[0] : py->none);
    long pid = grad == -1 || nargs == 1 || args[1] == py->none ? -2 : py->LongAsLong(args[1]);
    if (grad == -1 || pid == -1)
        return NULL; /* TypeError or OverflowError, set by PyLong_AsLong */
    in_module_call = 1;
    if (pid >= 0) {
        root_prev = vramtap_module_enter(vt_mpath_as_now((uint32_t)pid));
        root_kept = 1;
    }
    if (atomic_fetch_add(&outer_calls, 1) > 0) {
        py->IncRef(py->none);
        return py->none;
    }
    if (grad)
        vt_phase_begin(VT_PHASE_FORWARD);
    return py->LongFromLong(grad != 0);
}

/* forward_exit(opened): what forward_enter returned. */
static py_object *on_forward_exit(py_object *self, py_object *const *args, py_ssize_t nargs)
{
    (void)self;
    py_object *opened = nargs == 1 ? args[0] : NULL;
    long began = opened == py->none ? 0 : py->LongAsLong(opened ? opened : py->none);
    if (began == -1)
        return NULL;
    in_module_call = 0;
    if (root_kept) {
        root_kept = 0;
        vramtap_module_enter(root_prev);
    }
    atomic_fetch_sub(&outer_calls, 1);
    if (began)
        vt_phase_end(VT_PHASE_FORWARD);
    py->IncRef(py->none);
    return py->none;
}

/* module_nested(): None where the calling thread runs no outermost module call, else the count of
 * device allocations recorded so far (vramtap_module_allocs), to compare once the call returns. */
static py_object *on_module_nested(py_object *self, py_object *const *args, py_ssize_t nargs)
{
    (void)self, (void)args, (void)nargs;
    if (!in_module_call) {
        py->IncRef(py->none);
        return py->none;
    }
    return py->LongFromLong(
        (long)atomic_load_explicit(&vramtap_module_allocs, memory_order_relaxed));
}

/* Backward calls running now, all threads together (a module call made meanwhile is a
 * recomputation), and the outermost ones begun since the last take (micro-batches). Counted here
 * by atomics: the hooks counted them under a Python lock, which cost more inside a training step
 * than the rest of a backward call's bookkeeping. */
static _Atomic uint32_t backwards_running;
static _Atomic long backwards_begun;

/* backward_enter(paths): begins a backward phase and counts the call; with module paths on
 * (paths true), publishes the count for them and makes no module current (autograd's tensor
 * hooks make each module current as its part of the graph begins), returning the path to put
 * back; 0 otherwise. Every call is paired with backward_exit. */
static py_object *on_backward_enter(py_object *self, py_object *const *args, py_ssize_t nargs)
{
    (void)self;
    long paths = py->LongAsLong(nargs == 1 ? args[0] : py->none);
    if (paths == -1)
        return NULL; /* TypeError, set by PyLong_AsLong */
    uint32_t running = atomic_fetch_add(&backwards_running, 1) + 1;
    if (running == 1)
        atomic_fetch_add(&backwards_begun, 1);
    unsigned int prev = 0;
    if (paths) {
        atomic_store_explicit(&vramtap_module_backward, running, memory_order_relaxed);
        prev = vramtap_module_enter(0);
    }
    vt_phase_begin(VT_PHASE_BACKWARD);
    return py->LongFromLong((long)prev);
}

/* backward_exit(paths, prev): ends what backward_enter(paths) began; prev is what it returned. */
static py_object *on_backward_exit(py_object *self, py_object *const *args, py_ssize_t nargs)
{
    (void)self;
    long paths = py->LongAsLong(nargs == 2 ? args[0] : py->none);
    long prev = paths == -1 ? -1 : py->LongAsLong(args[1]);
    if (prev == -1)
        return NULL;
    vt_phase_end(VT_PHASE_BACKWARD);
    uint32_t running = atomic_fetch_sub(&backwards_running, 1) - 1;
    if (paths) {
        atomic_store_explicit(&vramtap_module_backward, running, memory_order_relaxed);
        vramtap_module_enter((unsigned int)prev);
    }
    py->IncRef(py->none);
    return py->none;
}

/* backward_running(): backward calls running now. */
static py_object *on_backward_running(py_object *self, py_object *const *args, py_ssize_t nargs)
{
    (void)self, (void)args, (void)nargs;
    return py->LongFromLong((long)atomic_load(&backwards_running));
}

/* backwards_taken(): outermost backward calls begun since the last time it was asked. */
static py_object *on_backwards_taken(py_object *self, py_object *const *args, py_ssize_t nargs)
{
    (void)self, (void)args, (void)nargs;
    return py->LongFromLong(atomic_exchange(&backwards_begun, 0));
}

/* A tensor hook: makes module path `self` (an int) current. Autograd calls it with the gradient
 * of an output of that module's call, when the backward of the call begins. */
static py_object *on_grad(py_object *self, py_object *const *args, py_ssize_t nargs)
{
    (void)args, (void)nargs;
    long id = py->LongAsLong(self);
    vramtap_module_enter((unsigned int)id);
    py->IncRef(py->none);
    return py->none;
}

static py_method_def def_grad = {"vramtap_module_backward_hook", on_grad, PY_METH_FASTCALL, NULL};

/* Through ctypes.PyDLL: the tensor hook for path `id` (a new reference), or NULL. A Python
 * function doing the same costs its frame and a ctypes store at every call. */
VT_EXPORT py_object *vramtap_python_module_hook(unsigned int id)
{
    py = vt_pystack_api();
    if (!py || !py->GILState_Check())
        return NULL;
    py_object *self = py->LongFromLong((long)id);
    py_object *hook = self ? py->CFunctionNewEx(&def_grad, self, NULL) : NULL;
    py->DecRef(self);
    if (!hook)
        py->ErrClear();
    return hook;
}

static py_method_def defs[] = {
    {"vramtap_phase_begin", on_begin, PY_METH_FASTCALL, NULL},
    {"vramtap_phase_end", on_end, PY_METH_FASTCALL, NULL},
    {"vramtap_step_mark", on_mark, PY_METH_FASTCALL, NULL},
    {"vramtap_forward_enter", on_forward_enter, PY_METH_FASTCALL, NULL},
    {"vramtap_forward_exit", on_forward_exit, PY_METH_FASTCALL, NULL},
    {"vramtap_module_nested", on_module_nested, PY_METH_FASTCALL, NULL},
    {"vramtap_backward_enter", on_backward_enter, PY_METH_FASTCALL, NULL},
    {"vramtap_backward_exit", on_backward_exit, PY_METH_FASTCALL, NULL},
    {"vramtap_backward_running", on_backward_running, PY_METH_FASTCALL, NULL},
    {"vramtap_backwards_taken", on_backwards_taken, PY_METH_FASTCALL, NULL},
};

/* Through ctypes.PyDLL (the GIL held): a dict of the builtins by their functions' names (a new
 * reference), or NULL where there is no CPython to make them with. */
VT_EXPORT py_object *vramtap_python_calls(void)
{
    py = vt_pystack_api();
    if (!py || !py->GILState_Check())
        return NULL;
    py_object *calls = py->DictNew();
    for (size_t i = 0; calls && i < sizeof defs / sizeof defs[0]; i++) {
        py_object *fn = py->CFunctionNewEx(&defs[i], NULL, NULL);
        int failed = !fn || py->DictSetItemString(calls, defs[i].name, fn);
        py->DecRef(fn); /* the dict holds it */
        if (failed) {
            py->DecRef(calls);
            calls = NULL;
        }
    }
    if (!calls)
        py->ErrClear();
    return calls;
}
