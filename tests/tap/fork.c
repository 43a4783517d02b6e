/* A forked child starts with empty books, its allocation history included (whose pages it
 * shares with its parent until written), and writes its own snapshot only if it allocates. */
#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

int main(void)
{
    void *a, *b;
    CHECK_EQ_INT(cudaMalloc(&a, 4096), cudaSuccess);
    printf("EXPECT at_peak 0 %p 4096 cudaMalloc\nEXPECT peak 0 4096\n", a);
    fflush(stdout);

    pid_t child = fork();
    if (child == 0) {
        if (cudaMalloc(&b, 8192) != cudaSuccess)
            _exit(3);
        printf("EXPECT pid=%d at_peak 0 %p 8192 cudaMalloc\n", (int)getpid(), b);
        printf("EXPECT pid=%d peak 0 8192\nEXPECT pid=%d counter allocs 1\n", (int)getpid(),
               (int)getpid());
        /* The parent's allocation is not the child's to free. */
        printf("EXPECT pid=%d counter unknown_frees 1\n", (int)getpid());
        printf("EXPECT pid=%d history 0 sizes +8192\nEXPECT pid=%d history dropped 0\n",
               (int)getpid(), (int)getpid());
        cudaFree(a);
        exit(0);
    }
    int status;
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    pid_t idle = fork();
    if (idle == 0)
        exit(0);
    waitpid(idle, &status, 0);
    printf("EXPECT pid=%d no_snapshot\n", (int)idle);
    printf("EXPECT counter allocs 1\nEXPECT counter unknown_frees 0\n");
    printf("EXPECT history 0 sizes +4096\nEXPECT history dropped 0\n");
    return CHECK_DONE();
}
