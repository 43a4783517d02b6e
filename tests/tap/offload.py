"""Runs tap_offload (see offload.c) under the library: the snapshot's host_offloaded bills the
labelled bytes in pinned host memory by category exactly (optimizer state 512 KiB, parameters
256 KiB, a gradients range inside the parameters' counted once), and nothing of the pageable,
the registered-after-labelling, the freed or the device ranges; `vramtap report` and its --json
give the same.

usage: offload.py PROGRAM
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

prog = sys.argv[1]
cli = os.environ["VT_CLI"]
failures = []
KiB = 1024
out = tempfile.mkdtemp(prefix="vt-offload-")
env = dict(os.environ, LD_PRELOAD=os.environ["VT_PRELOAD"], VRAMTAP_OUT=out, VRAMTAP_QUIET="1",
           LD_LIBRARY_PATH=os.environ["VT_STANDIN_DIR"])
p = subprocess.run([prog], env=env, capture_output=True, text=True, timeout=120)
if p.returncode:
    failures.append("exit %d %s" % (p.returncode, p.stderr[-2000:]))
snaps = glob.glob(os.path.join(out, "vramtap.*.json"))
want = {"pinned_bytes": {"parameters": 256 * KiB, "gradients": 0, "optimizer_state": 512 * KiB,
                         "activations": 0, "temporary": 0}, "ranges": 3}
if len(snaps) != 1:
    failures.append("%d snapshots" % len(snaps))
else:
    doc = json.loads(subprocess.check_output([cli, "export", "--json", snaps[0]]))
    if doc.get("host_offloaded") != want:
        failures.append("host_offloaded %s, want %s" % (doc.get("host_offloaded"), want))
    r = subprocess.run([cli, "report", "--json", snaps[0]], capture_output=True, text=True)
    rep = json.loads(r.stdout) if r.returncode == 0 else {}
    if rep.get("host_offloaded") != want:
        failures.append("report --json host_offloaded %s" % rep.get("host_offloaded"))
    text = subprocess.run([cli, "report", snaps[0]], capture_output=True, text=True,
                          env=dict(os.environ, COLUMNS="200")).stdout
    line = next((l for l in text.splitlines() if l.startswith("  offloaded")), "")
    if not ("parameters 256.00 KiB, optimizer state 512.00 KiB" in line and
            "gradients" not in line):
        failures.append("report line %r" % line)
shutil.rmtree(out)
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
