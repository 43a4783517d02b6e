/* The snapshot file's top-level keys, one list for everything that writes or reads one: the
 * library's writer (src/tap/snapshot.c and the files it hands parts of the document to), the
 * command's reader (src/cli/read/load.c) and its writer of imported snapshots
 * (src/cli/import/snapshot_write.c). A new key is added here first and documented in
 * docs/snapshot-format.md: tests/cli/check_schema.py fails on a key a file holds that is not
 * here, and on a key here that the format's documentation does not describe. */
#ifndef VT_SNAPSHOT_KEYS_H
#define VT_SNAPSHOT_KEYS_H

#define VT_SNAPSHOT_FORMAT "vramtap-snapshot"
/* Readers refuse a file of a later version; additions that old readers can skip keep it. */
#define VT_SNAPSHOT_VERSION 1

#define VT_K_FORMAT "format"
#define VT_K_VERSION "version"
#define VT_K_KIND "kind" /* "exit", "interim", "oom" or "import" */
#define VT_K_VRAMTAP_VERSION "vramtap_version"
#define VT_K_PID "pid"
#define VT_K_PROG "prog"
#define VT_K_COMMAND "command"
#define VT_K_START_UNIX "start_unix"
#define VT_K_END_TIME_S "end_time_s"
#define VT_K_RANK "rank"
#define VT_K_LAUNCHER "launcher"
#define VT_K_VISIBLE_DEVICES "visible_devices"
#define VT_K_ATTACH "attach" /* "preload" or "cupti" */
#define VT_K_COVERAGE "coverage"
#define VT_K_ENV "env"
#define VT_K_ENV_SET "env_set"
#define VT_K_MODES "modes"
#define VT_K_PHASE_MARKERS "phase_markers"
#define VT_K_STEPS "steps"
#define VT_K_STACKS "stacks"
#define VT_K_COUNTERS "counters"
#define VT_K_BOUNDS "bounds"
#define VT_K_DEVICES "devices"
#define VT_K_HOST "host"
#define VT_K_HOST_RAM "host_ram"
#define VT_K_COPIES "copies"
#define VT_K_HOST_OFFLOADED "host_offloaded"
#define VT_K_ALLOCATIONS "allocations"
#define VT_K_IDENTITY "identity"
#define VT_K_RUN_RECORD "run_record"
/* A run_record key the library sets itself: how Python frames were taken, "read" (from each
 * thread's interpreter frames) or "followed" (a shadow stack kept on every Python call). */
#define VT_K_PYTHON_FRAMES "python_frames"
#define VT_K_TIMELINE "timeline"
#define VT_K_TIMELINE_SUMMARY "timeline_summary"
#define VT_K_OOM_EVENTS "oom_events"
#define VT_K_OOM "oom" /* post-mortems only */
#define VT_K_HISTORY "history"
#define VT_K_HISTORY_ALLOCATIONS "history_allocations"
#define VT_K_HISTORY_EVENTS "history_events"
#define VT_K_SITES "sites"
/* "modules": loaded ELF objects; "module_paths": nn.Module paths (docs/modules.md) */
#define VT_K_MODULES "modules"
#define VT_K_MODULE_PATHS "module_paths"
#define VT_K_IMPORT "import"   /* imported snapshots only */
#define VT_K_COMPACT "compact" /* the compact file's head only: the names its records use */

/* `"key": ` for the library's writers, which print JSON by hand. */
#define VT_JSON_KEY(k) "\"" k "\": "

#endif
