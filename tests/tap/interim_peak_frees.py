"""Runs tap_interim_peak_frees (see interim_peak_frees.c) under the library and reads the
interim snapshot it copied aside, copied in steps while the program freed allocations of the
peak set ahead of the copy: every allocation made is listed (all were live at the peak); one
the file shows dead was freed by the program, and its free is among the file's history events
(the history as of the copy's first hold, the moment the file shows), and one shown alive has
no free there; some the program freed
while the copy ran are shown alive, as they were at that moment (without them the test proves
nothing: it runs again, up to 5 times in all, before it says so).

usage: interim_peak_frees.py PROGRAM"""
import glob
import os
import sys

from runs import export_json, finish, run_debug, until_tested

MADE = 100000
# Under ThreadSanitizer the step mark takes so long to begin its copy that frees 5 µs apart are
# all done before it.
GAP_US = 50 if "thread" in os.environ.get("VT_SANITIZE", "") else 5

prog = sys.argv[1]
failures = []
outs = []


def run():
    """One run; its failures appended. Returns whether it tested what it is for: some
    allocations freed while the copy ran."""
    out, p = run_debug(prog, [MADE, GAP_US], "vt-interim-peak-frees-", outs)
    if p.returncode != 0:
        failures.append("exit %d\n%s" % (p.returncode, p.stderr[-3000:]))
        return False
    if any("copying the books at once" in l for l in p.stderr.splitlines()):
        failures.append("the interim file was copied at once, not in steps")
    made = {}
    interim = False
    for line in p.stdout.splitlines():
        w = line.split()
        if w[0] == "INTERIM":
            interim = w[1] == "1"
        elif w[0] == "A":
            made[int(w[1], 16)] = w[2] == "1"
    copies = glob.glob(os.path.join(out, "interim.*.copy"))
    if not interim or len(copies) != 1:
        failures.append("no interim file copied: %s" % copies)
        return False
    doc = export_json(copies[0])
    listed = {int(a["address"], 16): a for a in doc["allocations"]}
    freed_ids = {e[1] for e in doc.get("history_events", []) if e[2] < 0}
    missing = dead_unfreed = dead_later = alive_gone = 0
    alive_freed = dead_freed = 0
    for addr, was_freed in made.items():
        a = listed.get(addr)
        if a is None:
            missing += 1
        elif a["death_seq"] is not None:
            dead_unfreed += not was_freed
            dead_later += a["id"] not in freed_ids
            dead_freed += was_freed
        else:
            alive_freed += was_freed
            alive_gone += a["id"] in freed_ids
    print("%d allocations at the peak, %d freed by the program: the file shows %d of them dead, "
          "%d alive (freed while the copy ran)"
          % (len(made), sum(made.values()), dead_freed, alive_freed))
    if len(made) != MADE or len(listed) != MADE:
        failures.append("the program listed %d allocations and the file %d, expected %d"
                        % (len(made), len(listed), MADE))
    if missing or dead_unfreed or dead_later or alive_gone:
        failures.append("%d missing, %d dead but never freed, %d dead whose free is not in the "
                        "file's history (freed after the moment the file shows), %d alive whose "
                        "free is in it" % (missing, dead_unfreed, dead_later, alive_gone))
    return bool(alive_freed)


# Every run's file must be right; one run at least must have had frees while the copy ran.
until_tested(run, failures, "none had allocations freed while the copy ran")
finish(failures, outs)
