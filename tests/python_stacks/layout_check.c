/* Checks the row of src/tap/pylayout.h for the CPython whose headers this is compiled against
 * (check.py layout VERSION adds their folder and its internal/ folder): every offset the frame
 * reader follows, the fixed ones, and where a str's state bits lie. Prints each difference;
 * exit 1 when there is one. */
#define Py_BUILD_CORE 1
#include <Python.h>
#if PY_VERSION_HEX >= 0x030e0000 /* the frame and its owners moved to a header of their own */
#include <internal/pycore_frame.h>
#include <internal/pycore_interpframe_structs.h>
#elif PY_VERSION_HEX >= 0x030b0000
#include <internal/pycore_frame.h>
#else
#include <frameobject.h>
#endif
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "pylayout.h"

static int differences;

static void same(const char *what, long table, long headers)
{
    if (table != headers) {
        printf("%s: %ld in the table, %ld in the headers\n", what, table, headers);
        differences++;
    }
}

#define SAME(field, expr) same(#field, (long)row->field, (long)(expr))

/* The state word of a str with one bit field set, as the reader sees it. */
static uint32_t state_with(int kind, int compact, int ascii)
{
    PyASCIIObject o;
    memset(&o, 0, sizeof o);
    o.state.kind = kind;
    o.state.compact = compact;
    o.state.ascii = ascii;
    uint32_t word;
    memcpy(&word, (char *)&o + VT_PY_STR_STATE, sizeof word);
    return word;
}

int main(void)
{
    const vt_pylayout *row = NULL;
    int version = PY_MAJOR_VERSION << 8 | PY_MINOR_VERSION;
    for (size_t i = 0; i < sizeof vt_pylayouts / sizeof vt_pylayouts[0]; i++)
        if (vt_pylayouts[i].version == version)
            row = &vt_pylayouts[i];
    if (!row) {
        printf("no row for CPython %d.%d\n", PY_MAJOR_VERSION, PY_MINOR_VERSION);
        return 1;
    }
#if PY_VERSION_HEX >= 0x030d0000
    SAME(ts_frame, offsetof(PyThreadState, current_frame));
    SAME(cframe_current, -1);
    SAME(f_code, offsetof(_PyInterpreterFrame, f_executable));
    SAME(f_instr, offsetof(_PyInterpreterFrame, instr_ptr));
    SAME(f_local0, offsetof(_PyInterpreterFrame, localsplus));
#elif PY_VERSION_HEX >= 0x030b0000
    SAME(ts_frame, offsetof(PyThreadState, cframe));
    SAME(cframe_current, offsetof(_PyCFrame, current_frame));
    SAME(f_code, offsetof(_PyInterpreterFrame, f_code));
    SAME(f_instr, offsetof(_PyInterpreterFrame, prev_instr));
    SAME(f_local0, offsetof(_PyInterpreterFrame, localsplus));
#else
    SAME(ts_frame, offsetof(PyThreadState, frame));
    SAME(cframe_current, -1);
    SAME(f_back, offsetof(PyFrameObject, f_back));
    SAME(f_code, offsetof(PyFrameObject, f_code));
    SAME(f_instr, offsetof(PyFrameObject, f_lasti));
    SAME(f_local0, offsetof(PyFrameObject, f_localsplus));
    same("sizeof f_lasti", 4, sizeof(((PyFrameObject *)0)->f_lasti));
    /* f_lasti counts bytes in 3.9 and code units in 3.10 (PyFrame_GetLineNumber). */
    SAME(lasti_scale, PY_VERSION_HEX >= 0x030a0000 ? sizeof(_Py_CODEUNIT) : 1);
#endif
#if PY_VERSION_HEX >= 0x030b0000
    SAME(interp_frames, 1);
    SAME(f_back, offsetof(_PyInterpreterFrame, previous));
    SAME(f_owner, offsetof(_PyInterpreterFrame, owner));
    same("sizeof owner", 1, sizeof(((_PyInterpreterFrame *)0)->owner));
    SAME(gen_owner, FRAME_OWNED_BY_GENERATOR);
    SAME(co_name, offsetof(PyCodeObject, co_qualname));
    SAME(co_firsttraceable, offsetof(PyCodeObject, _co_firsttraceable));
    SAME(co_code, offsetof(PyCodeObject, co_code_adaptive));
    same("sizeof _Py_CODEUNIT", 2, sizeof(_Py_CODEUNIT));
#if PY_VERSION_HEX >= 0x030e0000
    SAME(cstack_owner, FRAME_OWNED_BY_INTERPRETER);
#elif PY_VERSION_HEX >= 0x030c0000
    SAME(cstack_owner, FRAME_OWNED_BY_CSTACK);
#else
    SAME(cstack_owner, 0);
#endif
#else
    SAME(interp_frames, 0);
    SAME(gen_owner, 0);
    SAME(cstack_owner, 0);
    SAME(co_name, offsetof(PyCodeObject, co_name));
#endif
    SAME(co_filename, offsetof(PyCodeObject, co_filename));
    SAME(str_ascii, sizeof(PyASCIIObject));
    SAME(str_compact, sizeof(PyCompactUnicodeObject));
    same("VT_PY_OB_TYPE", VT_PY_OB_TYPE, offsetof(PyObject, ob_type));
    same("VT_PY_STR_LENGTH", VT_PY_STR_LENGTH, offsetof(PyASCIIObject, length));
    same("VT_PY_STR_STATE", VT_PY_STR_STATE, offsetof(PyASCIIObject, state));
    same("VT_PY_TP_NAME", VT_PY_TP_NAME, offsetof(PyTypeObject, tp_name));
    same("VT_PY_TP_DEALLOC", VT_PY_TP_DEALLOC, offsetof(PyTypeObject, tp_dealloc));
    same("VT_PY_TP_FLAGS", VT_PY_TP_FLAGS, offsetof(PyTypeObject, tp_flags));
    same("VT_PY_HEAPTYPE", (long)VT_PY_HEAPTYPE, Py_TPFLAGS_HEAPTYPE);
    same("str kind bits", 7u << 2, state_with(7, 0, 0));
    same("str compact bit", 1u << 5, state_with(0, 1, 0));
    same("str ascii bit", 1u << 6, state_with(0, 0, 1));
    if (!differences)
        printf("CPython %d.%d: the table's row matches the headers\n", PY_MAJOR_VERSION,
               PY_MINOR_VERSION);
    return differences != 0;
}
