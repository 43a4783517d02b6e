"""Native frames of call chains that share their innermost frames and part ways further out
(outer_frames.c): each allocation's site names its own chain, function by function, out to
main, though a chain seen before was at the same place in the stack with the same frames up to
the program's call.

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
out = tempfile.mkdtemp(prefix="vt-outer-")
env = dict(os.environ, LD_PRELOAD=os.environ["VT_PRELOAD"], VRAMTAP_OUT=out,
           LD_LIBRARY_PATH=os.environ["VT_STANDIN_DIR"])
p = subprocess.run([prog], env=env, capture_output=True, text=True, timeout=300)
snaps = glob.glob(os.path.join(out, "vramtap.*.json"))
if p.returncode != 0 or len(snaps) != 1:
    print("FAIL: exit %d, %d snapshots: %s" % (p.returncode, len(snaps), p.stderr))
    sys.exit(1)
want = {int(size): chain.split(",") for size, chain in (l.split() for l in p.stdout.splitlines())}
doc = json.loads(subprocess.check_output([os.environ["VT_CLI"], "export", "--json", snaps[0]]))
for f in glob.glob(os.path.join(out, "*")):
    os.remove(f)
os.rmdir(out)
got = {}
for a in doc["allocations"]:
    if a["size"] in want and a["site"] is not None:
        got[a["size"]] = [f.get("symbol") for f in doc["sites"][a["site"]]["frames"]]
for size, chain in sorted(want.items()):
    frames = got.get(size)
    if frames is None or frames[:len(chain)] != chain:
        failures.append("%d bytes: frames %s, expected %s first" % (size, frames, chain))
print("%d allocations, %d distinct sites" % (len(want), len(
    {a["site"] for a in doc["allocations"] if a["size"] in want})))
for f in failures:
    print("FAIL:", f)
if not failures:  # kept only to look into a failure
    shutil.rmtree(out, ignore_errors=True)
sys.exit(1 if failures else 0)
