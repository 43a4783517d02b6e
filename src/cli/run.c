/* vramtap run: start a command with libvramtap.so preloaded, or with the CUDA driver told to load
 * it as its CUPTI injection library (--attach cupti). The library's constructor does the rest
 * (tensor mode, NVTX injection, the Python bootstrap), so this prepares the environment and runs
 * the command as its child (supervise.c), passing on its exit status and the signals it is sent,
 * and saying how it died when a signal ended it. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "paths.h"
#include "supervise.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vramtap run [--mode tensor|native] [--attach preload|cupti] [--out DIR] [--]\n"
            "                   COMMAND [ARGS...]\n"
            "\n"
            "Runs COMMAND with libvramtap.so preloaded; each process that touches CUDA memory\n"
            "writes vramtap.<prog>.<host>[.r<rank>].<pid>.json, never over a file it did not\n"
            "write. Python programs get the PyTorch phase hooks. The exit status is the\n"
            "command's (128+N when signal N ended it: vramtap then says which signal, whether\n"
            "the kernel's OOM killer sent it, and which snapshot the job left); signals sent\n"
            "to vramtap are passed on to the command.\n"
            "\n"
            "  --mode tensor   make frameworks allocate per tensor, even over your own\n"
            "                  PYTORCH_CUDA_ALLOC_CONF (default: tensor unless you set it)\n"
            "  --mode native   keep each framework's own allocator (segments)\n"
            "  --attach cupti  no LD_PRELOAD: the CUDA driver loads vramtap at cuInit and CUPTI\n"
            "                  reports every allocation, whatever route reached the driver\n"
            "                  (static runtimes, launchers that drop LD_PRELOAD); needs CUPTI\n"
            "                  (libcupti.so; VRAMTAP_CUPTI names it). Default: preload\n"
            "  --out DIR       where the snapshots go (default: the working directory)\n"
            "\n"
            "VRAMTAP_LIB names the library to preload (default: the one built or installed\n"
            "with this command). See docs/modes.md, docs/attach.md and docs/python.md.\n");
}

static int readable(const char *path)
{
    return path && *path && access(path, R_OK) == 0;
}

/* Put `item` in front of the list in variable `name` (entries separated by any of `seps`),
 * unless it already is the first entry. */
static int env_prepend(const char *name, const char *item, const char *seps)
{
    const char *old = getenv(name);
    size_t n = strlen(item);
    if (old && !strncmp(old, item, n) && (!old[n] || strchr(seps, old[n])))
        return 0;
    size_t len = n + (old ? strlen(old) : 0) + 2;
    char *value = malloc(len);
    if (!value)
        return -1;
    snprintf(value, len, "%s%s%s", item, old && *old ? ":" : "", old && *old ? old : "");
    int rc = setenv(name, value, 1);
    free(value);
    return rc;
}

/* The bootstrap folder, spelled as the library spells it (init.c, bootstrap_dir), so that the
 * library sees it already in front of PYTHONPATH and leaves it alone. */
static const char *bootstrap_dir(char *out, size_t size)
{
    const char *candidates[3] = {getenv("VRAMTAP_PYDIR")};
    vt_paths_order(VT_PYDIR_BUILD, VT_PYDIR_INSTALL, candidates + 1);
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        if (!candidates[i])
            continue;
        snprintf(out, size, "%s/vramtap", candidates[i]);
        char probe[PATH_MAX + 32];
        snprintf(probe, sizeof probe, "%s/sitecustomize.py", out);
        if (readable(probe))
            return out;
    }
    return NULL;
}

static int set_out_dir(const char *dir)
{
    char abs[PATH_MAX];
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "vramtap run: --out %s: %s\n", dir, strerror(errno));
        return -1;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || !realpath(dir, abs)) {
        fprintf(stderr, "vramtap run: --out %s: not a directory\n", dir);
        return -1;
    }
    return setenv("VRAMTAP_OUT", abs, 1);
}

/* Value of option `name` at argv[*i], as "--name VALUE" or "--name=VALUE"; NULL if argv[*i] is
 * not that option. Sets *missing when the value is absent. */
