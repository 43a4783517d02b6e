/* Tests that read STANDIN_LOG: a fresh log file per run, read back as lines. */
#ifndef STANDIN_TEST_LOG_H
#define STANDIN_TEST_LOG_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { LOG_MAX_LINES = 1024 };

static char log_path[64];

/* Must run before the first CUDA call: the stand-ins read STANDIN_LOG as they log. */
static void log_start(void)
{
    strcpy(log_path, "/tmp/standin-log-XXXXXX");
    int fd = mkstemp(log_path);
    if (fd < 0) {
        perror("mkstemp");
        exit(1);
    }
    close(fd);
    setenv("STANDIN_LOG", log_path, 1);
}

/* Returns the number of lines read into lines[] (each malloc'ed, without its newline). */
static int log_read(char **lines)
{
    FILE *f = fopen(log_path, "r");
    if (!f)
        return 0;
    int n = 0;
    char buf[1024];
    while (n < LOG_MAX_LINES && fgets(buf, sizeof buf, f)) {
        buf[strcspn(buf, "\n")] = 0;
        lines[n++] = strdup(buf);
    }
    fclose(f);
    unlink(log_path);
    return n;
}

#endif
