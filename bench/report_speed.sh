#!/usr/bin/env bash
# Times `vramtap report` on a synthetic snapshot with 200k allocations live at the peak and 50k
# distinct sites (issue 4, item 8: under 1 s on the project's 2-core machine). Prints the best,
# median and worst wall time; no pass or fail, the figure goes in the closing note.
#
#   bench/report_speed.sh [BUILD_DIR [RUNS [DEPTH]]]     defaults: build 5 12
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${2:-5}
depth=${3:-12}
gen=$build/tests/cli/gen_snapshot
cli=$build/src/cli/vramtap
if [ ! -x "$gen" ] || [ ! -x "$cli" ]; then
    echo "report_speed.sh: build first: meson compile -C $build" >&2
    exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$gen" --allocs 200000 --sites 50000 --depth "$depth" "$tmp/big.json"
echo "snapshot: 200000 allocations, 50000 sites of $depth frames, $(($(stat -c %s "$tmp/big.json") / 1048576)) MiB;" \
    "$(nproc) CPUs"
"$cli" report "$tmp/big.json" >/dev/null # the file is now in the page cache
for _ in $(seq "$runs"); do
    start=$(date +%s%N)
    "$cli" report "$tmp/big.json" >/dev/null
    end=$(date +%s%N)
    echo $(((end - start) / 1000000))
done | sort -n | awk '{ t[NR] = $1 }
    END { printf "vramtap report: best %d ms, median %d ms, worst %d ms over %d runs\n",
          t[1], t[int((NR + 1) / 2)], t[NR], NR }'