static const char *option(int argc, char **argv, int *i, const char *name, int *missing)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n))
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n])
        return NULL;
    if (*i + 1 >= argc) {
        *missing = 1;
        return NULL;
    }
    return argv[++*i];
}

int vt_cmd_run(int argc, char **argv)
{
    const char *mode = NULL, *out = NULL, *attach = "preload";
    int i = 1;
    for (; i < argc; i++) {
        int missing = 0;
        const char *v;
        if (!strcmp(argv[i], "--")) {
            i++;
            break;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if ((v = option(argc, argv, &i, "--mode", &missing))) {
            mode = v;
        } else if ((v = option(argc, argv, &i, "--attach", &missing))) {
            attach = v;
        } else if ((v = option(argc, argv, &i, "--out", &missing))) {
            out = v;
        } else if (missing) {
            fprintf(stderr, "vramtap run: %s needs a value\n", argv[i]);
            return 2;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "vramtap run: unknown option '%s' (try 'vramtap run --help')\n",
                    argv[i]);
            return 2;
        } else {
            break;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "vramtap run: no command given (usage: vramtap run [--mode "
                        "tensor|native] [--attach preload|cupti] [--out DIR] [--] COMMAND "
                        "[ARGS...])\n");
        return 2;
    }
    if (mode && strcmp(mode, "tensor") && strcmp(mode, "native")) {
        fprintf(stderr, "vramtap run: --mode %s: expected 'tensor' or 'native'\n", mode);
        return 2;
    }
    int cupti = !strcmp(attach, "cupti");
    if (!cupti && strcmp(attach, "preload")) {
        fprintf(stderr, "vramtap run: --attach %s: expected 'preload' or 'cupti'\n", attach);
        return 2;
    }

    char lib[PATH_MAX];
    if (vt_find_library(lib, "run") != 0)
        return 2;
    if (out && set_out_dir(out) != 0)
        return 2;
    if (mode && setenv("VRAMTAP_MODE", mode, 1) != 0)
        goto env_failed;
    /* the library says once what it changed */
    if (setenv("VRAMTAP_ANNOUNCE", "1", 1) != 0)
        goto env_failed;
    if (cupti) {
        /* The driver loads one injection library; another tool's (Nsight's) comes first. */
        const char *other = getenv("CUDA_INJECTION64_PATH");
        if (other && *other && strcmp(other, lib)) {
            fprintf(stderr,
                    "vramtap run: --attach cupti: CUDA_INJECTION64_PATH is already set (%s); the "
                    "driver loads only one injection library\n",
                    other);
            return 2;
        }
        /* NVTX ranges start phases from the program's first call, which may come before
         * cuInit has loaded the library. */
        if (setenv("CUDA_INJECTION64_PATH", lib, 1) != 0 ||
            setenv("NVTX_INJECTION64_PATH", lib, 0) != 0)
            goto env_failed;
    } else if (env_prepend("LD_PRELOAD", lib, ": ") != 0) {
        /* (the dynamic loader splits LD_PRELOAD at spaces and colons) */
        goto env_failed;
    }
    char pydir[PATH_MAX];
    if (bootstrap_dir(pydir, sizeof pydir) && env_prepend("PYTHONPATH", pydir, ":") != 0)
        goto env_failed;

    return vt_supervise(argv + i);

env_failed:
    fprintf(stderr, "vramtap run: cannot set the environment: %s\n", strerror(errno));
    return 2;
}

int vt_cmd_lib(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: vramtap lib\n\nPrints the absolute path of libvramtap.so, the library "
               "this command runs\nwith (VRAMTAP_LIB overrides it), for "
               "LD_PRELOAD=$(vramtap lib) COMMAND.\n");
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "vramtap lib: takes no arguments (try 'vramtap lib --help')\n");
        return 2;
    }
    char lib[PATH_MAX];
    if (vt_find_library(lib, "lib") != 0)
        return 2;
    puts(lib);
    return 0;
}
