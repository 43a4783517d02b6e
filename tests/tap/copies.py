"""Runs tap_copies (see copies.c) under the library and checks the snapshot's copies against
the program's own account, exactly: totals, each phase and each step, by direction and host
kind, and the synchronous downloads. Every copy is counted once whichever route it took (the
runtime's copies call the driver's underneath). The forked worker's snapshot holds its one copy
and nothing of its parent's.

usage: copies.py PROGRAM
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


def expect(ok, what):
    if not ok:
        failures.append(what)


MiB = 1 << 20
out = tempfile.mkdtemp(prefix="vt-copies-")
env = dict(os.environ, LD_PRELOAD=os.environ["VT_PRELOAD"], VRAMTAP_OUT=out, VRAMTAP_QUIET="1",
           LD_LIBRARY_PATH=os.environ["VT_STANDIN_DIR"])
p = subprocess.run([prog], env=env, capture_output=True, text=True, timeout=300)
expect(p.returncode == 0, "exit %d %s" % (p.returncode, p.stderr[-2000:]))
want = json.loads(p.stdout) if p.returncode == 0 else None
snaps = {}
for path in glob.glob(os.path.join(out, "vramtap.*.json")):
    with open(path) as f:
        doc = json.load(f)
    snaps[doc["pid"]] = (path, doc)
if want:
    expect(len(snaps) == 2 and want["worker"] in snaps, "snapshots of pids %s" % sorted(snaps))
    parent = next((s for pid, s in snaps.items() if pid != want["worker"]), None)
    got = parent[1]["copies"] if parent else {}
    for key in ("total", "phases", "steps"):
        expect(got.get(key) == want["copies"][key],
               "%s:\n  got  %s\n  want %s" % (key, got.get(key), want["copies"][key]))
    expect(got.get("later_steps") is None and got.get("sites") is None,
           "later_steps %s sites %s" % (got.get("later_steps"), got.get("sites")))
    child = snaps.get(want["worker"], (None, {}))[1].get("copies", {})
    one = {"h2d": {"pageable_bytes": MiB, "pinned_bytes": 0, "pageable_calls": 1,
                   "pinned_calls": 0},
           "d2h": {"pageable_bytes": 0, "pinned_bytes": 0, "pageable_calls": 0, "pinned_calls": 0},
           "d2d": {"bytes": 0, "calls": 0}, "h2h": {"bytes": 0, "calls": 0}, "sync_d2h_calls": 0}
    expect(child.get("total") == one, "the worker's copies %s" % child.get("total"))
shutil.rmtree(out)
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
