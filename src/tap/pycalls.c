/* The calls the PyTorch hooks make at every step (a phase's begin and end, the step mark, the
 * backward hooks that make a module current), as Python builtins: through ctypes each cost about
 * 2,500 instructions, most of them ctypes' own (argument conversion, libffi). The phase and step
 * calls let go of the GIL while the library works, as a ctypes call does: ending an optimizer
 * phase may write an interim snapshot. */
#include "pyapi.h"
#include "vramtap.h"

static const py_api *py;

/* fn(NAME) for a bytes NAME; with the GIL let go around it. */
static py_object *named(int (*fn)(const char *), py_object *const *args, py_ssize_t nargs)
{
    const char *name = py->BytesAsString(nargs == 1 ? args[0] : py->none);
    if (!name)
        return NULL; /* TypeError, set by PyBytes_AsString */
    void *ts = py->SaveThread();
    int rc = fn(name);
    py->RestoreThread(ts);
    return py->LongFromLong(rc);
}

static py_object *on_begin(py_object *self, py_object *const *args, py_ssize_t nargs)
{
    (void)self;
    return named(vramtap_phase_begin, args, nargs);
}

static py_object *on_end(py_object *self, py_object *const *args, py_ssize_t nargs)
{
    (void)self;
    return named(vramtap_phase_end, args, nargs);
}

static py_object *on_mark(py_object *self, py_object *const *args, py_ssize_t nargs)
{
    (void)self, (void)args, (void)nargs;
    void *ts = py->SaveThread();
    int rc = vramtap_step_mark();
    py->RestoreThread(ts);
    return py->LongFromLong(rc);
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
