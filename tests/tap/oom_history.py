"""Runs tap_oom_history (see oom_history.c) under the library and reads its post-mortem: it lists
exactly the allocation live on the failing device, and its history gives every allocation live
on the other device, which it does not list, with the address and size the program printed.

usage: oom_history.py PROGRAM"""
import glob
import os
import sys

from runs import export_json, finish, run_debug

prog = sys.argv[1]
failures = []
outs = []
out, p = run_debug(prog, [100], "vt-oom-history-", outs, timeout=300)
if p.returncode != 0:
    failures.append("exit %d\n%s" % (p.returncode, p.stderr[-3000:]))
made, live = {}, []
for line in p.stdout.splitlines():
    w = line.split()
    if w[0] == "A":
        made[int(w[1], 16)] = int(w[2])
    elif w[0] == "L":
        live.append(int(w[1], 16))
posts = glob.glob(os.path.join(out, "vramtap.*.oom1.json"))
if len(posts) != 1:
    failures.append("post-mortems: %s" % posts)
else:
    doc = export_json(posts[0])
    listed = sorted(int(a["address"], 16) for a in doc["allocations"])
    if listed != live:
        failures.append("the post-mortem lists %s, expected %s" % (listed, live))
    hist = {}
    for a in doc.get("history_allocations", []):
        if a["address"] is None:
            failures.append("allocation %d of the history without an address" % a["id"])
        else:
            hist[int(a["address"], 16)] = a["size"]
    if hist != made:
        failures.append("the history's allocations: %d, %d of them as made; expected %d"
                        % (len(hist), sum(hist.get(k) == v for k, v in made.items()), len(made)))
    print("%d allocations on device 1 in the post-mortem's history, %d listed on device 0"
          % (len(hist), len(listed)))
finish(failures, outs)
