/* Python frames read at allocation time, from the allocating thread's own interpreter frames.
 *
 * The thread's state comes from PyGILState_GetThisThreadState (thread-local, no GIL), its frame
 * chain is followed with the offsets of pylayout.h, and each (code object, instruction offset)
 * is turned into an interned location and a line once per thread, then found in a small
 * per-thread memo. Nothing here takes the GIL or runs Python on the allocation path: the frames
 * walked are the caller's own and stay alive while it waits in the allocation, and their code
 * objects are only read (PyCode_Addr2Line reads the immutable line table and allocates nothing).
 *
 * A freed code object's address may be given to a new one: every code object's death bumps a
 * counter chosen by its address (a wrapper of PyCode_Type's tp_dealloc, installed with the
 * GIL), and a memo entry holds only while that counter is what it was when the entry was made.
 *
 * A layout is used only after it reads the interpreter's own frames exactly as sys._getframe()
 * sees them; that check reads memory through a pipe, so a wrong offset gives a mismatch, never
 * a crash. */
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pyframes.h"
#include "pylayout.h"
#include "pystack.h"
#include "stacks.h"

static const py_api *py;
static vt_pylayout lay;

/* A frame as walked: the frame, its code object and the byte offset of its instruction (negative
 * before the first), turned into a location and a line later. */
typedef struct {
    const char *frame, *code;
    int addr;
} py_site;

#define WALK_MAX (1 << 20) /* past this many frames the chain is taken as broken */
#define RING VT_MAX_DEPTH

static int pipe_fd[2] = {-1, -1};

/* write() answers EFAULT for memory a load would crash on. At most PIPE_BUF bytes, so a write
 * is whole or nothing. */
static int checked_read(const void *at, void *out, size_t n)
{
    if (write(pipe_fd[1], at, n) != (ssize_t)n)
        return 0;
    return read(pipe_fd[0], out, n) == (ssize_t)n;
}

/* Direct loads on the allocation path; checked ones while a layout is being verified. */
static inline __attribute__((always_inline)) int rd(int checked, const void *at, void *out,
                                                    size_t n)
{
    if (checked)
        return checked_read(at, out, n);
    memcpy(out, at, n);
    return 1;
}

/* An object as a frame holds it: from 3.14 a tagged reference (_PyStackRef), whose low bits say
 * how it is counted. Objects are 16-byte aligned, so the plain pointers of earlier versions come
 * through unchanged. */
static inline const char *untagged(const char *ref)
{
    return (const char *)((uintptr_t)ref & ~(uintptr_t)3);
}

/* The innermost frame of thread state `ts` into *f (NULL where it runs none): through its
 * cframe where the layout has one. 0 when a checked read failed. */
static inline __attribute__((always_inline)) int innermost(int checked, const vt_pylayout *L,
                                                           const char *ts, const char **f)
{
    if (!rd(checked, ts + L->ts_frame, f, sizeof *f))
        return 0;
    return !*f || L->cframe_current < 0 || rd(checked, *f + L->cframe_current, f, sizeof *f);
}

/* Walks the frames of thread state `ts`, innermost first, into `ring`, wrapping around so that
 * the outermost `cap` stay when there are more. Returns how many frames there were, or -1 when
 * the chain does not read as CPython frames. */
static inline __attribute__((always_inline)) int walk(int checked, const vt_pylayout *L,
                                                      const char *ts, py_site *ring, int cap)
{
    const char *f;
    if (!innermost(checked, L, ts, &f))
        return -1;
    int n = 0;
    for (int hops = 0; f; hops++) {
        uint8_t owner = 0;
        if (hops == WALK_MAX || (L->interp_frames && !rd(checked, f + L->f_owner, &owner, 1)))
            return -1;
        if (!L->cstack_owner || owner < L->cstack_owner) {
            py_site s;
            const void *type;
            if (!rd(checked, f + L->f_code, &s.code, sizeof s.code))
                return -1;
            s.code = untagged(s.code);
            if (!s.code || !rd(checked, s.code + VT_PY_OB_TYPE, &type, sizeof type) ||
                type != py->CodeType)
                return -1;
            int keep = 1;
            long units;
            if (L->interp_frames) {
                const char *instr;
                int first = 0;
                if (!rd(checked, f + L->f_instr, &instr, sizeof instr))
                    return -1;
                /* A frame that has not reached its first traceable instruction is not shown
                 * by sys._getframe() either (generators excepted). */
                units = ((long)(intptr_t)instr - (long)(intptr_t)(s.code + L->co_code)) / 2;
                if (owner != L->gen_owner &&
                    !rd(checked, s.code + L->co_firsttraceable, &first, sizeof first))
                    return -1;
                keep = owner == L->gen_owner || units >= first;
                units *= 2;
            } else {
                int lasti;
                if (!rd(checked, f + L->f_instr, &lasti, sizeof lasti))
                    return -1;
                units = lasti < 0 ? -1 : (long)lasti * L->lasti_scale;
            }
            if (units < -2 || units > INT_MAX / 2)
                return -1;
            s.addr = (int)units;
            s.frame = f;
            if (keep)
                ring[n++ % cap] = s;
        }
        if (!rd(checked, f + L->f_back, &f, sizeof f))
            return -1;
    }
    return n;
}

