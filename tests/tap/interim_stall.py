"""Runs tap_interim_stall (see interim_stall.c) under the library, with a thread that dlopens
beside the one that allocates and, in a plain build, again with one that allocates without a
pause, and once more so with a post-mortem written in place of the interim file: each must
finish, its own checks must pass (among them its longest wait), the copy's longest hold of the
lock (VRAMTAP_DEBUG) must be short, and the snapshot's counters must be the program's counts.
The file is copied in steps, never with the lock held for the whole peak set or live set
(VRAMTAP_DEBUG says which): the interim file is written, or put off when the peak moved during
the copy, the post-mortem written, and the exit file is written; only the head of the exit file,
where the counters are, is read: the file lists a million allocations.

usage: interim_stall.py PROGRAM CTOR_LIB

A ThreadSanitizer build runs it with 100k live allocations (1M take six minutes there).
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

from runs import finish

prog, lib = sys.argv[1:]
sanitized = os.environ.get("VT_SANITIZE", "none") != "none"
# The longest hold of the lock by the copy, in CPU time (a step takes half a millisecond here;
# holding the whole history at once took 9 to 48): not held to a bound under ThreadSanitizer,
# which slows every access tenfold and more.
HOLD_MS = {"none": 5, "address,undefined": 15}.get(os.environ.get("VT_SANITIZE", "none"), 0)
failures = []
outs = []


def run(what):
    """One run: what is the constructor's library, or "-" for the thread that never pauses."""
    out = tempfile.mkdtemp(prefix="vt-stall-")
    outs.append(out)
    env = dict(os.environ, LD_PRELOAD=os.environ["VT_PRELOAD"], VRAMTAP_OUT=out,
               VRAMTAP_DEBUG="1", LD_LIBRARY_PATH=os.environ["VT_STANDIN_DIR"])
    live = ["100000"] if "thread" in os.environ.get("VT_SANITIZE", "") else []
    try:
        p = subprocess.run([prog, what] + live, env=env, capture_output=True, text=True,
                           timeout=1200)
    except subprocess.TimeoutExpired:
        sys.exit("FAIL: did not finish in 1200 s (deadlock)")
    label = {"-": "no pause", "oom": "post-mortem"}.get(what, "dlopen")
    print("%s: %s" % (label, " ".join(l for l in p.stderr.splitlines() if l.startswith("write "))))
    if p.returncode != 0:
        failures.append("%s: exit %d\n%s" % (label, p.returncode, p.stderr[-3000:]))
        return
    want = dict((k, int(v)) for k, v in (l.split() for l in p.stdout.splitlines()))
    snaps = [s for s in glob.glob(os.path.join(out, "vramtap.*.json")) if ".oom" not in s]
    posts = glob.glob(os.path.join(out, "vramtap.*.oom1.json"))
    if len(posts) != (what == "oom"):
        failures.append("%s: post-mortems %s" % (label, posts))
    lines = p.stderr.splitlines()
    wrote = [l for l in lines if re.search(r"vramtap: wrote .*\.json$", l)]
    put_off = [l for l in lines if "interim snapshot put off" in l]
    at_once = [l for l in lines if "copying the books at once" in l]
    if at_once:
        failures.append("%s: the books were copied with the lock held throughout: %s"
                        % (label, at_once))
    holds = [float(m.group(1)) for m in
             (re.search(r"the longest ([0-9.]+) ms of CPU time", l) for l in lines) if m]
    if not holds:
        failures.append("%s: VRAMTAP_DEBUG said nothing of the copy's holds of the lock" % label)
    elif HOLD_MS and max(holds) > HOLD_MS:
        failures.append("%s: a copy held the lock %.3f ms of CPU time at once (at most %g: a "
                        "step is a few thousand records or 8,192 units of the history)"
                        % (label, max(holds), HOLD_MS))
    if len(snaps) != 1 or len(wrote) + len(put_off) != 2 or len(put_off) > 1:
        failures.append("%s: %d snapshots, %d written, %d put off (interim and exit expected)"
                        % (label, len(snaps), len(wrote), len(put_off)))
        return
    # the compact file's head is JSON text
    with open(snaps[0], "rb") as f:
        head = f.read(1 << 16).decode("utf-8", "replace")
    counters = json.loads(re.search(r'"counters": (\{[^}]*\})', head).group(1))
    for k, v in want.items():
        if counters[k] != v:
            failures.append("%s: counter %s: %d, expected %d" % (label, k, counters[k], v))
    if '"kind": "exit"' not in head:
        failures.append("%s: the last file written is not the exit snapshot" % label)


run(lib)
# A thread that never pauses waits for every hold of the lock; under a sanitizer the ratio is
# not checked (interim_stall.c), and the run would only take time.
if not sanitized:
    run("-")
    run("oom")
finish(failures, outs)  # a million allocations' files: kept only to look into a failure
