#ifndef VT_CLI_SUPERVISE_H
#define VT_CLI_SUPERVISE_H

/* Runs argv as a child with the environment as it is, passes on the signals vramtap is sent,
 * and returns the job's exit status (128+N when signal N ended it, having said which, whether
 * the kernel's OOM killer sent it, and which snapshot the job left); 2 when it cannot start. */
int vt_supervise(char **argv);

#endif
