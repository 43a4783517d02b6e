#include <elf.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbols.h"

typedef struct {
    uintptr_t start, size;
    const char *name; /* inside the file's mapping */
} func;

typedef struct module {
    struct module *next;
    char *path;
    func *funcs; /* by start address */
    size_t nfuncs;
} module;

static pthread_mutex_t modules_lock = PTHREAD_MUTEX_INITIALIZER;
static module *modules;

static int by_start(const void *a, const void *b)
{
    const func *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* The functions of one symbol table section. */
static void read_table(const unsigned char *base, size_t len, const Elf64_Shdr *sh,
                       const Elf64_Shdr *strtab, module *m)
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

static void load(module *m)
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

const char *vt_symbol_lookup(const char *path, uintptr_t addr)
{
    pthread_mutex_lock(&modules_lock);
    module *m = modules;
    while (m && strcmp(m->path, path))
        m = m->next;
    if (!m && (m = calloc(1, sizeof *m))) {
        m->path = strdup(path);
        if (m->path)
            load(m);
        m->next = modules;
        modules = m;
    }
    const char *name = NULL;
    if (m && m->nfuncs) {
        size_t lo = 0, hi = m->nfuncs;
        while (hi - lo > 1) {
            size_t mid = (lo + hi) / 2;
            if (m->funcs[mid].start <= addr)
                lo = mid;
            else
                hi = mid;
        }
        const func *f = &m->funcs[lo];
        if (f->start <= addr && addr < f->start + (f->size ? f->size : 1))
            name = f->name;
    }
    pthread_mutex_unlock(&modules_lock);
    return name;
}
