"""Runs oom_workload.py under `vramtap run`: one post-mortem per out-of-memory error, whether
PyTorch raised it on its own count (api "framework", the size and device of its message, in
the words of PyTorch 1.x and 2.x) or after a failed CUDA call (recorded by the library, not
twice)."""
import os

from vtpy import HERE, PYTHON, check, finish, require_python_under_sanitizer, show, vramtap_run

require_python_under_sanitizer()
p, snaps = vramtap_run([PYTHON, os.path.join(HERE, "oom_workload.py")])
exits = [s for s in snaps if s["kind"] == "exit"]
posts = [s for s in snaps if s["kind"] == "oom"]
if not check(p.returncode == 0 and len(exits) == 1, "workload ran and wrote its snapshot",
             show(p)):
    finish()
snap = exits[0]
events = [(e["api"], e["size"], e["device"], e["phase"]) for e in snap["oom_events"]]
# The second is PyTorch 2.x's wording of the first ("Requested : 1024.00 MiB", "on device 0").
# The third goes through the stand-in runtime's own cudaMalloc (ctypes looked it up on its
# handle): vramtap sees the driver call underneath.
check(events == [("framework", 2 << 30, 1, "forward"), ("framework", 1 << 30, 0, "forward"),
                 ("cuMemAlloc_v2", 1 << 40, 0, "forward")],
      "one event per error, in order", events)
check(len(posts) == 3, "three post-mortems", [s["oom"] for s in posts])
first = [s for s in posts if s["oom"]["n"] == 1]
if first:
    first = first[0]
    check((first["oom"]["api"], first["oom"]["size"], first["oom"]["device"]) ==
          ("framework", 2 << 30, 1), "the framework's request in the first post-mortem",
          first["oom"])
    frames = [fr for s in first["sites"] for fr in s["frames"] if fr["type"] == "python"]
    # The error reaches the hooks once the forward that raised has unwound: the innermost
    # frame is the call of the model, and vramtap's own frames are left out.
    with open(os.path.join(HERE, "oom_workload.py")) as f:
        call_line = [i for i, l in enumerate(f, 1) if "model(torch.zeros" in l][0]
    check(frames and (os.path.basename(frames[0]["file"]), frames[0]["function"],
                      frames[0]["line"]) == ("oom_workload.py", "<module>", call_line),
          "its stack starts where the model was called", frames)
finish()
