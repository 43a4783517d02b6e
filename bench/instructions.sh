#!/usr/bin/env bash
# Instructions vramtap adds, counted by callgrind: unlike time on a shared machine (where the
# same binary's pair runs at 210 or 330 ns), a count repeats to within a few instructions, so it
# shows what a change took away. `scripts/bench instr` runs it over its release build:
#   - a cudaMallocAsync + cudaFreeAsync pair with 1,000 allocations live, stacks off: plain, with
#     vramtap, and what vramtap adds (bench/alloc_pair's worker(), two runs of 10,000 and 20,000
#     pairs, and their difference over the 20,000 pairs between them, warm-up included);
#   - the same under a 40-frame call chain with native stacks at depth 32, over stacks off;
#   - an allocation of the ramp to 100,000 then 200,000 live (the difference over 100,000);
#   - where /usr/bin/python3 has torch: an outermost module call and a Sequential of 10 (one
#     outermost and 10 nested calls) under `vramtap run`, with the module-call wrapper and with
#     the function it wraps (bench/module_calls.py; 1,000 and 3,000 calls, the difference over
#     2,000), PYTHONHASHSEED=0 and no address randomisation (setarch -R), so that two runs of one
#     build agree.
# usage: bench/instructions.sh BUILD_DIR
set -eu
dir=${1:?usage: bench/instructions.sh BUILD_DIR}
command -v valgrind >/dev/null || { echo "instructions: valgrind is not installed (Debian package valgrind): no rows"; exit 0; }
lib=$PWD/$dir/src/tap/libvramtap.so
exe=$PWD/$dir/bench/alloc_pair
export LD_LIBRARY_PATH=$PWD/$dir/tests/standin
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export VRAMTAP_OUT=$out VRAMTAP_QUIET=1

# The command that runs valgrind (empty: valgrind itself), e.g. `vramtap run`.
launch=()
# count FUNCTION ENV... -- COMMAND...: instructions callgrind counts inside FUNCTION (all of the
# program when FUNCTION is -).
count() {
    local fn=$1 envs=()
    shift
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    local opt=()
    [ "$fn" = - ] || opt=(--toggle-collect="$fn")
    env "${envs[@]}" "${launch[@]}" valgrind --tool=callgrind "${opt[@]}" \
        --callgrind-out-file="$out/cg" "$@" >/dev/null 2>&1
    sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$out/cg"
    rm -f "$out"/cg "$out"/*.json
}
# per FUNCTION DIVISOR ENV... -- COMMAND_A -- COMMAND_B: (count of B - count of A) / DIVISOR
per() {
    local fn=$1 div=$2 envs=() a=() b=()
    shift 2
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    while [ "$1" != "--" ]; do a+=("$1"); shift; done
    shift
    b=("$@")
    local ca cb
    ca=$(count "$fn" "${envs[@]}" -- "${a[@]}")
    cb=$(count "$fn" "${envs[@]}" -- "${b[@]}")
    echo "($cb - $ca) / $div" | bc -l
}
line() { # LABEL PLAIN VRAMTAP UNIT
    printf '%-48s %9.1f instr/%s  (plain %.1f, +%.1f)\n' "$1" "$3" "$4" "$2" \
        "$(echo "$3 - $2" | bc -l)"
}

pair() { per worker 20000 "$@" -- "$exe" 1 "$chain" 10000 1000 -- "$exe" 1 "$chain" 20000 1000; }
chain=0
line "pair, 1 thread, 1000 live, stacks off" "$(pair X=1)" \
    "$(pair LD_PRELOAD="$lib" VRAMTAP_STACKS=0)" pair
chain=40
line "pair, 40-frame chain, stacks depth 32" "$(pair LD_PRELOAD="$lib" VRAMTAP_STACKS=0)" \
    "$(pair LD_PRELOAD="$lib" VRAMTAP_DEPTH=32)" pair
echo "  (the plain column: the same pair with stacks off)"
ramp() { per main 100000 "$@" -- "$exe" 1 0 1 100000 -- "$exe" 1 0 1 200000; }
line "ramp, 100,000 to 200,000 live, stacks off" "$(ramp X=1)" \
    "$(ramp LD_PRELOAD="$lib" VRAMTAP_STACKS=0)" allocation

if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    echo "module calls: no torch for /usr/bin/python3 (Debian package python3-torch): no rows"
    exit 0
fi
launch=(setarch -R "$PWD/$dir/src/cli/vramtap" run --)
calls() { # on|off outer|nested
    per - 2000 PYTHONHASHSEED=0 VRAMTAP_LIB="$lib" -- /usr/bin/python3 bench/module_calls.py 1000 \
        "$1" "$2" -- /usr/bin/python3 bench/module_calls.py 3000 "$1" "$2"
}
line "module call, outermost (nn.Identity)" "$(calls off outer)" "$(calls on outer)" call
line "module call, Sequential of 10 nn.Identity" "$(calls off nested)" "$(calls on nested)" call
echo "  (the plain column: the same calls under vramtap run with the wrapper swapped out)"
