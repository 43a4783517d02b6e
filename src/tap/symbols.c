#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "locks.h"
#include "symbols.h"

typedef struct {
    uintptr_t start, size;
    const char *name; /* inside the file's mapping */
} func;

typedef struct symtab {
    struct symtab *next;
    char *path;
    func *funcs; /* by start address */
    size_t nfuncs;
} symtab;

static symtab *symtabs;

static int by_start(const void *a, const void *b)
{
    const func *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* The functions of one symbol table section. */
static void read_table(const unsigned char *base, size_t len, const Elf64_Shdr *sh,
                       const Elf64_Shdr *strtab, symtab *m)
{
    if (sh->sh_offset + sh->sh_size > len || strtab->sh_offset + strtab->sh_size > len ||
        sh->sh_entsize != sizeof(Elf64_Sym))
        return;
    size_t n = sh->sh_size / sizeof(Elf64_Sym);
    const Elf64_Sym *syms = (const Elf64_Sym *)(base + sh->sh_offset);
    m->funcs = calloc(n ? n : 1, sizeof *m->funcs);
    if (!m->funcs)
        return;
    for (size_t i = 0; i < n; i++) {
        if (ELF64_ST_TYPE(syms[i].st_info) != STT_FUNC || !syms[i].st_value ||
            syms[i].st_name >= strtab->sh_size)
            continue;
        m->funcs[m->nfuncs++] =
            (func){.start = syms[i].st_value,
                   .size = syms[i].st_size,
                   .name = (const char *)base + strtab->sh_offset + syms[i].st_name};
    }
    qsort(m->funcs, m->nfuncs, sizeof *m->funcs, by_start);
}

static void load(symtab *m)
{
    int fd = open(m->path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return;
    if (fstat(fd, &st) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
        close(fd);
        return;
    }
    size_t len = (size_t)st.st_size;
    const unsigned char *base = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (base == MAP_FAILED)
        return;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)base;
    int ok = !memcmp(eh->e_ident, ELFMAG, SELFMAG) && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
             eh->e_shentsize == sizeof(Elf64_Shdr) &&
             eh->e_shoff + (size_t)eh->e_shnum * sizeof(Elf64_Shdr) <= len;
    if (!ok) {
        munmap((void *)base, len);
        return;
    }
    /* The mapping stays: the names point into it. */
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(base + eh->e_shoff);
    for (Elf64_Word want = SHT_SYMTAB; !m->nfuncs && want;
         want = want == SHT_SYMTAB ? SHT_DYNSYM : 0)
        for (int i = 0; i < eh->e_shnum && !m->nfuncs; i++)
            if (sh[i].sh_type == want && sh[i].sh_link < eh->e_shnum) {
                free(m->funcs);
                m->funcs = NULL;
                read_table(base, len, &sh[i], &sh[sh[i].sh_link], m);
            }
}

/* The table of `path`: read from the file outside the lock (that is file I/O), published under
 * it. A table never changes once published, so lookups in it need no lock. */
static const symtab *symtab_of(const char *path)
{
    vt_lock_take(VT_LOCK_SYMBOLS);
    symtab *m = symtabs;
    while (m && strcmp(m->path, path))
        m = m->next;
    vt_lock_give(VT_LOCK_SYMBOLS);
    if (m)
        return m;
    symtab *fresh = calloc(1, sizeof *fresh);
    if (!fresh || !(fresh->path = strdup(path))) {
        free(fresh);
        return NULL;
    }
    load(fresh);
    vt_lock_take(VT_LOCK_SYMBOLS);
    for (m = symtabs; m && strcmp(m->path, path);)
        m = m->next;
    if (!m) {
        fresh->next = symtabs;
        symtabs = m = fresh;
        fresh = NULL;
    }
    vt_lock_give(VT_LOCK_SYMBOLS);
    /* Another writer published the same file meanwhile: ours stays mapped, as its would. */
    if (fresh) {
        free(fresh->funcs);
        free(fresh->path);
        free(fresh);
    }
    return m;
}

const char *vt_symbol_lookup(const char *path, uintptr_t addr)
{
    const symtab *m = symtab_of(path);
    if (!m || !m->nfuncs)
        return NULL;
    size_t lo = 0, hi = m->nfuncs;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (m->funcs[mid].start <= addr)
            lo = mid;
        else
            hi = mid;
    }
    const func *f = &m->funcs[lo];
    return f->start <= addr && addr < f->start + (f->size ? f->size : 1) ? f->name : NULL;
}
