"""Native frames of call chains that share their innermost frames and part ways further out
(outer_frames.c): each allocation's site names its own chain, function by function, out to
main, though a chain seen before was at the same place in the stack with the same frames up to
the program's call. Run at the default depth, and two frames deep, where the frame that tells
two chains apart is the last one kept.

usage: outer_frames.py PROGRAM
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

prog = sys.argv[1]
failures = []


def run(depth):
    """One run with stacks `depth` deep (None: the default); checks each allocation's site."""
    out = tempfile.mkdtemp(prefix="vt-outer-")
    env = dict(os.environ, LD_PRELOAD=os.environ["VT_PRELOAD"], VRAMTAP_OUT=out,
               LD_LIBRARY_PATH=os.environ["VT_STANDIN_DIR"])
    if depth:
        env["VRAMTAP_DEPTH"] = str(depth)
    p = subprocess.run([prog], env=env, capture_output=True, text=True, timeout=300)
    snaps = glob.glob(os.path.join(out, "vramtap.*.json"))
    if p.returncode != 0 or len(snaps) != 1:
        failures.append("depth %s: exit %d, %d snapshots: %s"
                        % (depth, p.returncode, len(snaps), p.stderr))
        return
    want = {int(size): chain.split(",")[:depth]
            for size, chain in (l.split() for l in p.stdout.splitlines())}
    doc = json.loads(subprocess.check_output([os.environ["VT_CLI"], "export", "--json",
                                              snaps[0]]))
    shutil.rmtree(out, ignore_errors=True)
    got = {}
    for a in doc["allocations"]:
        if a["size"] in want and a["site"] is not None:
            got[a["size"]] = [f.get("symbol") for f in doc["sites"][a["site"]]["frames"]]
    for size, chain in sorted(want.items()):
        frames = got.get(size)
        # at a depth, the site holds that many frames exactly
        if frames is None or (frames if depth else frames[:len(chain)]) != chain:
            failures.append("depth %s, %d bytes: frames %s, expected %s%s"
                            % (depth, size, frames, chain, "" if depth else " first"))
    print("depth %s: %d allocations, %d distinct sites" % (depth, len(want), len(
        {a["site"] for a in doc["allocations"] if a["size"] in want})))


run(None)
# Two frames deep, the last frame kept is the one that tells near_a's chain from near_b's.
run(2)
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
