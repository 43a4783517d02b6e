/* Output files in a directory others may write to (every rank of a job on a shared filesystem,
 * /tmp, a group's scratch space). Every file is first written to a temporary file created with
 * O_EXCL|O_NOFOLLOW, so nothing planted under a name vramtap would use is ever followed or
 * truncated; it is then put in place with link() (or renameat2(RENAME_NOREPLACE) where the
 * filesystem has no hard links), which fails rather than replace whatever holds the name. The
 * only file ever replaced is the snapshot this very process wrote before (an interim one),
 * recognised by its device and inode, not by its name. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "launcher.h"
#include "outfile.h"

#define MAX_SUFFIX 1000 /* <name>-2.json ... <name>-1000.json */
#define TMP_TRIES 16    /* the predictable temporary name, then random ones */
#define OOM_NAMES                                                                                  \
    1024 /* post-mortems whose placed name is remembered (VRAMTAP_OOM_MAX <= 1000)                 \
          */
#define EXIT_WAIT_MS 2000 /* how long an exit snapshot waits for an interim one being written */

/* The snapshot this process last put in place, for the next interim or exit one to replace. */
static struct {
    pid_t pid; /* a forked child starts afresh: the file is its parent's */
    dev_t dev;
    ino_t ino;
    char name[VT_OUTFILE_NAME_MAX];
} placed;
/* The process one of whose threads is writing the snapshot, 0 when none. A parent's pid seen in
 * a forked child is stale: that writer does not exist there. */
static _Atomic pid_t writer;
/* Post-mortem n went to the name with suffix (value & 0xffffffff), in process (value >> 32). */
static _Atomic uint64_t oom_placed[OOM_NAMES];

static void name_with_suffix(char *buf, size_t len, int oom_n, int k)
{
    char host[256], shorthost[64], rank[24] = "", oom[24] = "", suffix[16] = "";
    vt_host_name(host, sizeof host);
    size_t n = 0;
    /* The short name: FQDNs are long and node names are unique within a cluster. Anything a
     * file name or a glob would trip on becomes '_'. */
    for (const char *p = host; *p && *p != '.' && n + 1 < sizeof shorthost; p++)
        shorthost[n++] = isalnum((unsigned char)*p) || *p == '-' || *p == '_' ? *p : '_';
    shorthost[n] = 0;
    vt_launcher l;
    vt_launcher_read(&l);
    if (l.rank >= 0)
        snprintf(rank, sizeof rank, ".r%ld", l.rank);
    if (oom_n)
        snprintf(oom, sizeof oom, ".oom%d", oom_n);
    if (k > 1)
        snprintf(suffix, sizeof suffix, "-%d", k);
    snprintf(buf, len, "vramtap.%s.%s%s.%d%s%s.json", vt_cfg.prog, n ? shorthost : "unknown-host",
             rank, (int)getpid(), oom, suffix);
}

void vt_outfile_name(char *buf, size_t len, int oom_n)
{
    name_with_suffix(buf, len, oom_n, 1);
}

void vt_outfile_oom_name(char *buf, size_t len, int n)
{
    uint64_t v = n >= 1 && n <= OOM_NAMES ? atomic_load(&oom_placed[n - 1]) : 0;
    int mine = v && (pid_t)(v >> 32) == getpid();
    name_with_suffix(buf, len, n, mine ? (int)(v & 0xffffffffu) : 1);
}

static int take_writer(int wait)
{
    pid_t me = getpid();
    for (int ms = 0;; ms++) {
        pid_t cur = atomic_load(&writer);
        if (cur != me && atomic_compare_exchange_strong(&writer, &cur, me))
            return 1;
        if (cur != me)
            continue;
        if (!wait || ms == EXIT_WAIT_MS)
            return 0;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
}

static uint64_t random_bits(void)
{
    static _Atomic uint64_t counter;
    uint64_t r;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) == (ssize_t)sizeof r)
        return r;
    return vt_clock() ^ ((uint64_t)getpid() << 32) ^ atomic_fetch_add(&counter, 1);
}

static int create_tmp(vt_outfile *o)
{
    for (int i = 0; i < TMP_TRIES; i++) {
        if (i == 0)
            snprintf(o->tmp, sizeof o->tmp, "%s.tmp", o->name);
        else
            snprintf(o->tmp, sizeof o->tmp, "%s.%016llx.tmp", o->name,
                     (unsigned long long)random_bits());
        int fd =
            openat(o->dirfd, o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0)
            return fd;
        if (errno != EEXIST) {
            vt_warn_once("cannot write %s/%s: %s", vt_cfg.out_dir, o->tmp, strerror(errno));
            return -1;
        }
        if (i == 0)
            vt_warn_once(
                "%s/%s already exists and is not this process's: left alone, writing through "
                "another temporary file",
                vt_cfg.out_dir, o->tmp);
    }
    vt_log("cannot write %s/%s: every temporary name tried exists", vt_cfg.out_dir, o->name);
    return -1;
}

