/* Python frames at allocation time, read without the GIL.
 *
 * The allocation hook runs on threads that usually do not hold the GIL (PyTorch, ctypes and the
 * autograd threads release it), and taking it there can deadlock, so the hook never calls into
 * Python. Each thread that runs Python keeps a shadow stack instead: the interned location and
 * current line of every frame, kept current by the interpreter's own callbacks while they hold
 * the GIL, and read by the hook from thread-local memory. The callbacks are sys.monitoring with a
 * tool id of vramtap's own on 3.12+ (it coexists with cProfile and torch.profiler), else a C
 * profile function.
 *
 * libpython is never linked: every CPython symbol is looked up when the interpreter asks for
 * frames (vramtap_python_install), so nothing here runs in a process without Python. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "locks.h"
#include "pyapi.h"
#include "pyframes.h"
#include "pystack.h"
#include "resolve.h"
#include "snapshot_keys.h"
#include "vramtap.h"

static int locs_oom;
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(obj) (locs_oom = 1)
#include <uthash.h>

static const struct {
    size_t at;
    const char *name, *old_name; /* old_name: the spelling before 3.12 */
    int optional;
} py_syms[] = {
#define SYM(field, name, old, opt)                                                                 \
    {                                                                                              \
        offsetof(py_api, field), name, old, opt                                                    \
    }
    SYM(GetVersion, "Py_GetVersion", NULL, 0),
    SYM(GILState_Check, "PyGILState_Check", NULL, 0),
    SYM(GILState_GetThisThreadState, "PyGILState_GetThisThreadState", NULL, 0),
    SYM(ThreadState_Get, "PyThreadState_Get", NULL, 0),
    SYM(ThreadState_GetInterpreter, "PyThreadState_GetInterpreter", NULL, 0),
    SYM(ThreadState_New, "PyThreadState_New", NULL, 0),
    SYM(ThreadState_Clear, "PyThreadState_Clear", NULL, 0),
    SYM(ThreadState_Delete, "PyThreadState_Delete", NULL, 0),
    SYM(SetProfileOn, "_PyEval_SetProfile", NULL, 1),
    SYM(SetProfile, "PyEval_SetProfile", NULL, 0),
    SYM(InterpreterState_ThreadHead, "PyInterpreterState_ThreadHead", NULL, 0),
    SYM(ThreadState_Next, "PyThreadState_Next", NULL, 0),
    SYM(IsFinalizing, "Py_IsFinalizing", "_Py_IsFinalizing", 1),
    SYM(AtExit, "Py_AtExit", NULL, 1),
    SYM(GetFrame, "PyEval_GetFrame", NULL, 0),
    SYM(FrameGetBack, "PyFrame_GetBack", NULL, 0),
    SYM(FrameGetCode, "PyFrame_GetCode", NULL, 0),
    SYM(FrameGetLineNumber, "PyFrame_GetLineNumber", NULL, 0),
    SYM(CodeAddr2Line, "PyCode_Addr2Line", NULL, 0),
    SYM(RequestCodeExtraIndex, "PyUnstable_Eval_RequestCodeExtraIndex",
        "_PyEval_RequestCodeExtraIndex", 0),
    SYM(CodeGetExtra, "PyUnstable_Code_GetExtra", "_PyCode_GetExtra", 0),
    SYM(CodeSetExtra, "PyUnstable_Code_SetExtra", "_PyCode_SetExtra", 0),
    SYM(GetAttrString, "PyObject_GetAttrString", NULL, 0),
    SYM(UnicodeAsUTF8, "PyUnicode_AsUTF8", NULL, 0),
    SYM(LongAsLong, "PyLong_AsLong", NULL, 0),
    SYM(IncRef, "Py_IncRef", NULL, 0),
    SYM(DecRef, "Py_DecRef", NULL, 0),
    SYM(ErrFetch, "PyErr_Fetch", NULL, 0),
    SYM(ErrRestore, "PyErr_Restore", NULL, 0),
    SYM(ErrClear, "PyErr_Clear", NULL, 0),
    SYM(CFunctionNewEx, "PyCFunction_NewEx", NULL, 0),
    SYM(RunStringFlags, "PyRun_StringFlags", NULL, 0),
    SYM(DictNew, "PyDict_New", NULL, 0),
    SYM(DictSetItemString, "PyDict_SetItemString", NULL, 0),
    SYM(DictGetItemString, "PyDict_GetItemString", NULL, 0),
    SYM(GetBuiltins, "PyEval_GetBuiltins", NULL, 0),
    SYM(LongFromLong, "PyLong_FromLong", NULL, 0),
    SYM(BytesAsString, "PyBytes_AsString", NULL, 0),
    SYM(SaveThread, "PyEval_SaveThread", NULL, 0),
    SYM(RestoreThread, "PyEval_RestoreThread", NULL, 0),
    SYM(none, "_Py_NoneStruct", NULL, 0),
    SYM(FunctionType, "PyFunction_Type", NULL, 0),
    SYM(MethodType, "PyMethod_Type", NULL, 0),
    SYM(CodeType, "PyCode_Type", NULL, 0),
    SYM(UnicodeType, "PyUnicode_Type", NULL, 0),
#undef SYM
};

