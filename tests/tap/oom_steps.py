"""Runs tap_oom_steps (see oom_steps.c) under the library and reads its post-mortem: copied in
steps (VRAMTAP_DEBUG says so, and not "at once"), it lists the allocations live at the failure
and only those, all alive: the first k made, for some k between what was left when the failing
call began and what was left when it returned, and as many bytes as the device had live then.
Without the allocations that died while the copy ran, ahead of it, the file would list fewer
bytes than the device had live; if VRAMTAP_DEBUG says the copy took none of them so, the run
tested nothing, and it runs again, up to 5 times in all, before the test says so. Under
ThreadSanitizer 20,000 allocations are freed one every 20 µs (its failing call takes long enough
to outlast 20,000 frees 2 µs apart).

usage: oom_steps.py PROGRAM"""
import glob
import os
import re
import sys

from runs import export_json, finish, run_debug, until_tested

prog = sys.argv[1]
live, gap = (20000, 20) if "thread" in os.environ.get("VT_SANITIZE", "") else (200000, 2)
failures = []
outs = []


def run():
    """One run; its failures appended. Returns how many allocations the copy took as they died
    (0: the freeing thread did not run while the copy did, and the run tested nothing)."""
    out, p = run_debug(prog, [live, gap], "vt-oom-steps-", outs)
    posts = glob.glob(os.path.join(out, "vramtap.*.oom1.json"))
    if p.returncode != 0:
        failures.append("exit %d\n%s" % (p.returncode, p.stderr[-3000:]))
        return 0
    if len(posts) != 1:
        failures.append("post-mortems: %s" % posts)
        return 0
    said = dict(l.split() for l in p.stdout.splitlines())
    made, before, after = (int(said[k]) for k in ("made", "freed_before", "freed_after"))
    lines = p.stderr.splitlines()
    copies = [m.groups() for m in
              (re.search(r"a copy of the books in (\d+) holds.*post-mortem: (\d+) allocations", l)
               for l in lines) if m]
    if any("copying the books at once" in l for l in lines):
        failures.append("the post-mortem was copied at once, not in steps")
    if len(copies) != 1 or int(copies[0][0]) < 2:
        failures.append("VRAMTAP_DEBUG said no post-mortem copied in steps: %s" % copies)
        return 0
    doc = export_json(posts[0])
    listed = [a for a in doc["allocations"] if a["device"] == 0]
    ids = sorted(a["id"] for a in listed)
    k = len(ids)
    live_then = doc["devices"][0]["live_bytes_at_end"]
    print("%d made; %d freed when the failing call began, %d when it returned; the post-mortem "
          "lists %d (%d bytes; %s taken as they died), the device had %d bytes live"
          % (made, before, after, k, sum(a["size"] for a in listed), copies[0][1], live_then))
    if ids != list(range(1, k + 1)):
        failures.append("the allocations listed are not the first %d made: %s ... %s"
                        % (k, ids[:3], ids[-3:]))
    if any(a["death_seq"] is not None or a["size"] != 256 for a in listed):
        failures.append("an allocation listed dead or of another size")
    if sum(a["size"] for a in listed) != live_then or live_then != 256 * k:
        failures.append("%d bytes listed, %d live on the device at the failure"
                        % (sum(a["size"] for a in listed), live_then))
    if not made - after <= k <= made - before:
        failures.append("%d listed, not between the %d left when the call began and the %d "
                        "left when it returned" % (k, made - before, made - after))
    return int(copies[0][1])


# Every run's file must be right; one run at least must have had frees land ahead of the copy
# (on two busy cores the freeing thread may not run at all while the copy does).
until_tested(run, failures, "the copy took no allocation as it died")
finish(failures, outs)
