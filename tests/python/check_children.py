"""Python frames in children: the parent's allocation has them from the start; a child of it
gets them only once torch's CUDA starts (compile workers, which never start it, run at full
speed)."""
import os

from vtpy import HERE, PYTHON, check, finish, require_python_under_sanitizer, show, vramtap_run

require_python_under_sanitizer()
p, snaps = vramtap_run([PYTHON, os.path.join(HERE, "children_workload.py")])
pids = dict(line.split() for line in p.stdout.split("\n") if line.strip())
if not check(p.returncode == 0 and set(pids) == {"parent", "plain", "late"} and len(snaps) == 3,
             "parent and two children ran, three snapshots", show(p)):
    finish()


def python_frames(snap):
    sites = {s["id"]: s for s in snap["sites"]}
    return [f["function"] for a in snap["allocations"] if a["site"] is not None
            for f in sites[a["site"]]["frames"] if f["type"] == "python"]


by_pid = {str(s["pid"]): s for s in snaps}
check(python_frames(by_pid[pids["parent"]])[:1] == ["allocate"], "the parent's frames",
      python_frames(by_pid[pids["parent"]]))
check(python_frames(by_pid[pids["plain"]]) == [], "a child that never starts CUDA: no frames",
      python_frames(by_pid[pids["plain"]]))
check(python_frames(by_pid[pids["late"]])[:1] == ["allocate"],
      "a child that starts CUDA through torch: frames from then on",
      python_frames(by_pid[pids["late"]]))
finish()