static py_api py;
static int py_version; /* 0x030b for 3.11 */

/* Frames stored per thread; deeper recursion is counted, not stored. */
#define PY_CAP 256
#define NO_LOC UINT32_MAX
#define LINE_CACHE 4

typedef struct {
    uint32_t loc;
    uint32_t line : 31;
    /* sys.monitoring: the frame is still at `line`, in a call to a Python function. Otherwise a
     * callee may have started without a CALL event in this frame (an operator, a property, a
     * `for` over a generator, `with`, f(*args) on 3.12, a callback from a C function) after the
     * frame moved on, and its line is read from the live frames. */
    uint32_t fresh : 1;
    /* The frame object (profile function) or code object (sys.monitoring) the entry stands for:
     * compared with what the next callback names, never followed. */
    const void *tag;
} py_entry;

typedef struct {
    uint32_t depth; /* Python frames on this thread, stored or not */
    unsigned gen;   /* the generation the stack was built under */
    void *tstate;   /* this thread's PyThreadState, for the profile function check */
    py_entry e[PY_CAP];
} py_thread;

/* What vramtap learns about a code object, kept in the code object's extra slot and freed with
 * it: the interned location, and the lines of its last CALL offsets (sys.monitoring gives
 * offsets; turning one into a line walks the line table). */
typedef struct {
    uint32_t loc, first;
    uint32_t off[LINE_CACHE], line[LINE_CACHE]; /* offset + 1, 0 when empty */
} py_code;

static py_code no_code = {.loc = NO_LOC};

static VT_TLS py_thread *self;
static pthread_key_t self_key;

static atomic_int mech;
/* Bumped whenever every shadow stack may have missed events: a (re)install, or another tool
 * touching vramtap's sys.monitoring id. A stack built under an older generation is never
 * reported; its thread rebuilds it from the live frames at its next callback. */
static atomic_uint generation = 1;
static atomic_int py_gone; /* the interpreter is finalizing: thread states may be freed */
static int tag_frames;     /* entries are tagged by frame (profile function), not code */
static size_t profile_off; /* offset of c_profilefunc in PyThreadState, learned at install */
static py_ssize_t extra_index = -1;
static py_object *fn_enter, *fn_leave, *fn_call, *fn_thread;
static py_object *tool_obj, *watch[5];

/* Interned code locations: (file, function), copied while the callback holds the GIL because a
 * code object may be gone by exit. */
typedef struct {
    UT_hash_handle hh;
    uint32_t id;
    const char *function;
    char file[]; /* then the function: both NUL-terminated, together the key */
} py_loc;

static py_loc *locs, **loc_by_id;
static uint64_t locs_dropped;
static uint32_t nlocs;
static size_t caplocs;

static uint32_t intern_loc(const char *file, const char *function)
{
    size_t lf = strlen(file) + 1, ln = strlen(function) + 1;
    py_loc *l = malloc(sizeof *l + lf + ln);
    if (!l)
        return NO_LOC;
    memcpy(l->file, file, lf);
    memcpy(l->file + lf, function, ln);
    l->function = l->file + lf;
    uint32_t id = NO_LOC;
    vt_lock_take(VT_LOCK_PYLOCS);
    py_loc *old;
    HASH_FIND(hh, locs, l->file, lf + ln, old);
    if (old) {
        id = old->id;
    } else if (nlocs < VT_PYSTACK_MAX_LOCS) {
        if (!vt_grow(&loc_by_id, &caplocs, (size_t)nlocs + 1, sizeof *loc_by_id, 256)) {
            locs_oom = 0;
            l->id = nlocs;
            HASH_ADD_KEYPTR(hh, locs, l->file, lf + ln, l);
            if (!locs_oom) {
                loc_by_id[nlocs++] = l;
                id = l->id;
                l = NULL;
            }
        }
    }
    locs_dropped += id == NO_LOC;
    vt_lock_give(VT_LOCK_PYLOCS);
    free(l);
    return id;
}