static size_t utf8_put(char *o, uint32_t c)
{
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xc0 | c >> 6);
        o[1] = (char)(0x80 | (c & 0x3f));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xe0 | c >> 12);
        o[1] = (char)(0x80 | (c >> 6 & 0x3f));
        o[2] = (char)(0x80 | (c & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | (c >> 18 & 0x07));
    o[1] = (char)(0x80 | (c >> 12 & 0x3f));
    o[2] = (char)(0x80 | (c >> 6 & 0x3f));
    o[3] = (char)(0x80 | (c & 0x3f));
    return 4;
}

/* The UTF-8 of the str object at `s` in `buf`, cut short at a character when it does not fit;
 * 0 when `s` is not a compact str (every name and file name of a code object is). */
static int str_utf8(int checked, const char *s, char *buf, size_t cap)
{
    const void *type;
    py_ssize_t len;
    uint32_t state;
    if (!s || !rd(checked, s + VT_PY_OB_TYPE, &type, sizeof type) || type != py->UnicodeType ||
        !rd(checked, s + VT_PY_STR_LENGTH, &len, sizeof len) ||
        !rd(checked, s + VT_PY_STR_STATE, &state, sizeof state))
        return 0;
    unsigned kind = state >> 2 & 7, compact = state >> 5 & 1, ascii = state >> 6 & 1;
    if (!compact || (kind != 1 && kind != 2 && kind != 4) || len < 0)
        return 0;
    const char *data = s + (ascii ? lay.str_ascii : lay.str_compact);
    uint32_t raw[256];
    size_t o = 0, per = sizeof raw / kind;
    for (py_ssize_t i = 0; i < len;) {
        size_t chunk = (size_t)(len - i) < per ? (size_t)(len - i) : per;
        if (!rd(checked, data + (size_t)i * kind, raw, chunk * kind))
            return 0;
        for (size_t j = 0; j < chunk; j++) {
            uint32_t c = kind == 1   ? ((const uint8_t *)raw)[j]
                         : kind == 2 ? ((const uint16_t *)raw)[j]
                                     : raw[j];
            char u[4];
            size_t k = utf8_put(u, c);
            if (o + k >= cap) {
                buf[o] = 0;
                return 1;
            }
            memcpy(buf + o, u, k);
            o += k;
        }
        i += (py_ssize_t)chunk;
    }
    buf[o] = 0;
    return 1;
}

typedef struct {
    char file[4096], function[1024];
} py_names;

/* File and function of a code object, as tracebacks name them. */
static void names_of(int checked, const char *code, py_names *nm)
{
    const char *file = NULL, *name = NULL;
    if (!rd(checked, code + lay.co_filename, &file, sizeof file) ||
        !str_utf8(checked, file, nm->file, sizeof nm->file))
        strcpy(nm->file, "?");
    if (!rd(checked, code + lay.co_name, &name, sizeof name) ||
        !str_utf8(checked, name, nm->function, sizeof nm->function))
        strcpy(nm->function, "?");
}

static uint32_t line_of(const py_site *s)
{
    int line = py->CodeAddr2Line((py_object *)s->code, s->addr);
    return line > 0 ? (uint32_t)line : 0;
}

/* ---- code objects' deaths, and the per-thread memo ---- */

#define DEATH_SLOTS 4096
static _Atomic uint32_t deaths[DEATH_SLOTS];
static void (*code_dealloc_real)(py_object *);

static _Atomic uint32_t *death_count(const void *code)
{
    return &deaths[((uintptr_t)code >> 4) % DEATH_SLOTS];
}

/* Runs with the GIL, before the memory is freed: a thread that later meets a new code object at
 * this address got it through the GIL, after this count. */
static void code_dealloc(py_object *code)
{
    atomic_fetch_add_explicit(death_count(code), 1, memory_order_relaxed);
    code_dealloc_real(code);
}

/* Sets of MEMO_WAYS entries, the newest first: two sites of one step that hash alike would
 * evict each other at every step from a table of single entries (about 20 misses a step of the
 * bench's transformer, each naming its frame again). */
#define MEMO_SLOTS 1024
#define MEMO_WAYS 4
typedef struct {
    const char *code;
    int32_t addr;
    uint32_t deaths, loc, line;
} py_memo;

static VT_TLS py_memo *memo;
static pthread_key_t memo_key;

