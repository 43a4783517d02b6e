/* Naming sites and frames for people: the one-line label of a site (starting at the user's
 * first frame), folded-stack frame names, and the command line. */
#include <stdio.h>
#include <string.h>

#include "snapshot.h"

#define LABEL_FRAMES 3
#define FRAME_CHARS 72

/* Frames of the Python runtime and installed packages (torch, transformers, ...): the user
 * wants to see their own code first. Traces imported from Windows use backslashes. */
static bool library_file(const char *file)
{
    return file && (strstr(file, "site-packages") || strstr(file, "dist-packages") ||
                    strstr(file, "/lib/python3") || strstr(file, "\\Lib\\") || file[0] == '<');
}

static bool starts(const char *s, const char *const *prefixes, size_t n)
{
    for (size_t i = 0; s && i < n; i++)
        if (!strncmp(s, prefixes[i], strlen(prefixes[i])))
            return true;
    return false;
}

#define STARTS(s, list) starts(s, list, sizeof list / sizeof list[0])

/* Frames that only say memory was allocated, or that a program or thread started: the C
 * library's start-up, the CUDA runtime and driver, vramtap itself, and the framework's
 * allocator and dispatch plumbing between the user's call and the allocation. */
static bool folded(const vt_frame *f)
{
    static const char *const modules[] = {"libcudart", "libcuda.", "libvramtap", "libcudadevrt",
                                          "libc.so",   "ld-linux", "libpthread", "ld64.so"};
    static const char *const startup[] = {
        "_start",  "__libc_start_main", "__libc_start_call_main", "start_thread", "clone", "clone3",
        "__clone", "__clone3"};
    static const char *const plumbing[] = {
        "c10::cuda::", "c10::CachingDeviceAllocator", "c10::impl::", "c10::Dispatcher",
        "c10::BoxedKernel", "c10::KernelFunction", "c10::TensorImpl", "c10::StorageImpl",
        "c10::make_intrusive", "at::detail::empty", "at::detail::_empty", "at::native::empty",
        "at::empty", "at::_ops::", "at::(anonymous namespace)::", "at::TensorIteratorBase::",
        "torch::autograd::VariableType::", "cudart::", "__cudart",
        /* profiler ops of imported traces */
        "aten::empty", "<built-in method _record_function_enter"};
    if (f->python)
        return false;
    const char *base = f->module ? strrchr(f->module, '/') : NULL;
    base = base ? base + 1 : f->module;
    if (STARTS(base, modules))
        return true;
    const char *name = f->symbol ? f->symbol : f->function;
    if (!name)
        return false;
    for (size_t i = 0; i < sizeof startup / sizeof startup[0]; i++)
        if (!strcmp(name, startup[i]))
            return true;
    return STARTS(name, plumbing);
}

static bool all_frames;

void vt_labels_all_frames(bool all)
{
    all_frames = all;
}

bool vt_frame_folded(const vt_frame *f)
{
    return !all_frames && folded(f);
}

static bool separator(char c)
{
    return c == '/' || c == '\\';
}

/* The last two components of a path: enough to tell modules/linear.py from a user's linear.py. */
static const char *short_path(const char *file)
{
    if (!file)
        return "?";
    const char *p = file + strlen(file);
    int seen = 0;
    while (p > file && !(separator(p[-1]) && ++seen == 2))
        p--;
    return p;
}

/* Cuts buf to at most max bytes without splitting a UTF-8 sequence, ending it in "...". */
static void cut(char *buf, size_t max)
{
    size_t n = max - 3;
    while (n > 0 && ((unsigned char)buf[n] & 0xc0) == 0x80)
        n--;
    memcpy(buf + n, "...", 4);
}

/* Bytes of a C++ name without its parameter list: "ns::f(int, std::vector<...>) const" is
 * "ns::f" in a label. */
static int without_args(const char *name)
{
    int n = (int)strlen(name), depth = 0;
    if (n >= 6 && !strcmp(name + n - 6, " const"))
        n -= 6;
    if (!n || name[n - 1] != ')')
        return (int)strlen(name);
    for (int i = n - 1; i >= 0; i--) {
        depth += (name[i] == ')') - (name[i] == '(');
        if (!depth)
            return i;
    }
    return (int)strlen(name);
}

static void frame_text(const vt_frame *f, char *buf, size_t len)
{
    int n;
    const char *fn = f->python ? f->function : f->function ? f->function : f->symbol;
    if (f->file) /* Python, or native with debug information */
        n = snprintf(buf, len, "%s:%lld %.*s", short_path(f->file), (long long)f->line,
                     fn ? (f->python ? (int)strlen(fn) : without_args(fn)) : 1, fn ? fn : "?");
    else if (f->symbol)
        n = snprintf(buf, len, "%.*s", without_args(f->symbol), f->symbol);
    else
        n = snprintf(buf, len, "%s+%s", f->module ? f->module : "?", f->offset ? f->offset : "?");
    /* C++ symbols run to hundreds of characters; the label keeps their start */
    if (n >= (int)len && len > 3)
        cut(buf, len - 1);
}