uint32_t vt_pystack_intern(const char *file, const char *function)
{
    return intern_loc(file, function);
}

static const py_loc *loc_of(uint32_t id)
{
    vt_lock_take(VT_LOCK_PYLOCS);
    const py_loc *l = id < nlocs ? loc_by_id[id] : NULL;
    vt_lock_give(VT_LOCK_PYLOCS);
    return l;
}

uint64_t vt_pystack_dropped(void)
{
    vt_lock_take(VT_LOCK_PYLOCS);
    uint64_t n = locs_dropped;
    vt_lock_give(VT_LOCK_PYLOCS);
    return n;
}

const char *vt_pystack_file(uint32_t code_id)
{
    const py_loc *l = loc_of(code_id);
    return l ? l->file : NULL;
}

const char *vt_pystack_function(uint32_t code_id)
{
    const py_loc *l = loc_of(code_id);
    return l ? l->function : NULL;
}

/* ---- what the callbacks do, always with the GIL held ---- */

static void code_gone(void *p)
{
    free(p);
}

/* Slow path, once per code object. Errors raised here are dropped and whatever exception the
 * interpreter was propagating is put back. */
static py_code *code_new(py_object *code)
{
    py_object *et, *ev, *tb;
    py.ErrFetch(&et, &ev, &tb);
    py_object *file = py.GetAttrString(code, "co_filename");
    py_object *name = py.GetAttrString(code, py_version >= 0x030b ? "co_qualname" : "co_name");
    py_object *first = py.GetAttrString(code, "co_firstlineno");
    const char *fs = file ? py.UnicodeAsUTF8(file) : NULL;
    const char *ns = name ? py.UnicodeAsUTF8(name) : NULL;
    long fl = first ? py.LongAsLong(first) : 0;
    py_code *pc = calloc(1, sizeof *pc);
    if (pc) {
        pc->loc = intern_loc(fs ? fs : "?", ns ? ns : "?");
        pc->first = fl > 0 && fl <= (long)UINT32_MAX ? (uint32_t)fl : 0;
        if (py.CodeSetExtra(code, extra_index, pc) < 0) {
            free(pc);
            pc = NULL;
        }
    }
    py.DecRef(file);
    py.DecRef(name);
    py.DecRef(first);
    py.ErrRestore(et, ev, tb);
    return pc ? pc : &no_code;
}

static py_code *code_info(py_object *code)
{
    void *pc = NULL;
    if (py.CodeGetExtra(code, extra_index, &pc) < 0) {
        py.ErrClear();
        return &no_code;
    }
    return pc ? pc : code_new(code);
}

static uint32_t frame_line(py_object *frame)
{
    int line = py.FrameGetLineNumber(frame);
    return line > 0 ? (uint32_t)line : 0;
}

static uint32_t code_line(py_object *code, long offset)
{
    py_code *pc = code_info(code);
    unsigned slot = (unsigned)(offset >> 1) & (LINE_CACHE - 1);
    if (pc->off[slot] == (uint32_t)offset + 1)
        return pc->line[slot];
    int line = py.CodeAddr2Line(code, (int)offset);
    uint32_t l = line > 0 ? (uint32_t)line : 0;
    if (pc != &no_code) {
        pc->off[slot] = (uint32_t)offset + 1;
        pc->line[slot] = l;
    }
    return l;
}

static void thread_gone(void *p)
{
    self = NULL;
    free(p);
}

void *vt_pystack_thread_data(pthread_key_t key, size_t size)
{
    void *p = calloc(1, size);
    if (p && pthread_setspecific(key, p)) {
        free(p);
        p = NULL;
    }
    return p;
}

static py_thread *thread_self(void)
{
    py_thread *t = self;
    /* generation 0: rebuilt at its first use */
    return t ? t : (self = vt_pystack_thread_data(self_key, sizeof *t));
}

static int stale(const py_thread *t)
{
    return t->gen != atomic_load_explicit(&generation, memory_order_relaxed);
}

static py_entry *top(py_thread *t)
{
    return t->depth && t->depth <= PY_CAP ? &t->e[t->depth - 1] : NULL;
}

