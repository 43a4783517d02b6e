/* The command line goes into files people share (bug reports, a team's scratch space), and
 * training scripts take API keys and tokens as options (--hf-token, --wandb-key,
 * trainer.api_key=...). An option whose name contains one of the words below keeps its name;
 * its value becomes "***", in the forms --name=VALUE, --name VALUE and NAME=VALUE. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "command.h"
#include "json_out.h"
#include "snapshot_keys.h"

static const char *const secret_words[] = {"token", "key", "secret", "password", "passwd"};

/* Whether the first n bytes of s contain a secret word, in any case. */
static int looks_secret(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t w = 0; w < sizeof secret_words / sizeof secret_words[0]; w++) {
            size_t len = strlen(secret_words[w]);
            if (len <= n - i && !strncasecmp(s + i, secret_words[w], len))
                return 1;
        }
    return 0;
}

/* Writes one argument; returns whether the next one is this option's value. */
static int write_arg(FILE *f, const char *arg, size_t n, int is_value)
{
    if (is_value && arg[0] != '-') {
        vt_json_str(f, "***");
        return 0;
    }
    const char *eq = memchr(arg, '=', n);
    size_t name_len = eq ? (size_t)(eq - arg) : n;
    int secret = looks_secret(arg, name_len);
    if (!secret || !eq) {
        vt_json_strn(f, arg, n);
        return secret && arg[0] == '-';
    }
    char *masked = malloc(name_len + 5);
    if (masked) {
        memcpy(masked, arg, name_len);
        memcpy(masked + name_len, "=***", 5);
    }
    vt_json_str(f, masked ? masked : "***");
    free(masked);
    return 0;
}

void vt_command_write_json(FILE *f)
{
    size_t len;
    const char *cmd = vt_cmdline(&len);
    int is_value = 0;
    fputs(VT_JSON_KEY(VT_K_COMMAND) "[", f);
    for (size_t i = 0; cmd && i < len;) {
        size_t n = strnlen(cmd + i, len - i);
        fputs(i ? ", " : "", f);
        /* the program itself is never an option */
        is_value = i ? write_arg(f, cmd + i, n, is_value) : (vt_json_strn(f, cmd, n), 0);
        i += n + 1;
    }
    fputs("],\n", f);
}