static void memo_gone(void *p)
{
    memo = NULL;
    free(p);
}

static py_memo *memo_self(void)
{
    py_memo *m = memo;
    return m ? m : (memo = vt_pystack_thread_data(memo_key, MEMO_SLOTS * sizeof *m));
}

static uint64_t site_frame(py_memo *m, const py_site *s)
{
    uint32_t d = atomic_load_explicit(death_count(s->code), memory_order_relaxed);
    uintptr_t h = ((uintptr_t)s->code >> 4) ^ (uint32_t)s->addr * 0x9e3779b1u;
    py_memo *set = m ? &m[(h ^ h >> 13) % (MEMO_SLOTS / MEMO_WAYS) * MEMO_WAYS] : NULL;
    for (int w = 0; set && w < MEMO_WAYS; w++)
        if (set[w].code == s->code && set[w].addr == s->addr && set[w].deaths == d)
            return (uint64_t)set[w].loc << 32 | set[w].line;
    py_names nm;
    names_of(0, s->code, &nm);
    py_memo fresh = {s->code, s->addr, d, vt_pystack_intern(nm.file, nm.function), line_of(s)};
    if (set) {
        memmove(set + 1, set, (MEMO_WAYS - 1) * sizeof *set);
        set[0] = fresh;
    }
    return (uint64_t)fresh.loc << 32 | fresh.line;
}

int vt_pyframes_capture(uint64_t *out, int max)
{
    const char *ts = py->GILState_GetThisThreadState();
    if (!ts || max <= 0)
        return 0;
    py_site ring[RING];
    int cap = max < RING ? max : RING;
    int n = walk(0, &lay, ts, ring, cap);
    if (n <= 0)
        return 0;
    py_memo *m = memo_self();
    int kept = n < cap ? n : cap;
    for (int i = 0; i < kept; i++)
        out[i] = site_frame(m, &ring[(n - kept + i) % cap]);
    return kept;
}

/* ---- the module a thread runs (docs/modules.md) ---- */

/* Set once, with the GIL, by vt_pyframes_watch; read by any thread. */
static _Atomic(const void *) module_code, backward_code;
static int started;

int vt_pyframes_watch(const void *module_call, const void *backward_call)
{
    if (!started)
        return 0;
    atomic_store_explicit(&backward_code, backward_call, memory_order_relaxed);
    atomic_store_explicit(&module_code, module_call, memory_order_relaxed);
    return 1;
}

int vt_pyframes_modules(const void **selves, int max)
{
    const void *mcode = atomic_load_explicit(&module_code, memory_order_relaxed);
    const char *ts = mcode ? py->GILState_GetThisThreadState() : NULL;
    if (!ts)
        return 0;
    const void *bcode = atomic_load_explicit(&backward_code, memory_order_relaxed);
    const char *f;
    innermost(0, &lay, ts, &f);
    int n = 0;
    for (int hops = 0; f && n < max && hops < WALK_MAX; hops++) {
        const char *code, *self;
        memcpy(&code, f + lay.f_code, sizeof code);
        code = untagged(code);
        if (code == mcode) {
            memcpy(&self, f + lay.f_local0, sizeof self);
            selves[n++] = untagged(self);
        } else if (code == bcode) {
            break;
        }
        memcpy(&f, f + lay.f_back, sizeof f);
    }
    return n;
}

/* ---- the check at start, with the GIL held ---- */

/* Why the last check failed; empty when it passed. */
static char mismatch[256];

/* What the interpreter's own frames and the walk disagree on, or NULL. The innermost frames
 * (check_src's four functions) have `marker` as their first local. */
static const char *compare(const vt_pylayout *L, const void *marker, char *detail, size_t cap)
{
    const char *ts = py->GILState_GetThisThreadState();
    if (!ts || ts != py->ThreadState_Get())
        return "this thread's state is not the one running Python";
    py_site ring[RING];
    int n = walk(1, L, ts, ring, RING);
    if (n < 0)
        return "the frame chain does not read as frames";
    if (n > RING)
        return "the stack is too deep to check";
    for (int k = 0; k < 4 && k < n; k++) {
        const void *local0 = NULL;
        if (!rd(1, ring[k].frame + L->f_local0, &local0, sizeof local0) ||
            untagged(local0) != marker) {
            snprintf(detail, cap, "frame %d: another first local", k);
            return detail;
        }
    }
    py_object *f = py->GetFrame(), *back;
    int i = 0;
    const char *why = NULL;
    const char *attr = L->version >= 0x030b ? "co_qualname" : "co_name";
    for (py->IncRef(f); f && !why; f = back, i++) {
        py_object *code = py->FrameGetCode(f);
        py_object *file = py->GetAttrString(code, "co_filename");
        py_object *name = py->GetAttrString(code, attr);
        const char *fs = file ? py->UnicodeAsUTF8(file) : NULL;
        const char *ns = name ? py->UnicodeAsUTF8(name) : NULL;
        py_names nm;
        if (i >= n) {
            why = "more frames than were read";
        } else if (ring[i].code != (const char *)code) {
            why = "another code object";
        } else {
            names_of(1, ring[i].code, &nm);
            if ((int)line_of(&ring[i]) != py->FrameGetLineNumber(f))
                why = "another line";
            else if (!fs || !ns || strcmp(fs, nm.file) || strcmp(ns, nm.function))
                why = "another file or function name";
        }
        if (why) {
            snprintf(detail, cap, "frame %d (%s in %s): %s", i, ns ? ns : "?", fs ? fs : "?", why);
            why = detail;
        }
        py->DecRef(file);
        py->DecRef(name);
        py->DecRef(code);
        back = py->FrameGetBack(f);
        py->DecRef(f);
    }
    py->DecRef(f);
    py->ErrClear();
    if (!why && i != n) {
        snprintf(detail, cap, "%d frames read, sys._getframe() shows %d", n, i);
        why = detail;
    }
    if (!why && n < 5)
        why = "too few frames to check";
    return why;
}

