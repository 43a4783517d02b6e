/* Shared by the fuzz targets: libFuzzer's entry point, a scratch folder for the files the readers
 * open by name, and the checks every target makes. Built with libFuzzer's main by clang, or with
 * replay.c's main (every file named on the command line, once) by any compiler. */
#ifndef VT_FUZZ_H
#define VT_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The path of a scratch file named `name` (created once per process). */
const char *vt_fuzz_path(const char *name);
/* Writes data to the scratch file `name` and returns its path. */
const char *vt_fuzz_file(const char *name, const uint8_t *data, size_t size);
/* Stops the run (a crash libFuzzer records) with the reason on stderr. */
void vt_fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* A failed read must say why in one line, as the command prints it. */
void vt_fuzz_check_err(int rc, const vt_err *err);
/* What `vramtap import` does after a successful read: write the snapshot; a snapshot the
 * importer writes must load in `vramtap report`. */
void vt_fuzz_write_and_reload(const vt_replay *rp);

#endif
