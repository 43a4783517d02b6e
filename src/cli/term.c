/* Colour and bars. Colour only when stdout is a terminal and NO_COLOR (no-color.org) is unset
 * or empty, so pipes, files and tests get plain text. Bars use block characters on a UTF-8
 * terminal and ASCII elsewhere. */
#include <langinfo.h>
#include <locale.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "snapshot.h"

static bool colour, blocks;

void vt_term_init(void)
{
    const char *no_color = getenv("NO_COLOR"), *term = getenv("TERM");
    bool tty = isatty(STDOUT_FILENO);
    colour = tty && !(no_color && *no_color) && !(term && !strcmp(term, "dumb"));
    if (tty && setlocale(LC_CTYPE, ""))
        blocks = !strcmp(nl_langinfo(CODESET), "UTF-8");
}

const char *vt_on(vt_style s)
{
    static const char *const codes[] = {[VT_STYLE_BOLD] = "\033[1m",
                                        [VT_STYLE_WARN] = "\033[33m",
                                        [VT_STYLE_GOOD] = "\033[32m",
                                        [VT_STYLE_BAD] = "\033[31m"};
    return colour ? codes[s] : "";
}

const char *vt_cat_on(vt_category c)
{
    static const char *const codes[VT_NCATS] = {[VT_CAT_PARAMETERS] = "\033[34m",
                                                [VT_CAT_GRADIENTS] = "\033[35m",
                                                [VT_CAT_OPTIMIZER_STATE] = "\033[36m",
                                                [VT_CAT_ACTIVATIONS] = "\033[33m",
                                                [VT_CAT_TEMPORARY] = "\033[32m",
                                                [VT_CAT_UNATTRIBUTED_PERSISTENT] = "\033[37m",
                                                [VT_CAT_UNATTRIBUTED_TRANSIENT] = "\033[37m"};
    return colour ? codes[c] : "";
}

const char *vt_off(void)
{
    return colour ? "\033[0m" : "";
}

void vt_print_bar(FILE *out, int64_t part, int64_t whole, int width)
{
    int filled = whole > 0 ? (int)((double)part / (double)whole * width + 0.5) : 0;
    for (int i = 0; i < width; i++)
        fputs(i < filled ? (blocks ? "\u2588" : "#") : (blocks ? "\u2591" : "."), out);
}

int vt_term_width(void)
{
    const char *env = getenv("COLUMNS");
    char *end;
    long n = env && *env ? strtol(env, &end, 10) : 0;
    if (n >= 20 && n <= 1000 && !*end)
        return (int)n;
    struct winsize ws;
    if (isatty(STDOUT_FILENO) && !ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) && ws.ws_col >= 20)
        return ws.ws_col;
    return 100;
}

void vt_print_wrapped(FILE *out, int col, int indent, const char *text)
{
    int wrap = vt_term_width();
    bool first = true; /* of its line: no space before it */
    for (const char *p = text; *p;) {
        const char *w = strchr(p, ' ');
        int len = w ? (int)(w - p) : (int)strlen(p);
        if (!first && col + 1 + len > wrap) {
            fprintf(out, "\n%*s", indent, "");
            col = indent;
        } else if (!first) {
            fputc(' ', out);
            col++;
        }
        fwrite(p, 1, (size_t)len, out);
        col += len;
        first = false;
        for (p += len; *p == ' '; p++)
            ;
    }
    fputc('\n', out);
}
