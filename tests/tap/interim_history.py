"""Runs tap_interim_history (see interim_history.c) under the library and reads the interim
snapshot it copied aside: copied in steps (VRAMTAP_DEBUG says it was not copied at once), its
history lists every allocation made after the peak with its address and size; one whose free
the history shows was freed by the program; and some the program freed while the copy ran are
shown alive, as they were when it began (without them the test proves nothing, and says so);
and a post-mortem written at once in the middle of the copy (an allocation made to fail) does
not stop it saving what dies ahead of it.

usage: interim_history.py PROGRAM"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

PEAK, LATE = 100000, 40000

prog = sys.argv[1]
out = tempfile.mkdtemp(prefix="vt-interim-history-")
env = dict(os.environ, LD_PRELOAD=os.environ["VT_PRELOAD"], VRAMTAP_OUT=out, VRAMTAP_DEBUG="1",
           LD_LIBRARY_PATH=os.environ["VT_STANDIN_DIR"])
failures = []
p = subprocess.run([prog, str(PEAK), str(LATE)], env=env, capture_output=True, text=True,
                   timeout=600)
if p.returncode != 0:
    failures.append("exit %d\n%s" % (p.returncode, p.stderr[-3000:]))
else:
    if any("copying the books at once" in l and "post-mortem" not in l
           for l in p.stderr.splitlines()):
        failures.append("the interim file was copied at once, not in steps")
    made = {}
    failed_alloc, waits = False, 0
    for line in p.stdout.splitlines():
        w = line.split()
        if w[0] == "A":
            made[int(w[1], 16)] = (int(w[2]), w[3] == "1")
        elif w[0] == "FAILED":
            failed_alloc = w[1] == "1"
        elif w[0] == "WAITS":
            waits = int(w[1])
    if not failed_alloc or not glob.glob(os.path.join(out, "vramtap.*.oom1.json")):
        failures.append("no post-mortem was written while the interim file was (%d frees waited "
                        "for the lock)" % waits)
    copies = glob.glob(os.path.join(out, "interim.*.copy"))
    if len(copies) != 1:
        failures.append("interim copies: %s" % copies)
    else:
        doc = json.loads(subprocess.run([os.environ["VT_CLI"], "export", "--json", copies[0]],
                                        capture_output=True, text=True, check=True).stdout)
        listed = doc.get("history_allocations", [])
        hist = {int(a["address"], 16): a for a in listed if a["address"] is not None}
        if len(hist) != len(listed):
            failures.append("%d allocations of the history without an address (their births "
                            "were lost)" % (len(listed) - len(hist)))
        missing = wrong = dead_unfreed = 0
        alive_freed = dead_freed = 0
        for addr, (size, was_freed) in made.items():
            a = hist.get(addr)
            if a is None:
                missing += 1
            elif a["size"] != size:
                wrong += 1
            elif a["death_seq"] is not None:
                dead_unfreed += not was_freed
                dead_freed += was_freed
            else:
                alive_freed += was_freed
        print("%d allocations after the peak, %d freed by the program: the history shows %d of "
              "them dead, %d alive (freed while the copy ran)"
              % (len(made), sum(f for _, f in made.values()), dead_freed, alive_freed))
        if len(made) != LATE:
            failures.append("the program listed %d allocations, expected %d" % (len(made), LATE))
        if missing or wrong or dead_unfreed:
            failures.append("in the history: %d missing, %d of another size, %d dead but never "
                            "freed" % (missing, wrong, dead_unfreed))
        if not alive_freed:
            failures.append("no allocation was freed while the copy ran: nothing was tested "
                            "(a loaded machine?)")
for f in failures:
    print("FAIL:", f)
if not failures:
    shutil.rmtree(out, ignore_errors=True)
sys.exit(1 if failures else 0)