static void fill(py_entry *e, py_object *frame, int fresh)
{
    py_object *code = py.FrameGetCode(frame);
    py_code *pc = code ? code_info(code) : &no_code;
    e->loc = pc->loc;
    e->line = frame_line(frame);
    e->fresh = (uint32_t)fresh;
    e->tag = tag_frames ? (const void *)frame : (const void *)code;
    py.DecRef(code);
}

/* The shadow stack from the live frames: on a thread's first callback, after a generation
 * change, and whenever a callback finds the stack out of step with the interpreter. */
static void rebuild(py_thread *t)
{
    py_object *et, *ev, *tb; /* making frame objects can fail; the callback must not */
    py.ErrFetch(&et, &ev, &tb);
    t->gen = atomic_load_explicit(&generation, memory_order_relaxed);
    t->tstate = py.GILState_GetThisThreadState();
    uint32_t n = 0;
    py_object *f = py.GetFrame(), *back;
    for (py.IncRef(f); f; f = back) {
        n++;
        back = py.FrameGetBack(f);
        py.DecRef(f);
    }
    t->depth = n;
    f = py.GetFrame();
    for (py.IncRef(f); f; f = back) {
        if (n && --n < PY_CAP)
            fill(&t->e[n], f, n + 1 < t->depth);
        back = py.FrameGetBack(f);
        py.DecRef(f);
    }
    py.ErrRestore(et, ev, tb);
}

static void push(py_thread *t, const void *tag, py_object *code)
{
    if (t->depth < PY_CAP) {
        py_code *pc = code_info(code);
        t->e[t->depth] = (py_entry){.loc = pc->loc, .line = pc->first, .tag = tag};
    }
    t->depth++;
}

/* sys.monitoring started `code` without a CALL event in the frame below (entry `e`): read that
 * frame's line from the live frames. Returns 0 when they disagree with the shadow stack. */
static int caller_line(py_entry *e, py_object *code)
{
    py_object *et, *ev, *tb;
    py.ErrFetch(&et, &ev, &tb);
    py_object *f = py.GetFrame();
    int found = 0;
    py.IncRef(f);
    for (int i = 0; f && i < 2 && !found; i++) {
        py_object *fcode = py.FrameGetCode(f);
        py.DecRef(fcode);
        if (fcode == e->tag && (i || fcode != code)) {
            e->line = frame_line(f);
            e->fresh = 1;
            found = 1;
        } else if (fcode != code) {
            break;
        } else {
            py_object *back = py.FrameGetBack(f);
            py.DecRef(f);
            f = back;
        }
    }
    py.DecRef(f);
    py.ErrRestore(et, ev, tb);
    return found;
}

/* The frame `tag` starts or resumes, and the shadow stack below it is not to be trusted: rebuilt
 * at the frame's first event, the stack already holds the frame. */
static void rebuild_with(py_thread *t, const void *tag, py_object *code)
{
    rebuild(t);
    py_entry *e = top(t);
    if (t->depth <= PY_CAP && !(e && e->tag == tag))
        push(t, tag, code);
}

static void enter(py_thread *t, const void *tag, py_object *code)
{
    py_entry *e = stale(t) ? NULL : top(t);
    if (stale(t) || (e && !e->fresh && !caller_line(e, code)))
        rebuild_with(t, tag, code);
    else
        push(t, tag, code);
}

/* The frame `tag` returns, yields or unwinds. */
static void leave(py_thread *t, const void *tag)
{
    py_entry *e = NULL;
    if (!stale(t)) {
        if (t->depth > PY_CAP) {
            t->depth--;
            return;
        }
        e = top(t);
    }
    if (!e || e->tag != tag) {
        rebuild(t);
        e = top(t);
    }
    if (t->depth > PY_CAP || (e && e->tag == tag))
        t->depth--;
    /* Back in the caller, which may move on without a CALL event before its next callee. */
    if ((e = top(t)))
        e->fresh = 0;
}

/* The entry of the running frame `tag`, whose line the caller updates; NULL beyond the cap or
 * when the live frames do not show `tag` on top. */
static py_entry *running(py_thread *t, const void *tag)
{
    py_entry *e = NULL;
    if (!stale(t)) {
        if (t->depth > PY_CAP)
            return NULL;
        e = top(t);
    }
    if (!e || e->tag != tag) {
        rebuild(t);
        e = top(t);
    }
    return e && e->tag == tag ? e : NULL;
}

