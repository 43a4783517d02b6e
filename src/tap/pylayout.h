/* Where CPython 3.9 to 3.15 keep what the frame reader (pyframes.c) follows: byte offsets for
 * 64-bit Linux builds of the default kind (a GIL, no Py_TRACE_REFS). The interpreter is never
 * compiled against: tests/python_stacks/layout_check.c checks every figure against each
 * version's own headers where that version is installed, and pyframes.c checks the running
 * interpreter against sys._getframe() before it trusts the row. The 3.14 and 3.15 rows were
 * taken from those versions' headers and the offsets their interpreters publish for debuggers
 * (_Py_DebugOffsets): no machine the tests have run on so far has either version, so the
 * start-up check is what stands behind them. */
#ifndef VT_PYLAYOUT_H
#define VT_PYLAYOUT_H

#include <stdint.h>

typedef struct {
    uint16_t version;      /* 0x030b for 3.11 */
    uint8_t interp_frames; /* 3.11+: _PyInterpreterFrame; before: PyFrameObject */
    uint8_t lasti_scale;   /* PyFrameObject.f_lasti counts bytes (3.9) or code units (3.10) */
    /* the least owner value of frames that are no Python frame (3.12+): shims (3.12, 3.13); the
     * interpreter's entry frames and C-stack frames (3.14); entry frames and the thread state's
     * base frame (3.15) */
    uint8_t cstack_owner;
    uint8_t gen_owner; /* FRAME_OWNED_BY_GENERATOR (3.11+) */
    /* PyThreadState: frame (3.9, 3.10), cframe (3.11, 3.12), current_frame (3.13+). */
    uint16_t ts_frame;
    int16_t cframe_current; /* _PyCFrame.current_frame, or -1 when ts_frame is the frame */
    uint16_t f_back;        /* f_back, or previous */
    uint16_t f_code;        /* f_code, or f_executable (3.13+; a tagged reference from 3.14) */
    uint16_t f_instr;       /* int f_lasti, or prev_instr (3.11, 3.12), or instr_ptr (3.13+) */
    uint16_t f_owner;       /* char owner (3.11+) */
    uint16_t co_filename, co_name;   /* co_name is co_qualname from 3.11, as tracebacks show */
    uint16_t co_firsttraceable;      /* int _co_firsttraceable (3.11+) */
    uint16_t co_code;                /* co_code_adaptive: the first code unit (3.11+) */
    uint16_t str_ascii, str_compact; /* sizeof PyASCIIObject, PyCompactUnicodeObject */
    uint16_t f_local0;               /* the first local: f_localsplus, or localsplus (3.11+) */
} vt_pylayout;

/* Fixed in every row: ob_type at 8, PyASCIIObject.length at 16 and its state bits at 32
 * (kind: bits 2-4, compact: bit 5, ascii: bit 6), PyTypeObject.tp_name at 24, tp_dealloc at 48
 * and tp_flags at 168. */
#define VT_PY_OB_TYPE 8
#define VT_PY_STR_LENGTH 16
#define VT_PY_STR_STATE 32
#define VT_PY_TP_NAME 24
#define VT_PY_TP_DEALLOC 48
#define VT_PY_TP_FLAGS 168
#define VT_PY_HEAPTYPE (1ul << 9)

/* clang-format off */
static const vt_pylayout vt_pylayouts[] = {
/*   version interp scale cstack gen  ts  cframe back code instr owner file name first code  str      local0 */
    {0x0309, 0,     1,    0,     0,   24, -1,    24,  32,  104,  0,    104, 112, 0,    0,   48, 72,  360},
    {0x030a, 0,     2,    0,     0,   24, -1,    24,  32,  96,   0,    104, 112, 0,    0,   48, 72,  352},
    {0x030b, 1,     0,    0,     1,   56, 8,     48,  32,  56,   69,   112, 128, 168,  184, 48, 72,  72},
    {0x030c, 1,     0,    3,     1,   56, 0,     8,   0,   56,   70,   112, 128, 176,  192, 40, 56,  72},
    {0x030d, 1,     0,    3,     1,   72, -1,    8,   0,   56,   70,   112, 128, 184,  200, 40, 56,  72},
    {0x030e, 1,     0,    3,     1,   72, -1,    8,   0,   56,   74,   112, 128, 192,  208, 40, 56,  80},
    {0x030f, 1,     0,    3,     1,   72, -1,    8,   0,   56,   74,   112, 128, 192,  208, 40, 56,  80},
};
/* clang-format on */

#endif
