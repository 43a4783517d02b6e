/* The files a process writes into VRAMTAP_OUT, which may be a directory shared by every rank
 * of a job across nodes, or by other users: names that never collide, and creation that never
 * replaces or writes through anything this process did not write itself. */
#ifndef VT_OUTFILE_H
#define VT_OUTFILE_H

#include <stdio.h>

#include "tap.h"

#define VT_OUTFILE_NAME_MAX 512

/* A file being written: a new temporary file in the output directory, put in place by
 * vt_outfile_close. */
typedef struct {
    FILE *f;
    int dirfd, oom_n, owns_main;
    char name[VT_OUTFILE_NAME_MAX];     /* the first choice: vt_outfile_name */
    char tmp[VT_OUTFILE_NAME_MAX + 32]; /* the temporary's name in the directory */
} vt_outfile;

/* vramtap.<prog>.<host>[.r<rank>].<pid>.json for the snapshot (oom_n 0), with .oom<n> before
 * .json for post-mortem n. <host> is the host name up to its first dot. */
VT_HIDDEN void vt_outfile_name(char *buf, size_t len, int oom_n);
/* The name post-mortem n was written under (a numbered suffix when the first choice was taken),
 * or its first choice when not written yet. */
VT_HIDDEN void vt_outfile_oom_name(char *buf, size_t len, int n);

/* Starts the snapshot (oom_n 0) or post-mortem oom_n. Interim and exit snapshots are one file:
 * one writer at a time; `wait` says whether to wait for another thread's (exit) or give way
 * (interim). NULL when nothing is to be written: given way, or a failure said on stderr. */
VT_HIDDEN FILE *vt_outfile_open(vt_outfile *o, int oom_n, int wait);
/* Closes the file and puts it in place: the snapshot replaces the file this process wrote
 * before, if that is still there; anything else gets a name no file has, the first choice or
 * else the first free of <name>-2.json, -3... Names taken by others are said on stderr. 0 when
 * the file is in place (o->name is its name), -1 when not (said on stderr). */
VT_HIDDEN int vt_outfile_close(vt_outfile *o);

#endif
