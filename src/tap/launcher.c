/* The launcher and rank of a process started among many. Each launcher sets its own variables
 * in every process it starts; when several are nested, the innermost one tells the rank:
 * torchrun under srun, or mpirun inside a Slurm allocation, where every process also inherits
 * the batch step's SLURM_PROCID. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json_out.h"
#include "launcher.h"
#include "snapshot_keys.h"

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

/* A member of a JSON object: text (null when NULL), or a count (null when negative). */
typedef struct {
    const char *key, *text;
    long count;
    int is_text;
} member;

static void write_object(FILE *f, const char *name, const member *m, size_t n)
{
    fprintf(f, "\"%s\": {", name);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%s\"%s\": ", i ? ", " : "", m[i].key);
        if (m[i].is_text)
            vt_json_str(f, m[i].text);
        else if (m[i].count < 0)
            fputs("null", f);
        else
            fprintf(f, "%ld", m[i].count);
    }
    fputs("},\n", f);
}

/* CUDA_VISIBLE_DEVICES as a list: entry i is the GPU this process calls device i (an index in
 * CUDA_DEVICE_ORDER, a UUID or a MIG instance). Like CUDA, the list ends at an empty entry. */
static void write_visible(FILE *f)
{
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    fputs(VT_JSON_KEY(VT_K_VISIBLE_DEVICES), f);
    if (!v) {
        fputs("null,\n", f);
        return;
    }
    fputc('[', f);
    for (int first = 1; *v && *v != ','; first = 0) {
        size_t n = strcspn(v, ",");
        size_t lead = strspn(v, " "), end = n;
        while (end > lead && v[end - 1] == ' ')
            end--;
        fputs(first ? "" : ", ", f);
        vt_json_strn(f, v + lead, end - lead);
        v += n + (v[n] == ',');
    }
    fputs("],\n", f);
}

void vt_launcher_write_json(FILE *f)
{
    vt_launcher l;
    vt_launcher_read(&l);
    const member rank[] = {{"rank", NULL, l.rank, 0},
                           {"local_rank", NULL, l.local_rank, 0},
                           {"source", l.rank_source, 0, 1}};
    const member launcher[] = {{"name", l.name, 0, 1},
                               {"job_id", l.job_id, 0, 1},
                               {"world_size", NULL, l.world_size, 0},
                               {"local_rank", NULL, l.local_rank, 0},
                               {"slurm_job_id", l.slurm_job_id, 0, 1}};
    write_object(f, VT_K_RANK, rank, sizeof rank / sizeof rank[0]);
    write_object(f, VT_K_LAUNCHER, launcher, sizeof launcher / sizeof launcher[0]);
    write_visible(f);
}