static int on_profile(py_object *obj, py_object *frame, int what, py_object *arg)
{
    (void)obj;
    (void)arg;
    if (what != PY_TRACE_CALL && what != PY_TRACE_RETURN && what != PY_TRACE_C_CALL)
        return 0;
    py_thread *t = thread_self();
    if (!t)
        return 0;
    if (what == PY_TRACE_RETURN) {
        leave(t, frame);
    } else if (what == PY_TRACE_C_CALL) {
        py_entry *e = running(t, frame);
        if (e)
            e->line = frame_line(frame);
    } else {
        /* A profile function gets no event for a Python-to-Python call in the caller, so the
         * caller's line is read here, from the frame below the new one. */
        int in_step = 0;
        if (!stale(t)) {
            py_object *back = py.FrameGetBack(frame);
            py_entry *e = top(t);
            in_step = t->depth > PY_CAP || (e ? e->tag == back : !back);
            if (in_step && e)
                e->line = frame_line(back);
            py.DecRef(back);
        }
        py_object *code = py.FrameGetCode(frame);
        if (in_step)
            push(t, frame, code);
        else
            rebuild_with(t, frame, code);
        py.DecRef(code);
    }
    return 0;
}

static py_object *none(void)
{
    py.IncRef(py.none);
    return py.none;
}

static py_object *on_enter(py_object *mod, py_object *const *args, py_ssize_t nargs)
{
    (void)mod;
    py_thread *t = nargs >= 1 ? thread_self() : NULL;
    if (t)
        enter(t, args[0], args[0]);
    return none();
}

static py_object *on_leave(py_object *mod, py_object *const *args, py_ssize_t nargs)
{
    (void)mod;
    py_thread *t = nargs >= 1 ? thread_self() : NULL;
    if (t)
        leave(t, args[0]);
    return none();
}

/* Only a call that names vramtap's tool id can take its sys.monitoring events away. */
static int touches_tool(py_object *callable, py_object *arg0)
{
    if (!tool_obj || arg0 != tool_obj)
        return 0;
    for (size_t i = 0; i < sizeof watch / sizeof watch[0]; i++)
        if (watch[i] && watch[i] == callable)
            return 1;
    return 0;
}

/* Whether the callee's PY_START will come straight from this call, with no chance for the caller
 * to move on first: Py_TYPE(callable) is a Python function or bound method. */
static int calls_python(py_object *callable)
{
    void *type;
    memcpy(&type, (char *)callable + sizeof(py_ssize_t), sizeof type);
    return type == py.FunctionType || type == py.MethodType;
}

/* CALL (code, offset, callable, arg0): fires before every call, Python or C, so the calling
 * frame's line is the line of the call that may allocate. */
static py_object *on_call(py_object *mod, py_object *const *args, py_ssize_t nargs)
{
    (void)mod;
    if (nargs >= 4 && touches_tool(args[2], args[3])) {
        atomic_fetch_add_explicit(&generation, 1, memory_order_relaxed);
        return none();
    }
    py_thread *t = nargs >= 2 ? thread_self() : NULL;
    py_entry *e = t ? running(t, args[0]) : NULL;
    if (e) {
        long offset = py.LongAsLong(args[1]);
        if (offset >= 0)
            e->line = code_line(args[0], offset);
        else
            py.ErrClear();
        e->fresh = calls_python(args[2]);
    }
    return none();
}

/* threading calls it as the profile function of each thread it starts (nothing else reaches
 * threads started after install); it hands the thread over to the C profile function. */
static py_object *on_thread(py_object *mod, py_object *const *args, py_ssize_t nargs)
{
    (void)mod;
    (void)args;
    (void)nargs;
    py.SetProfile(on_profile, NULL);
    return none();
}

static py_method_def def_enter = {"vramtap_enter", on_enter, PY_METH_FASTCALL, NULL};
static py_method_def def_leave = {"vramtap_leave", on_leave, PY_METH_FASTCALL, NULL};
static py_method_def def_call = {"vramtap_call", on_call, PY_METH_FASTCALL, NULL};
static py_method_def def_thread = {"vramtap_thread", on_thread, PY_METH_FASTCALL, NULL};

/* ---- read by the allocation hook, without the GIL ---- */

static void on_py_exit(void)
{
    atomic_store(&py_gone, 1);
}

