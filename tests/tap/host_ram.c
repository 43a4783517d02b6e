/* Host RAM beside device memory: a forked worker holding 96 MiB of its own, then 256 MiB of
 * pageable memory loaded (touched) before the first device allocation, whose new peak is
 * sampled; both gone before exit, so only the high-water mark and the samples remember them.
 * usage: tap_host_ram; prints "LOAD WORKER_PID WORKER_BYTES". */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

enum { LOAD = 256 << 20, WORKER = 96 << 20 };

/* A data-loader worker: its own memory, alive until told to go. */
static pid_t start_worker(int *go)
{
    int ready[2], quit[2];
    if (pipe(ready) || pipe(quit))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(quit[1]); /* so that the parent's close is an end of file here */
        char *mine = malloc(WORKER);
        if (!mine)
            _exit(3);
        memset(mine, 2, WORKER);
        char c = 1;
        if (write(ready[1], &c, 1) != 1 || read(quit[0], &c, 1) < 0)
            _exit(4);
        _exit(mine[WORKER - 1] == 2 ? 0 : 5);
    }
    close(quit[0]);
    close(ready[1]);
    char c;
    if (pid < 0 || read(ready[0], &c, 1) != 1)
        return -1;
    close(ready[0]);
    *go = quit[1];
    return pid;
}

int main(void)
{
    int go = -1;
    pid_t worker = start_worker(&go);
    CHECK(worker > 0);
    char *checkpoint = malloc(LOAD);
    CHECK(checkpoint != NULL);
    if (worker <= 0 || !checkpoint)
        return CHECK_DONE();
    memset(checkpoint, 1, LOAD);
    void *p;
    CHECK_EQ_INT(cudaMalloc(&p, 1 << 20), cudaSuccess);
    CHECK_EQ_INT(cudaFree(p), cudaSuccess);
    close(go);
    int status = -1;
    CHECK_EQ_INT(waitpid(worker, &status, 0), worker);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    long sum = 0;
    for (size_t i = 0; i < LOAD; i += 4096)
        sum += checkpoint[i];
    free(checkpoint);
    CHECK_EQ_INT(sum, LOAD / 4096);
    printf("%d %d %d\n", LOAD, (int)worker, WORKER);
    return CHECK_DONE();
}
