/* Native frames to function, file and line, inlined calls included: the DWARF of each module the
 * snapshot names (its path as mapped in the profiled process, checked against the build id
 * recorded there), read with elfutils' libdw here in the command, never in the profiled
 * process. A module is opened once, on the first frame that needs it; each (module, offset) is
 * resolved once. */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uthash.h>

#include "snapshot.h"

/* Inlined calls kept per frame: deeper chains are template plumbing. */
#define MAX_CHAIN 16

typedef enum { MOD_UNOPENED, MOD_OK, MOD_NO_DEBUG, MOD_MISSING, MOD_CHANGED } mod_state;

typedef struct {
    Dwfl *dwfl;
    Dwfl_Module *mod;
    mod_state state;
    bool shown_unresolved; /* a frame shown to the user lacked lines */
} lines_module;

/* What one return address resolves to, innermost call first. */
typedef struct {
    UT_hash_handle hh;
    struct {
        int32_t module;
        uint64_t offset;
    } key;
    size_t n;
    struct {
        const char *function, *file;
        int64_t line;
    } calls[];
} resolved;

struct vt_lines {
    pthread_mutex_t lock;
    lines_module *mods;
    resolved *cache;
};

static char *debuginfo_path;
static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &debuginfo_path,
};

static bool build_id_matches(Dwfl_Module *mod, const char *want)
{
    const unsigned char *bits;
    GElf_Addr vaddr;
    int n = dwfl_module_build_id(mod, &bits, &vaddr);
    if (!want)
        return true;
    if (n <= 0 || strlen(want) != (size_t)n * 2)
        return false;
    for (int i = 0; i < n; i++) {
        char hex[3];
        snprintf(hex, sizeof hex, "%02x", bits[i]);
        if (strncmp(want + 2 * i, hex, 2))
            return false;
    }
    return true;
}

static void open_module(const vt_module *m, lines_module *lm)
{
    lm->state = MOD_MISSING;
    int fd = open(m->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    lm->dwfl = dwfl_begin(&callbacks);
    if (!lm->dwfl) {
        close(fd);
        return;
    }
    /* Addresses are the file's own (link-time) addresses: the offsets are relative to the load
     * bias. The Dwfl owns fd from here on. */
    dwfl_report_begin(lm->dwfl);
    lm->mod = dwfl_report_elf(lm->dwfl, m->path, m->path, fd, 0, true);
    dwfl_report_end(lm->dwfl, NULL, NULL);
    if (!lm->mod)
        return;
    if (!build_id_matches(lm->mod, m->build_id)) {
        lm->state = MOD_CHANGED;
        return;
    }
    Dwarf_Addr bias;
    lm->state = dwfl_module_getdwarf(lm->mod, &bias) ? MOD_OK : MOD_NO_DEBUG;
}

static const char *die_name(Dwarf_Die *die)
{
    Dwarf_Attribute attr;
    const char *name = NULL;
    if (dwarf_attr_integrate(die, DW_AT_name, &attr))
        name = dwarf_formstring(&attr);
    return name;
}

/* The file an inlined call was made from: an index into its unit's file table. */
static const char *call_file(Dwarf_Die *cu, Dwarf_Die *inl, int64_t *line)
{
    Dwarf_Attribute attr;
    Dwarf_Word idx, ln;
    Dwarf_Files *files;
    size_t nfiles;
    *line = -1;
    if (!dwarf_attr(inl, DW_AT_call_line, &attr) || dwarf_formudata(&attr, &ln))
        return NULL;
    *line = (int64_t)ln;
    if (!dwarf_attr(inl, DW_AT_call_file, &attr) || dwarf_formudata(&attr, &idx) ||
        dwarf_getsrcfiles(cu, &files, &nfiles) || idx >= nfiles)
        return NULL;
    return dwarf_filesrc(files, idx, NULL, NULL);
}

/* The chain of calls at addr, innermost first: the innermost takes the line table's file and
 * line, each outer one the call site of the inlined call inside it. */
static resolved *resolve(lines_module *lm, Dwarf_Addr addr)
{
    Dwarf_Addr bias;
    Dwarf_Die *cu = dwfl_module_addrdie(lm->mod, addr, &bias);
    Dwfl_Line *dl = dwfl_module_getsrc(lm->mod, addr);
    if (!cu || !dl)
        return NULL;
    resolved *r = calloc(1, sizeof *r + MAX_CHAIN * sizeof r->calls[0]);
    if (!r)
        return NULL;
    int line = 0;
    r->calls[0].file = dwfl_lineinfo(dl, NULL, &line, NULL, NULL, NULL);
    r->calls[0].line = line > 0 ? line : -1;
    r->n = 1;
    Dwarf_Die *scopes = NULL;
    int nscopes = dwarf_getscopes(cu, addr - bias, &scopes);
    for (int i = 0; i < nscopes; i++) {
        int tag = dwarf_tag(&scopes[i]);
        if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine)
            continue;
        r->calls[r->n - 1].function = die_name(&scopes[i]);
        if (tag == DW_TAG_subprogram || r->n == MAX_CHAIN)
            break;
        r->calls[r->n].file = call_file(cu, &scopes[i], &r->calls[r->n].line);
        r->n++;
    }
    free(scopes);
    return r;
}

