/* The few pieces of CPython's C API vramtap uses, looked up at run time (libpython is never
 * linked): pystack.c resolves them, pyframes.c borrows them. The same in 3.9 to 3.13. */
#ifndef VT_PYAPI_H
#define VT_PYAPI_H

#include <pthread.h>
#include <stddef.h>

#include "tap.h"

typedef struct py_object py_object;
typedef ptrdiff_t py_ssize_t;
typedef int (*py_tracefunc)(py_object *, py_object *, int, py_object *);
typedef py_object *(*py_fastcall)(py_object *, py_object *const *, py_ssize_t);
typedef struct { /* PyMethodDef */
    const char *name;
    py_fastcall meth;
    int flags;
    const char *doc;
} py_method_def;
#define PY_METH_FASTCALL 0x0080
#define PY_FILE_INPUT 257
enum { PY_TRACE_CALL = 0, PY_TRACE_RETURN = 3, PY_TRACE_C_CALL = 4 };

typedef struct {
    const char *(*GetVersion)(void);
    int (*GILState_Check)(void);
    void *(*GILState_GetThisThreadState)(void);
    void *(*ThreadState_Get)(void);
    void *(*ThreadState_GetInterpreter)(void *);
    void *(*ThreadState_New)(void *);
    void (*ThreadState_Clear)(void *);
    void (*ThreadState_Delete)(void *);
    int (*SetProfileOn)(void *, py_tracefunc, py_object *);
    void (*SetProfile)(py_tracefunc, py_object *);
    void *(*InterpreterState_ThreadHead)(void *);
    void *(*ThreadState_Next)(void *);
    int (*IsFinalizing)(void);
    int (*AtExit)(void (*)(void));
    py_object *(*GetFrame)(void);
    py_object *(*FrameGetBack)(py_object *);
    py_object *(*FrameGetCode)(py_object *);
    int (*FrameGetLineNumber)(py_object *);
    int (*CodeAddr2Line)(py_object *, int);
    py_ssize_t (*RequestCodeExtraIndex)(void (*)(void *));
    int (*CodeGetExtra)(py_object *, py_ssize_t, void **);
    int (*CodeSetExtra)(py_object *, py_ssize_t, void *);
    py_object *(*GetAttrString)(py_object *, const char *);
    const char *(*UnicodeAsUTF8)(py_object *);
    long (*LongAsLong)(py_object *);
    void (*IncRef)(py_object *);
    void (*DecRef)(py_object *);
    void (*ErrFetch)(py_object **, py_object **, py_object **);
    void (*ErrRestore)(py_object *, py_object *, py_object *);
    void (*ErrClear)(void);
    py_object *(*CFunctionNewEx)(py_method_def *, py_object *, py_object *);
    py_object *(*RunStringFlags)(const char *, int, py_object *, py_object *, void *);
    py_object *(*DictNew)(void);
    int (*DictSetItemString)(py_object *, const char *, py_object *);
    py_object *(*DictGetItemString)(py_object *, const char *);
    py_object *(*GetBuiltins)(void);
    py_object *(*LongFromLong)(long);
    char *(*BytesAsString)(py_object *);
    void *(*SaveThread)(void);
    void (*RestoreThread)(void *);
    py_object *none;
    void *FunctionType, *MethodType, *CodeType, *UnicodeType;
} py_api;

/* With the GIL held (pystack.c): runs `src` in fresh globals that also hold `n` named objects;
 * returns the globals (a new reference), or NULL after clearing the error. */
VT_HIDDEN py_object *vt_pystack_run(const char *src, const char *const *names,
                                    py_object *const *values, int n);

/* With the GIL held: the C API of the process's CPython (3.9 or later), or NULL. */
VT_HIDDEN const py_api *vt_pystack_api(void);

/* Zeroed memory for the calling thread, registered under `key` (whose destructor frees it). */
VT_HIDDEN void *vt_pystack_thread_data(pthread_key_t key, size_t size);

#endif