/* The profile function is per thread state and anyone may replace it without vramtap hearing
 * of it; then the shadow stack stops following the frames and must not be reported. The
 * thread state is this thread's own (the GIL state key) and alive while it is registered. */
static int python_gone(void)
{
    if (atomic_load_explicit(&py_gone, memory_order_relaxed))
        return 1;
    if (py.IsFinalizing && py.IsFinalizing()) {
        atomic_store(&py_gone, 1);
        return 1;
    }
    return 0;
}

static int profile_current(const py_thread *t)
{
    if (python_gone())
        return 0;
    void *ts = py.GILState_GetThisThreadState();
    if (!ts || ts != t->tstate)
        return 0;
    py_tracefunc f = __atomic_load_n((py_tracefunc *)((char *)ts + profile_off), __ATOMIC_RELAXED);
    return f == on_profile;
}

int vt_pystack_capture(uint64_t *out, int max)
{
    const py_thread *t = self;
    int m = atomic_load_explicit(&mech, memory_order_acquire);
    if (m == VT_PY_FRAMES)
        return python_gone() ? 0 : vt_pyframes_capture(out, max);
    if (!t || !m || max <= 0 || stale(t) || (m == VT_PY_PROFILE && !profile_current(t)))
        return 0;
    uint32_t stored = t->depth < PY_CAP ? t->depth : PY_CAP;
    uint32_t n = stored < (uint32_t)max ? stored : (uint32_t)max;
    for (uint32_t i = 0; i < n; i++) {
        const py_entry *e = &t->e[stored - 1 - i];
        out[i] = (uint64_t)e->loc << 32 | e->line;
    }
    return (int)n;
}

/* ---- installation, with the GIL held ---- */

static const char monitoring_src[] =
    "import sys\n"
    "tool, err = -1, None\n"
    "try:\n"
    "    m = sys.monitoring\n"
    "    for i in (4, 3, 5):\n"
    "        if m.get_tool(i) is None:\n"
    "            m.use_tool_id(i, 'vramtap')\n"
    "            tool = i\n"
    "            break\n"
    "    if tool >= 0:\n"
    "        E = m.events\n"
    "        for ev, fn in ((E.PY_START, enter), (E.PY_RESUME, enter), (E.PY_THROW, enter),\n"
    "                       (E.PY_RETURN, leave), (E.PY_YIELD, leave), (E.PY_UNWIND, leave),\n"
    "                       (E.CALL, call)):\n"
    "            m.register_callback(tool, ev, fn)\n"
    "        w0, w1, w2, w3 = m.set_events, m.set_local_events, m.register_callback, "
    "m.free_tool_id\n"
    "        w4 = getattr(m, 'clear_tool_id', None)\n"
    "        m.set_events(tool, E.PY_START | E.PY_RESUME | E.PY_THROW | E.PY_RETURN\n"
    "                     | E.PY_YIELD | E.PY_UNWIND | E.CALL)\n"
    "except Exception as e:\n"
    "    err = 'sys.monitoring: %s: %s' % (type(e).__name__, e)\n"
    "    if tool >= 0:\n"
    "        try:\n"
    "            m.set_events(tool, 0)\n"
    "            m.free_tool_id(tool)\n"
    "        except Exception:\n"
    "            pass\n"
    "        tool = -1\n";

static const char threads_src[] =
    "err = None\n"
    "try:\n"
    "    import threading\n"
    "    if getattr(threading, '_profile_hook', None) is None:\n"
    "        threading.setprofile(thread)\n"
    "    else:\n"
    "        err = 'threading.setprofile is taken: threads started later have no Python frames'\n"
    "except Exception as e:\n"
    "    err = 'threading.setprofile: %s: %s' % (type(e).__name__, e)\n";

static const char probe_src[] = "import sys\n"
                                "gil = getattr(sys, '_is_gil_enabled', lambda: True)()\n";

py_object *vt_pystack_run(const char *src, const char *const *names, py_object *const *values,
                          int n)
{
    py_object *g = py.DictNew();
    if (!g)
        return NULL;
    int bad = py.DictSetItemString(g, "__builtins__", py.GetBuiltins());
    for (int i = 0; i < n && !bad; i++)
        bad = py.DictSetItemString(g, names[i], values[i]);
    if (bad) {
        py.ErrClear();
        py.DecRef(g);
        return NULL;
    }
    py_object *r = py.RunStringFlags(src, PY_FILE_INPUT, g, g, NULL);
    if (!r) {
        py.ErrClear();
        py.DecRef(g);
        return NULL;
    }
    py.DecRef(r);
    return g;
}

