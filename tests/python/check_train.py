"""Runs train_workload.py VARIANT under `vramtap run` and holds the snapshot to what the workload
says about each of its allocations: birth and death phase and step, shared phase instances, the
Python frame in its stack, the timeline of phase instances, the step count. With `attach`, the
run is `vramtap run --attach cupti`: nothing preloaded, the driver loads vramtap at cuInit and
CUPTI reports the allocations, and the same must hold.

    check_train.py train|accum|infer|torch2[-threads][-fallback] [attach]
"""

import json
import os
import sys

from vtpy import (BOOTSTRAP, HERE, PYTHON, check, clean_env, finish, require_python_under_sanitizer,
                  show, tmpdir, vramtap_run)

variant = sys.argv[1]
run_args = ["--attach", "cupti"] if sys.argv[2:] == ["attach"] else []
require_python_under_sanitizer()
expect_path = os.path.join(tmpdir(), "expect.json")
command = [PYTHON, os.path.join(HERE, "train_workload.py"), variant, expect_path]
env = None
if variant == "torch2":
    # -S keeps the bootstrap from hooking torch before the workload has emulated torch 2's API;
    # torch and vramtap_torch are then found through PYTHONPATH.
    import importlib.util

    torch_parent = os.path.dirname(os.path.dirname(importlib.util.find_spec("torch").origin))
    command.insert(1, "-S")
    env = clean_env(PYTHONPATH=BOOTSTRAP + ":" + torch_parent)
elif variant.endswith("-fallback"):
    env = clean_env(VRAMTAP_TEST_NO_BUILTINS="1")
p, snaps = vramtap_run(command, run_args, env=env)
if not check(p.returncode == 0 and len(snaps) == 1, "workload ran and wrote one snapshot",
             "%d snapshots, %s" % (len(snaps), show(p))):
    finish()
check("hook" not in p.stderr, "no warning about the hooks", p.stderr)
snap = snaps[0]
check(snap.get("attach") == ("cupti" if run_args else "preload"), "attach",
      snap.get("attach"))
with open(expect_path) as f:
    expect = json.load(f)

sites = {s["id"]: s for s in snap["sites"]}
by_size = {}
for a in snap["allocations"]:
    by_size.setdefault(a["size"], []).append(a)
instances = {}
for e in expect["allocations"]:
    found = by_size.get(e["size"], [])
    if not check(len(found) == 1, "%s (%d bytes) listed once at the peak" % (e["what"], e["size"]),
                 "found %d" % len(found)):
        continue
    a = found[0]
    birth = {"phase": a["birth"]["phase"], "step": a["birth"]["step"]}
    death = a["death"] and {"phase": a["death"]["phase"], "step": a["death"]["step"]}
    check(birth == e["birth"], "%s (%d bytes) birth" % (e["what"], e["size"]),
          "snapshot %s, expected %s" % (birth, e["birth"]))
    check(death == e["death"], "%s (%d bytes) death" % (e["what"], e["size"]),
          "snapshot %s, expected %s" % (death, e["death"]))
    if e["group"]:
        instances.setdefault(e["group"], set()).add(a["birth"]["instance"])
    if e["frame"]:
        frames = [{"file": os.path.basename(f["file"]), "function": f["function"],
                   "line": f["line"]}
                  for f in sites[a["site"]]["frames"] if f["type"] == "python"]
        check(e["frame"] in frames, "%s (%d bytes) Python frame" % (e["what"], e["size"]),
              "expected %s in %s" % (e["frame"], frames))
for group, seen in sorted(instances.items()):
    check(len(seen) == 1, "allocations of %s share one phase instance" % group, sorted(seen))

timeline = [{"phase": t["phase"], "step": t["step"]} for t in snap["timeline"]]
check(timeline == expect["timeline"], "timeline of phase instances",
      "\n snapshot %s\n expected %s" % (timeline, expect["timeline"]))
check(all(t["end_s"] is not None for t in snap["timeline"]), "every phase instance closed",
      [t for t in snap["timeline"] if t["end_s"] is None])
check(snap["steps"] == expect["steps"], "step count",
      "snapshot %s, expected %s" % (snap["steps"], expect["steps"]))
check(snap["phase_markers"] == expect["phase_markers"], "phase_markers",
      "snapshot %s, expected %s" % (snap["phase_markers"], expect["phase_markers"]))
finish()
