/* What the library says on stderr at exit: one line per file written, with the device's peak and
 * phase and the command that reads it; "nothing seen" only from the process the user started
 * (children that inherit the preload and allocate nothing stay silent); VRAMTAP_QUIET=1 says
 * nothing (warnings stay); an unusable VRAMTAP_OUT is said at start and the snapshot lands in
 * the working directory (said at exit).
 *
 *   tap_notices alloc     1 MiB in a forward phase, after two children that allocate nothing
 *   tap_notices none      no allocation at all, one silent child
 *   tap_notices unusable  as alloc, run with VRAMTAP_OUT=/nonexistent/out
 */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "vramtap.h"

/* A child of the same image that exits normally (its destructors run), and one that execs a
 * program that loads the preload again. */
static void silent_children(void)
{
    pid_t a = fork();
    if (a == 0)
        exit(0);
    pid_t b = fork();
    if (b == 0) {
        execl("/bin/true", "true", (char *)NULL);
        _exit(127);
    }
    int st;
    CHECK_EQ_INT(waitpid(a, &st, 0), a);
    CHECK_EQ_INT(waitpid(b, &st, 0), b);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(int argc, char **argv)
{
    const char *quiet = getenv("VRAMTAP_QUIET");
    int said = !(quiet && !strcmp(quiet, "1"));
    int unusable = argc > 1 && !strcmp(argv[1], "unusable");
    if (unusable) {
        /* the programs it starts write where it writes */
        char cwd[4096];
        CHECK(getcwd(cwd, sizeof cwd) != NULL);
        CHECK_EQ_STR(getenv("VRAMTAP_OUT"), cwd);
    }
    silent_children();
    if (argc > 1 && !strcmp(argv[1], "none")) {
        printf("EXPECT no_snapshot\n");
        printf("EXPECT stderr ^vramtap: %d\n", said);
        printf("EXPECT stderr ^vramtap:.no.CUDA.device.allocation.seen.in.tap_notices.\\(pid.%d\\)"
               ":.no.snapshot.written$ %d\n",
               (int)getpid(), said);
        return CHECK_DONE();
    }
    void *p;
    vramtap_begin(VRAMTAP_FORWARD);
    CHECK_EQ_INT(cudaMalloc(&p, 1 << 20), cudaSuccess);
    vramtap_end(VRAMTAP_FORWARD);
    CHECK_EQ_INT(cudaFree(p), cudaSuccess);
    printf("EXPECT peak 0 1048576\n");
    printf("EXPECT stderr ^vramtap: %d\n", said + unusable);
    printf("EXPECT stderr ^vramtap:.snapshot.written,.cuda:0.peak.1.00.MiB.in.forward.of.step.0%s;"
           ".to.read.it:.vramtap.report./.*/vramtap\\.tap_notices\\.[^/]*\\.%d\\.json$ %d\n",
           unusable ? ".\\(VRAMTAP_OUT.was.unusable:.in.the.working.directory\\)" : "",
           (int)getpid(), said);
    printf("EXPECT stderr ^vramtap:.VRAMTAP_OUT=/nonexistent/out:.No.such.file.or.directory;"
           ".snapshots.go.to.the.working.directory.\\(/.*\\).instead$ %d\n",
           unusable);
    return CHECK_DONE();
}
