"""Runs tap_interim_stall (see interim_stall.c) under the library: it must finish, its own
checks must pass, and the snapshot's counters must be the program's counts. The interim file
is copied in steps, never with the lock held for the whole peak set (VRAMTAP_DEBUG says which):
it is written, or put off when the peak moved during the copy, and the exit file is written;
only the head of the exit file, where the counters are, is read: the file lists a million
allocations.

usage: interim_stall.py PROGRAM CTOR_LIB

A ThreadSanitizer build runs it with 100k live allocations (1M take six minutes there).
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

prog, lib = sys.argv[1:]
out = tempfile.mkdtemp(prefix="vt-stall-")
env = dict(os.environ, LD_PRELOAD=os.environ["VT_PRELOAD"], VRAMTAP_OUT=out, VRAMTAP_DEBUG="1",
           LD_LIBRARY_PATH=os.environ["VT_STANDIN_DIR"])
failures = []
try:
    live = ["100000"] if "thread" in os.environ.get("VT_SANITIZE", "") else []
    p = subprocess.run([prog, lib] + live, env=env, capture_output=True, text=True, timeout=1200)
except subprocess.TimeoutExpired:
    sys.exit("FAIL: did not finish in 1200 s (deadlock)")
print(p.stderr.splitlines()[-1] if p.stderr else "")
if p.returncode != 0:
    failures.append("exit %d\n%s" % (p.returncode, p.stderr[-3000:]))
else:
    want = dict((k, int(v)) for k, v in (l.split() for l in p.stdout.splitlines()))
    snaps = glob.glob(os.path.join(out, "vramtap.*.json"))
    lines = p.stderr.splitlines()
    wrote = [l for l in lines if re.search(r"vramtap: wrote .*\.json$", l)]
    put_off = [l for l in lines if "interim snapshot put off" in l]
    at_once = [l for l in lines if "copying the books at once" in l]
    if at_once:
        failures.append("the books were copied with the lock held throughout: %s" % at_once)
    if len(snaps) != 1 or len(wrote) + len(put_off) != 2 or len(put_off) > 1:
        failures.append("%d snapshots, %d written, %d put off (interim and exit expected)"
                        % (len(snaps), len(wrote), len(put_off)))
    else:
        # the compact file's head is JSON text
        with open(snaps[0], "rb") as f:
            head = f.read(1 << 16).decode("utf-8", "replace")
        counters = json.loads(re.search(r'"counters": (\{[^}]*\})', head).group(1))
        for k, v in want.items():
            if counters[k] != v:
                failures.append("counter %s: %d, expected %d" % (k, counters[k], v))
        if '"kind": "exit"' not in head:
            failures.append("the last file written is not the exit snapshot")
for f in failures:
    print("FAIL:", f)
if not failures:  # a million allocations' files: kept only to look into a failure
    shutil.rmtree(out, ignore_errors=True)
sys.exit(1 if failures else 0)
