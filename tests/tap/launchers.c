/* The launcher and rank a snapshot records. meson.build runs this under the variables srun,
 * mpirun (Open MPI, inside a Slurm allocation) and MPICH's mpiexec set, and gives the `rank` and
 * `launcher` objects the snapshot must hold as the two arguments. */
#include <cuda_runtime_api.h>

#include "check.h"

int main(int argc, char **argv)
{
    void *p;
    CHECK_EQ_INT(argc, 3);
    CHECK_EQ_INT(cudaMalloc(&p, 1 << 20), cudaSuccess);
    if (argc == 3) {
        printf("EXPECT json rank %s\n", argv[1]);
        printf("EXPECT json launcher %s\n", argv[2]);
    }
    return CHECK_DONE();
}
