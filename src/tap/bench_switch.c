/* Only in a library built with -Dbench_switch=true, as scripts/bench builds its own: recording
 * turned off and on while the program runs, so that bench/pair_chunks can time chunks of pairs
 * with and without it in turns, in one process (docs/validation/overhead.md). With it off the
 * wrappers pass every call through, as with VRAMTAP_DISABLE=1. A library anyone profiles with
 * has no such symbol. */
#include "tap.h"

VT_EXPORT void vt_bench_record(int on)
{
    vt_cfg.disabled = !on;
}
