/* Where the process runs among many: the launcher that started it (torchrun, Slurm, MPI), its
 * rank, and the host. Read from the environment and the kernel, never from CUDA, so any
 * writer may ask at any time. */
#ifndef VT_LAUNCHER_H
#define VT_LAUNCHER_H

#include <stdio.h>

#include "tap.h"

typedef struct {
    const char *name;         /* "torchrun", "env" (RANK set by another tool), "mpi", "slurm",
                                 or NULL */
    const char *rank_source;  /* the variable the rank was read from, NULL when none */
    long rank, local_rank;    /* -1 when unknown */
    long world_size;          /* -1 when unknown */
    const char *job_id;       /* the launcher's own job or run id, NULL when none */
    const char *slurm_job_id; /* set whenever the process runs inside a Slurm job */
} vt_launcher;

VT_HIDDEN void vt_launcher_read(vt_launcher *l);
/* The host name as the kernel has it (gethostname), "" when it cannot be read. */
VT_HIDDEN void vt_host_name(char *buf, size_t len);
/* The snapshot's "rank", "launcher" and "visible_devices", each followed by ",\n". */
VT_HIDDEN void vt_launcher_write_json(FILE *f);

#endif