/* Runs one of the scripts above in fresh globals that name vramtap's callbacks. */
static py_object *run_script(const char *src)
{
    static const char *const names[] = {"enter", "leave", "call", "thread"};
    py_object *values[] = {fn_enter, fn_leave, fn_call, fn_thread};
    return vt_pystack_run(src, names, values, 4);
}

static long global_long(py_object *g, const char *name)
{
    py_object *v = py.DictGetItemString(g, name);
    long x = v && v != py.none ? py.LongAsLong(v) : -1;
    if (x == -1)
        py.ErrClear();
    return x;
}

static void say_error(py_object *g)
{
    py_object *err = py.DictGetItemString(g, "err");
    const char *s = err && err != py.none ? py.UnicodeAsUTF8(err) : NULL;
    if (s)
        vt_log("Python frames: %s", s);
    else if (err && err != py.none)
        py.ErrClear();
}

static int resolve(void)
{
    for (size_t i = 0; i < sizeof py_syms / sizeof py_syms[0]; i++) {
        void *p = vt_real_dlsym(RTLD_DEFAULT, py_syms[i].name);
        if (!p && py_syms[i].old_name)
            p = vt_real_dlsym(RTLD_DEFAULT, py_syms[i].old_name);
        if (!p && !py_syms[i].optional)
            return 0;
        memcpy((char *)&py + py_syms[i].at, &p, sizeof p);
    }
    int major = 0, minor = 0;
    if (sscanf(py.GetVersion(), "%d.%d", &major, &minor) != 2)
        return 0;
    py_version = major << 8 | minor;
    return py_version >= 0x0309;
}

const py_api *vt_pystack_api(void)
{
    static int resolved; /* 0: not yet, 1: found, -1: no CPython 3.9 or later */
    if (!resolved)
        resolved = resolve() ? 1 : -1;
    return resolved > 0 ? &py : NULL;
}

/* What stays for the life of the process, made at the first install. */
static const char *prepare(void)
{
    fn_enter = py.CFunctionNewEx(&def_enter, NULL, NULL);
    fn_leave = py.CFunctionNewEx(&def_leave, NULL, NULL);
    fn_call = py.CFunctionNewEx(&def_call, NULL, NULL);
    fn_thread = py.CFunctionNewEx(&def_thread, NULL, NULL);
    if (!fn_enter || !fn_leave || !fn_call || !fn_thread) {
        py.ErrClear();
        return "could not make the callbacks";
    }
    py_object *g = run_script(probe_src);
    long gil = g ? global_long(g, "gil") : 0;
    py.DecRef(g);
    if (gil != 1)
        return "this interpreter runs without a GIL, which the callbacks rely on";
    if (pthread_key_create(&self_key, thread_gone))
        return "no thread key left";
    extra_index = py.RequestCodeExtraIndex(code_gone);
    if (extra_index < 0) {
        py.ErrClear();
        return "no code object extra slot left";
    }
    if (py.AtExit)
        py.AtExit(on_py_exit);
    return NULL;
}

static int install_monitoring(void)
{
    tag_frames = 0;
    py_object *g = run_script(monitoring_src);
    if (!g)
        return 0;
    long tool = global_long(g, "tool");
    if (tool >= 0) {
        tool_obj = py.DictGetItemString(g, "tool");
        py.IncRef(tool_obj);
        static const char *const names[] = {"w0", "w1", "w2", "w3", "w4"};
        for (size_t i = 0; i < sizeof watch / sizeof watch[0]; i++) {
            watch[i] = py.DictGetItemString(g, names[i]);
            py.IncRef(watch[i]);
        }
    } else {
        say_error(g);
    }
    py.DecRef(g);
    return tool >= 0;
}

/* Where c_profilefunc lives in PyThreadState, found on a scratch thread state rather than
 * assumed per version: the one word that follows _PyEval_SetProfile there. */
