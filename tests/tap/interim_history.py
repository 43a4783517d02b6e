"""Runs tap_interim_history (see interim_history.c) under the library and reads the interim
snapshot it copied aside: copied in steps (VRAMTAP_DEBUG says it was not copied at once), its
history lists every allocation made after the peak with its address and size; one whose free
the history shows was freed by the program; and some the program freed while the copy ran are
shown alive, as they were when it began (without them the test proves nothing, and says so);
and a post-mortem written at once in the middle of the copy (an allocation made to fail) does
not stop it saving what dies ahead of it. A run in which nothing was freed while the copy ran,
or no post-mortem was written during it, or the post-mortem came first and the interim file was
put off for it, tested nothing: it runs again, up to 5 times in all, before the test says so.

usage: interim_history.py PROGRAM"""
import glob
import os
import sys

from runs import export_json, finish, run_debug, until_tested

PEAK, LATE = 100000, 40000
# Under ThreadSanitizer the step mark takes so long to begin its copy that frees 5 µs apart are
# all done before it, and the allocation meant to fail, at the second free that waited for the
# lock or 3 ms on, comes first: slower there, and later.
GAP_US, WAIT_MS, NTH = ((50, 1000, 10) if "thread" in os.environ.get("VT_SANITIZE", "")
                        else (5, 3, 2))

prog = sys.argv[1]
failures = []
outs = []


def run():
    """One run; its failures appended. Returns whether it tested what it is for: some
    allocations freed while the copy ran, and a post-mortem written in the middle of it (on two
    busy cores the other threads may not run while the copy does)."""
    out, p = run_debug(prog, [PEAK, LATE, GAP_US, WAIT_MS, NTH], "vt-interim-history-", outs)
    if p.returncode != 0:
        failures.append("exit %d\n%s" % (p.returncode, p.stderr[-3000:]))
        return False
    if any("copying the books at once" in l and "post-mortem" not in l
           for l in p.stderr.splitlines()):
        failures.append("the interim file was copied at once, not in steps")
    made = {}
    failed_alloc, waits, interim = False, 0, True
    for line in p.stdout.splitlines():
        w = line.split()
        if w[0] == "INTERIM":
            interim = w[1] == "1"
        elif w[0] == "A":
            made[int(w[1], 16)] = (int(w[2]), w[3] == "1")
        elif w[0] == "FAILED":
            failed_alloc = w[1] == "1"
        elif w[0] == "WAITS":
            waits = int(w[1])
    post_mortem = failed_alloc and glob.glob(os.path.join(out, "vramtap.*.oom1.json"))
    if not interim:
        # the allocation failed before the copy began: its post-mortem, copied in steps, was
        # under way at the step mark, which put the interim file off (the next mark writes it)
        if post_mortem and any("interim snapshot put off" in l for l in p.stderr.splitlines()):
            print("the post-mortem came first; the interim file was put off")
        else:
            failures.append("no interim file, and not put off for a post-mortem")
        return False
    copies = glob.glob(os.path.join(out, "interim.*.copy"))
    if len(copies) != 1:
        failures.append("interim copies: %s" % copies)
        return False
    doc = export_json(copies[0])
    listed = doc.get("history_allocations", [])
    hist = {int(a["address"], 16): a for a in listed if a["address"] is not None}
    if len(hist) != len(listed):
        failures.append("%d allocations of the history without an address (their births were "
                        "lost)" % (len(listed) - len(hist)))
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
    print("%d allocations after the peak, %d freed by the program: the history shows %d of them "
          "dead, %d alive (freed while the copy ran); a post-mortem during the copy: %s (%d frees "
          "waited for the lock)"
          % (len(made), sum(f for _, f in made.values()), dead_freed, alive_freed,
             "yes" if post_mortem else "no", waits))
    if len(made) != LATE:
        failures.append("the program listed %d allocations, expected %d" % (len(made), LATE))
    if missing or wrong or dead_unfreed:
        failures.append("in the history: %d missing, %d of another size, %d dead but never freed"
                        % (missing, wrong, dead_unfreed))
    return bool(alive_freed and post_mortem)


# Every run's files must be right; one run at least must have tested both things.
until_tested(run, failures, "none had both allocations freed while the copy ran and a "
             "post-mortem in the middle of it")
finish(failures, outs)
