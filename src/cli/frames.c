/* Naming sites and frames for people: the one-line label of a site, folded-stack frame names,
 * and the command line. */
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

/* Frames inside the CUDA libraries and vramtap say only that memory was allocated. */
static bool cuda_module(const char *module)
{
    static const char *const prefixes[] = {"libcudart", "libcuda.", "libvramtap", "libcudadevrt"};
    if (!module)
        return false;
    const char *base = strrchr(module, '/');
    base = base ? base + 1 : module;
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (!strncmp(base, prefixes[i], strlen(prefixes[i])))
            return true;
    return false;
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

static void frame_text(const vt_frame *f, char *buf, size_t len)
{
    int n;
    if (f->python)
        n = snprintf(buf, len, "%s:%lld %s", short_path(f->file), (long long)f->line,
                     f->function ? f->function : "?");
    else if (f->symbol)
        n = snprintf(buf, len, "%s", f->symbol);
    else
        n = snprintf(buf, len, "%s+%s", f->module ? f->module : "?", f->offset ? f->offset : "?");
    /* C++ symbols run to hundreds of characters; the label keeps their start */
    if (n >= (int)len && len > 3)
        cut(buf, len - 1);
}

/* The label holds LABEL_FRAMES frames of at most FRAME_CHARS bytes: callers give room. */
static void append(char *buf, size_t *used, const vt_frame *f)
{
    char text[FRAME_CHARS + 1];
    frame_text(f, text, sizeof text);
    *used += (size_t)sprintf(buf + *used, "%s%s", *used ? " < " : "", text);
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
    size_t used = 0, shown = 0;
    bool any_python = false;
    for (size_t i = 0; i < s->nframes; i++)
        any_python |= s->frames[i].python;
    if (any_python) {
        /* the innermost Python frame names the operation; then the user's own frames */
        for (size_t i = 0; i < s->nframes && shown < LABEL_FRAMES; i++) {
            const vt_frame *f = &s->frames[i];
            if (!f->python || (shown && library_file(f->file)))
                continue;
            append(buf, &used, f);
            shown++;
        }
    } else {
        for (size_t i = 0; i < s->nframes && shown < LABEL_FRAMES; i++) {
            if (cuda_module(s->frames[i].module))
                continue;
            append(buf, &used, &s->frames[i]);
            shown++;
        }
    }
    if (!shown)
        snprintf(buf, VT_LABEL_MAX, "%s",
                 s->nframes ? "(only CUDA library frames)" : "(empty stack)");
}

void vt_frame_name(const vt_frame *f, char *buf, size_t len)
{
    if (f->python)
        snprintf(buf, len, "%s (%s:%lld)", f->function ? f->function : "?", f->file ? f->file : "?",
                 (long long)f->line);
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