static int find_profile_slot(void)
{
    if (!py.SetProfileOn)
        return 0;
    void *ts = py.ThreadState_New(py.ThreadState_GetInterpreter(py.ThreadState_Get()));
    if (!ts)
        return 0;
    enum { WORDS = 20 }; /* PyThreadState is over 250 bytes in 3.9 to 3.13 */
    int found = -1;
    if (py.SetProfileOn(ts, on_profile, NULL) == 0) {
        for (int i = 0; i < WORDS; i++) {
            py_tracefunc f;
            memcpy(&f, (char *)ts + (size_t)i * sizeof f, sizeof f);
            if (f == on_profile)
                found = found == -1 ? i : -2;
        }
        if (py.SetProfileOn(ts, NULL, NULL) == 0 && found >= 0) {
            py_tracefunc f;
            memcpy(&f, (char *)ts + (size_t)found * sizeof f, sizeof f);
            if (f)
                found = -1;
        }
    }
    py.ErrClear();
    py.ThreadState_Clear(ts);
    py.ThreadState_Delete(ts);
    if (found < 0)
        return 0;
    profile_off = (size_t)found * sizeof(py_tracefunc);
    return 1;
}

static py_tracefunc profile_of(void *ts)
{
    return *(py_tracefunc *)((char *)ts + profile_off);
}

/* Threads that have no profile function get vramtap's; those of another profiler keep theirs. */
static void arm_threads(void)
{
    void *interp = py.ThreadState_GetInterpreter(py.ThreadState_Get());
    for (void *ts = py.InterpreterState_ThreadHead(interp); ts; ts = py.ThreadState_Next(ts))
        if (!profile_of(ts) && py.SetProfileOn(ts, on_profile, NULL))
            py.ErrClear();
}

static const char *install_profile(void)
{
    if (!find_profile_slot())
        return "the profile function's place in the thread state was not found";
    py_tracefunc mine = profile_of(py.ThreadState_Get());
    if (mine && mine != on_profile)
        return "another profiler holds this thread's profile function";
    tag_frames = 1;
    atomic_fetch_add(&generation, 1);
    /* Threads that exist now are armed below; threading hands over those started later. */
    py_object *g = run_script(threads_src);
    if (g)
        say_error(g);
    else
        vt_log("Python frames: threads started later have none (threading.setprofile failed)");
    py.DecRef(g);
    arm_threads();
    return NULL;
}

int vramtap_python_install(void)
{
    static int state; /* 0: not yet, 1: ready, -1: cannot work in this process */
    if (vt_cfg.disabled || !vt_cfg.stacks || !vt_cfg.python_stacks)
        return VT_PY_OFF;
    if (state < 0)
        return VT_PY_FAILED;
    if (!state && !vt_pystack_api()) {
        state = -1;
        vt_log("no Python frames: no CPython 3.9 or later found in the process");
        return VT_PY_FAILED;
    }
    if (!py.GILState_Check()) {
        vt_warn_once("no Python frames: vramtap_python_install needs the GIL (call it through "
                     "ctypes.PyDLL)");
        return VT_PY_FAILED;
    }
    const char *why = NULL;
    if (!state) {
        if ((why = prepare())) {
            state = -1;
            vt_log("no Python frames: %s", why);
            return VT_PY_FAILED;
        }
        state = 1;
    }
    int m = atomic_load(&mech);
    if (m == VT_PY_PROFILE) {
        /* Re-arm this thread if another profiler let go of it; its stack missed events. */
        if (!profile_of(py.ThreadState_Get())) {
            py.SetProfile(on_profile, NULL);
            if (self)
                self->gen = 0;
        }
        return m;
    }
    if (m)
        return m;
    static int frames_tried;
    if (vt_cfg.python_stacks == 1 && !frames_tried) {
        frames_tried = 1;
        if (!(why = vt_pyframes_start(&py, py_version))) {
            atomic_store_explicit(&mech, VT_PY_FRAMES, memory_order_release);
            vramtap_record_text(VT_K_PYTHON_FRAMES, "read");
            vt_debug("Python frames: read from the interpreter's frames");
            return VT_PY_FRAMES;
        }
        vt_log("Python frames: %s; following Python calls instead, which costs every call", why);
    }
    if (py_version >= 0x030c && install_monitoring())
        m = VT_PY_MONITORING;
    else if (!(why = install_profile()))
        m = VT_PY_PROFILE;
    if (!m) {
        vt_log("no Python frames: %s", why);
        return VT_PY_FAILED;
    }
    atomic_store_explicit(&mech, m, memory_order_release);
    vramtap_record_text(VT_K_PYTHON_FRAMES, "followed");
    vt_debug("Python frames: %s", m == VT_PY_MONITORING ? "sys.monitoring" : "profile function");
    return m;
}