/* check(object.__basicsize__, marker): a header of other than 16 bytes is a free-threaded or
 * debug build, whose objects and frames the table does not describe. */
static py_object *on_check(py_object *mod, py_object *const *args, py_ssize_t nargs)
{
    (void)mod;
    long header = nargs == 2 ? py->LongAsLong(args[0]) : -1;
    char detail[sizeof mismatch];
    const char *why = header == 16 ? compare(&lay, args[1], detail, sizeof detail) : NULL;
    if (header != 16)
        snprintf(mismatch, sizeof mismatch,
                 "objects have a %ld-byte header: a free-threaded or debug build", header);
    else
        snprintf(mismatch, sizeof mismatch, "%s", why ? why : "");
    py->ErrClear();
    py->IncRef(py->none);
    return py->none;
}

static py_method_def def_check = {"vramtap_check_frames", on_check, PY_METH_FASTCALL, NULL};

/* The check runs at the bottom of a generator inside a coroutine, called back by a C function
 * through functools.partial, on top of whatever called vramtap_python_install. Each of the four
 * has the same object as its first local, as the hooks' module-call wrapper has its module. */
static const char check_src[] = "import functools\n"
                                "def gen(m):\n"
                                "    yield check(object.__basicsize__, m)\n"
                                "async def coro(m):\n"
                                "    return next(gen(m))\n"
                                "def through_c(m):\n"
                                "    c = coro(m)\n"
                                "    try:\n"
                                "        c.send(None)\n"
                                "    except StopIteration as e:\n"
                                "        return e.value\n"
                                "def outer(m):\n"
                                "    return sorted([m], key=functools.partial(through_c))\n"
                                "outer(object())\n";

const char *vt_pyframes_start(const py_api *api, int version)
{
    static char why[400];
    if (started)
        return NULL;
    py = api;
    const vt_pylayout *row = NULL;
    for (size_t i = 0; i < sizeof vt_pylayouts / sizeof vt_pylayouts[0]; i++)
        if (vt_pylayouts[i].version == version)
            row = &vt_pylayouts[i];
    if (!row) {
        snprintf(why, sizeof why, "no frame layout for CPython %d.%d", version >> 8,
                 version & 0xff);
        return why;
    }
    lay = *row;
    /* Tests force a mismatch to see the fallback work. */
    const char *skew = getenv("VRAMTAP_TEST_PYFRAMES_SKEW");
    if (skew && *skew && strcmp(skew, "0"))
        lay.f_back += 8;
    if (pipe2(pipe_fd, O_CLOEXEC))
        return "no pipe to check the frame layout with";
    snprintf(mismatch, sizeof mismatch, "the check did not run");
    py_object *fn = py->CFunctionNewEx(&def_check, NULL, NULL);
    static const char *const name[] = {"check"};
    py_object *g = fn ? vt_pystack_run(check_src, name, &fn, 1) : NULL;
    py->DecRef(fn);
    py->DecRef(g);
    py->ErrClear();
    close(pipe_fd[0]);
    close(pipe_fd[1]);
    if (mismatch[0]) {
        snprintf(why, sizeof why,
                 "CPython %d.%d's frames did not read as sys._getframe() shows "
                 "them (%s)",
                 version >> 8, version & 0xff, mismatch);
        return why;
    }
    if (pthread_key_create(&memo_key, memo_gone))
        return "no thread key left";
    void (**dealloc)(py_object *) =
        (void (**)(py_object *))((char *)py->CodeType + VT_PY_TP_DEALLOC);
    code_dealloc_real = *dealloc;
    *dealloc = code_dealloc;
    started = 1;
    return NULL;
}