static vt_lines *lines_of(vt_snapshot *s)
{
    /* Created before the sites are loaded in parallel (vt_sites_load_all) or one by one. */
    static pthread_mutex_t create = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&create);
    if (!s->lines && (s->lines = calloc(1, sizeof *s->lines))) {
        s->lines->mods = calloc(s->nmodules, sizeof *s->lines->mods);
        pthread_mutex_init(&s->lines->lock, NULL);
    }
    pthread_mutex_unlock(&create);
    return s->lines && s->lines->mods ? s->lines : NULL;
}

/* Looks up (module, offset) under the lock; NULL when it has no line information. */
static const resolved *lookup(vt_snapshot *s, vt_lines *L, const vt_frame *f)
{
    char *end;
    uint64_t offset = f->offset ? strtoull(f->offset, &end, 16) : 0;
    if (!offset || *end)
        return NULL;
    lines_module *lm = &L->mods[f->module_id];
    if (lm->state == MOD_UNOPENED)
        open_module(&s->modules[f->module_id], lm);
    if (lm->state != MOD_OK)
        return NULL;
    resolved probe = {.key = {f->module_id, offset}}, *r;
    memset(&probe.hh, 0, sizeof probe.hh);
    HASH_FIND(hh, L->cache, &probe.key, sizeof probe.key, r);
    if (r)
        return r->n ? r : NULL;
    /* A return address points after the call: the call is the byte before. */
    r = resolve(lm, (Dwarf_Addr)offset - 1);
    if (!r && !(r = calloc(1, sizeof *r)))
        return NULL;
    r->key = probe.key;
    HASH_ADD(hh, L->cache, key, sizeof r->key, r);
    return r->n ? r : NULL;
}

int vt_lines_expand(vt_snapshot *s, vt_site *site, vt_err *err)
{
    size_t extra = 0;
    for (size_t i = 0; i < site->nframes; i++)
        extra += site->frames[i].module_id >= 0;
    if (!extra)
        return 0;
    vt_lines *L = lines_of(s);
    if (!L)
        return 0;
    vt_frame *out = calloc(site->nframes + extra * (MAX_CHAIN - 1), sizeof *out);
    if (!out) {
        vt_err_set(err, "out of memory");
        return -1;
    }
    size_t n = 0;
    pthread_mutex_lock(&L->lock);
    for (size_t i = 0; i < site->nframes; i++) {
        const vt_frame *f = &site->frames[i];
        const resolved *r = f->module_id >= 0 ? lookup(s, L, f) : NULL;
        if (!r) {
            out[n++] = *f;
            continue;
        }
        for (size_t c = 0; c < r->n; c++) {
            vt_frame *g = &out[n++];
            *g = *f;
            g->inlined = c + 1 < r->n;
            g->file = r->calls[c].file;
            g->line = r->calls[c].line;
            g->function = r->calls[c].function;
            /* the symbol table's name (demangled by the profiled process) is the fuller one */
            if (!g->inlined && f->symbol)
                g->function = f->symbol;
        }
    }
    pthread_mutex_unlock(&L->lock);
    free(site->frames);
    site->frames = out;
    site->nframes = n;
    return 0;
}

void vt_lines_note_shown(const vt_snapshot *s, const vt_frame *f)
{
    if (!s->lines || f->python || f->module_id < 0 || f->file)
        return;
    pthread_mutex_lock(&s->lines->lock);
    s->lines->mods[f->module_id].shown_unresolved = true;
    pthread_mutex_unlock(&s->lines->lock);
}

const char *vt_lines_missing(const vt_snapshot *s, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; s->lines && i < s->nmodules && used < len; i++) {
        const lines_module *lm = &s->lines->mods[i];
        if (!lm->shown_unresolved || lm->state == MOD_UNOPENED)
            continue;
        const char *path = s->modules[i].path, *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        used += (size_t)snprintf(buf + used, len - used, "%s", used ? "; " : "");
        if (lm->state == MOD_NO_DEBUG)
            used += (size_t)snprintf(buf + used, len - used,
                                     "%s has no debug information (build it with -g, or install "
                                     "its debug symbols)",
                                     base);
        else if (lm->state == MOD_MISSING)
            used += (size_t)snprintf(buf + used, len - used, "%s is not found (%s)", base, path);
        else if (lm->state == MOD_CHANGED)
            used += (size_t)snprintf(buf + used, len - used,
                                     "%s changed since the run (its build id differs)", base);
        else
            used +=
                (size_t)snprintf(buf + used, len - used, "%s has no line for some addresses", base);
    }
    return buf;
}

void vt_lines_free(vt_snapshot *s)
{
    vt_lines *L = s->lines;
    if (!L)
        return;
    resolved *r, *tmp;
    HASH_ITER(hh, L->cache, r, tmp)
    {
        HASH_DEL(L->cache, r);
        free(r);
    }
    for (size_t i = 0; L->mods && i < s->nmodules; i++)
        if (L->mods[i].dwfl)
            dwfl_end(L->mods[i].dwfl);
    free(L->mods);
    pthread_mutex_destroy(&L->lock);
    free(L);
    s->lines = NULL;
}