/* The frames a label shows, innermost first: with Python frames, the innermost Python frame
 * (it names the operation), then the user's own; without, the first native frames that are
 * not folded. Returns how many were put in idx. */
static size_t label_frames(const vt_site *s, size_t idx[LABEL_FRAMES])
{
    size_t shown = 0;
    bool any_python = false;
    for (size_t i = 0; i < s->nframes; i++)
        any_python |= s->frames[i].python;
    for (size_t i = 0; i < s->nframes && shown < LABEL_FRAMES; i++) {
        const vt_frame *f = &s->frames[i];
        if (any_python ? !f->python || (shown && library_file(f->file)) : !all_frames && folded(f))
            continue;
        idx[shown++] = i;
    }
    return shown;
}

void vt_site_label(const vt_snapshot *snap, int32_t site, char buf[VT_LABEL_MAX])
{
    _Static_assert(VT_LABEL_MAX >= LABEL_FRAMES * (FRAME_CHARS + 3) + 1, "label room");
    buf[0] = '\0';
    if (site < 0) {
        snprintf(buf, VT_LABEL_MAX, "(no stack recorded)");
        return;
    }
    const vt_site *s = &snap->sites[site];
    size_t idx[LABEL_FRAMES], shown = label_frames(s, idx), used = 0;
    for (size_t i = 0; i < shown; i++) {
        char text[FRAME_CHARS + 1];
        frame_text(&s->frames[idx[i]], text, sizeof text);
        used += (size_t)sprintf(buf + used, "%s%s", used ? " < " : "", text);
    }
    if (!shown)
        snprintf(buf, VT_LABEL_MAX, "%s",
                 s->nframes ? "(only library frames: --all-frames shows them)" : "(empty stack)");
}

void vt_site_key(const vt_snapshot *snap, int32_t site, char *key, size_t keylen, char *lines,
                 size_t lineslen)
{
    size_t k = 0, l = 0;
    key[0] = lines[0] = '\0';
    if (site < 0)
        return;
    const vt_site *s = &snap->sites[site];
    size_t idx[LABEL_FRAMES], shown = label_frames(s, idx);
    for (size_t i = 0; i < shown && k < keylen && l < lineslen; i++) {
        const vt_frame *f = &s->frames[idx[i]];
        const char *where = f->file ? f->file : f->module ? f->module : "";
        const char *what = f->function ? f->function : f->symbol ? f->symbol : f->offset;
        k += (size_t)snprintf(key + k, keylen - k, "%s\x1f%s\x1e", where, what ? what : "");
        l += (size_t)snprintf(lines + l, lineslen - l, "%lld,", (long long)f->line);
    }
}

void vt_site_note_shown(const vt_snapshot *snap, int32_t site)
{
    if (site < 0)
        return;
    const vt_site *s = &snap->sites[site];
    size_t idx[LABEL_FRAMES], shown = label_frames(s, idx);
    for (size_t i = 0; i < shown; i++)
        vt_lines_note_shown(snap, &s->frames[idx[i]]);
}

/* Columns a UTF-8 string takes, one per character. */
static int columns(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

void vt_label_fit(char *buf, int width)
{
    if (width < 8)
        width = 8;
    if (columns(buf) <= width)
        return;
    size_t i = 0;
    for (int col = 0; buf[i] && col < width - 3; col++)
        for (i++; ((unsigned char)buf[i] & 0xc0) == 0x80; i++)
            ;
    memcpy(buf + i, "...", 4);
}

void vt_frame_name(const vt_frame *f, char *buf, size_t len)
{
    if (f->file) /* Python, or native with debug information */
        snprintf(buf, len, "%s (%s:%lld)", f->function ? f->function : "?", f->file,
                 (long long)f->line);
    else if (f->python)
        snprintf(buf, len, "%s (?:%lld)", f->function ? f->function : "?", (long long)f->line);
    else if (f->symbol)
        snprintf(buf, len, "%s", f->symbol);
    else
        snprintf(buf, len, "%s+%s", f->module ? f->module : "?", f->offset ? f->offset : "?");
    /* ';' separates frames and a newline ends a line in the folded format */
    if (strlen(buf) + 1 == len)
        cut(buf, len - 1);
    for (char *p = buf; *p; p++)
        if (*p == ';' || (unsigned char)*p < 0x20)
            *p = '_';
}

static bool shell_safe(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=@%+,-", *s))
            return false;
    return true;
}

void vt_print_command(FILE *out, const char *const *argv, size_t argc)
{
    for (size_t i = 0; i < argc; i++) {
        if (i)
            fputc(' ', out);
        if (shell_safe(argv[i])) {
            fputs(argv[i], out);
            continue;
        }
        fputc('\'', out);
        for (const char *p = argv[i]; *p; p++) {
            if (*p == '\'')
                fputs("'\\''", out);
            else
                fputc((unsigned char)*p < 0x20 ? '?' : *p, out);
        }
        fputc('\'', out);
    }
}
