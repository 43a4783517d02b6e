/* The launcher and rank of a process started among many. Each launcher sets its own variables
 * in every process it starts; when several are nested, the innermost one tells the rank:
 * torchrun under srun, or mpirun inside a Slurm allocation, where every process also inherits
 * the batch step's SLURM_PROCID. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json_out.h"
#include "launcher.h"

static const struct {
    const char *name, *rank, *local_rank, *world_size, *job_id;
} launchers[] = {
    {"torchrun", "RANK", "LOCAL_RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID"},
    {"mpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE",
     "PMIX_NAMESPACE"},
    {"mpi", "PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE", "PMI_KVSNAME"},
    {"slurm", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_JOB_ID"},
    {"mpi", "PMIX_RANK", NULL, NULL, "PMIX_NAMESPACE"},
};

static long env_count(const char *name)
{
    const char *v = name ? getenv(name) : NULL;
    char *end;
    long n = v && *v ? strtol(v, &end, 10) : -1;
    return n >= 0 && v && *v && !*end ? n : -1;
}

static const char *env_text(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

void vt_launcher_read(vt_launcher *l)
{
    *l = (vt_launcher){.rank = -1, .local_rank = -1, .world_size = -1};
    l->slurm_job_id = env_text("SLURM_JOB_ID");
    if (!l->slurm_job_id)
        l->slurm_job_id = env_text("SLURM_JOBID");
    for (size_t i = 0; i < sizeof launchers / sizeof launchers[0]; i++) {
        long rank = env_count(launchers[i].rank);
        if (rank < 0)
            continue;
        l->rank = rank;
        l->rank_source = launchers[i].rank;
        l->local_rank = env_count(launchers[i].local_rank);
        l->world_size = env_count(launchers[i].world_size);
        l->job_id = env_text(launchers[i].job_id);
        l->name = launchers[i].name;
        /* RANK alone is PyTorch's env:// convention, which other launchers follow too. */
        if (i == 0 && !l->job_id)
            l->name = "env";
        return;
    }
}

void vt_host_name(char *buf, size_t len)
{
    if (gethostname(buf, len) != 0)
        buf[0] = 0;
    buf[len - 1] = 0;
}

static void write_count(FILE *f, long v)
{
    if (v < 0)
        fputs("null", f);
    else
        fprintf(f, "%ld", v);
}

void vt_launcher_write_json(FILE *f)
{
    vt_launcher l;
    vt_launcher_read(&l);
    fputs("\"rank\": {\"rank\": ", f);
    write_count(f, l.rank);
    fputs(", \"local_rank\": ", f);
    write_count(f, l.local_rank);
    fputs(", \"source\": ", f);
    vt_json_str(f, l.rank_source);
    fputs("},\n", f);
}