FILE *vt_outfile_open(vt_outfile *o, int oom_n, int wait)
{
    memset(o, 0, sizeof *o);
    o->dirfd = -1;
    o->oom_n = oom_n;
    if (!oom_n && !(o->owns_main = take_writer(wait)) && !wait)
        return NULL;
    vt_outfile_name(o->name, sizeof o->name, oom_n);
    o->dirfd = open(vt_cfg.out_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (o->dirfd < 0) {
        vt_warn_once("cannot write %s/%s: %s (set VRAMTAP_OUT to a writable directory)",
                     vt_cfg.out_dir, o->name, strerror(errno));
        goto fail;
    }
    int fd = create_tmp(o);
    if (fd < 0)
        goto fail;
    o->f = fdopen(fd, "w");
    if (o->f)
        return o->f;
    vt_warn_once("cannot write %s/%s: %s", vt_cfg.out_dir, o->tmp, strerror(errno));
    close(fd);
    unlinkat(o->dirfd, o->tmp, 0);
fail:
    if (o->dirfd >= 0)
        close(o->dirfd);
    if (o->owns_main)
        atomic_store(&writer, 0);
    return NULL;
}

/* Replaces the snapshot this process put in place before, if that very file still holds its
 * name. (Between the check and the rename another process could swap the name; in a sticky
 * directory such as /tmp only the file's owner can, and it is this user.) */
static int replace_own(vt_outfile *o, const struct stat *st)
{
    struct stat cur;
    if (placed.pid != getpid() || fstatat(o->dirfd, placed.name, &cur, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(cur.st_mode) || cur.st_dev != placed.dev || cur.st_ino != placed.ino ||
        renameat(o->dirfd, o->tmp, o->dirfd, placed.name) != 0)
        return 0;
    placed.dev = st->st_dev;
    placed.ino = st->st_ino;
    vt_debug("wrote %s/%s", vt_cfg.out_dir, placed.name);
    return 1;
}

/* Gives the temporary file the first free name; returns the suffix used, 0 on failure. */
static int place_new(vt_outfile *o, char *final, size_t len)
{
    char taken[VT_OUTFILE_NAME_MAX] = "";
    int err = 0;
    for (int k = 1; k <= MAX_SUFFIX; k++) {
        name_with_suffix(final, len, o->oom_n, k);
        if (linkat(o->dirfd, o->tmp, o->dirfd, final, 0) == 0) {
            unlinkat(o->dirfd, o->tmp, 0);
            err = 0;
        } else if ((err = errno) != EEXIST) {
            err = renameat2(o->dirfd, o->tmp, o->dirfd, final, RENAME_NOREPLACE) == 0 ? 0 : errno;
        }
        if (!err) {
            if (taken[0])
                vt_log("%s/%s already exists and was not written by this process: left alone, "
                       "wrote %s instead",
                       vt_cfg.out_dir, taken, final);
            else
                vt_debug("wrote %s/%s", vt_cfg.out_dir, final);
            return k;
        }
        if (err != EEXIST)
            break;
        if (!taken[0])
            snprintf(taken, sizeof taken, "%s", final);
    }
    if (err == EEXIST) {
        vt_log("cannot write %s/%s: every name up to -%d is taken", vt_cfg.out_dir, o->name,
               MAX_SUFFIX);
        unlinkat(o->dirfd, o->tmp, 0);
    } else {
        /* Neither a hard link nor a rename that refuses to replace: keep what was written. */
        vt_log("cannot put %s/%s in place (%s): the file stays at %s/%s", vt_cfg.out_dir, o->name,
               strerror(err), vt_cfg.out_dir, o->tmp);
    }
    return 0;
}

int vt_outfile_close(vt_outfile *o)
{
    struct stat st;
    int ok = fflush(o->f) == 0 && !ferror(o->f) && fstat(fileno(o->f), &st) == 0;
    int err = errno;
    if (fclose(o->f) != 0 && ok) {
        ok = 0;
        err = errno;
    }
    char final[VT_OUTFILE_NAME_MAX];
    int k = 0;
    if (!ok) {
        vt_warn_once("cannot write %s/%s: %s", vt_cfg.out_dir, o->name, strerror(err));
        unlinkat(o->dirfd, o->tmp, 0);
    } else if (!o->oom_n && replace_own(o, &st)) {
        snprintf(final, sizeof final, "%s", placed.name);
        k = 1;
    } else if ((k = place_new(o, final, sizeof final)) && o->oom_n) {
        if (o->oom_n <= OOM_NAMES)
            atomic_store(&oom_placed[o->oom_n - 1], (uint64_t)getpid() << 32 | (unsigned)k);
    } else if (k) {
        placed.pid = getpid();
        placed.dev = st.st_dev;
        placed.ino = st.st_ino;
        snprintf(placed.name, sizeof placed.name, "%s", final);
    }
    close(o->dirfd);
    if (o->owns_main)
        atomic_store(&writer, 0);
    if (!k)
        return -1;
    memcpy(o->name, final, sizeof final);
    return 0;
}
