"""A memory-snapshot pickle recorded one step after warm-up, like a GPT-style AdamW run: the
parameters, gradients, AdamW moments and a cuBLAS workspace were all made before the window.
Only their allocation stacks say what they are: C++ frames alone on autograd's engine thread
(gradients), a `step` under torch/optim/optimizer.py's wrapper, in the user's optimizer file
or in train.py (moments), at::cuda::getNewWorkspace among Python frames (workspace). One
Python frame carries line 2**64 - 1, as CPython 3.13 reports for some frames: an unknown line,
not a refusal. `vramtap report --json` must bill each category to the byte, by the evidence
worked out below."""
import json
import os
import pickle

from common import check, done, import_file, run, tempdir

MiB = 1 << 20


def frames(*fns):
    return [{"filename": f, "name": n, "line": line} for f, n, line in fns]


RECORDER = [("??", "torch::unwind::unwind()", 0),
            ("", "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc", 0)]
SETUP = frames(*RECORDER, ("??", "at::detail::empty_cuda", 0), ("model.py", "__init__", 10),
               ("train.py", "<module>", 3))
GRAD = frames(*RECORDER, ("??", "at::native::zeros_like", 0),
              ("engine.cpp", "torch::autograd::Engine::thread_main(std::shared_ptr<"
               "torch::autograd::GraphTask> const&)", 0),
              ("python_engine.cpp", "torch::autograd::python::PythonEngine::thread_init(int, "
               "std::shared_ptr<torch::autograd::ReadyQueue> const&, bool)", 0))
MOMENT = frames(*RECORDER, ("??", "at::native::zeros_like", 0),
                ("cs336_basics/optimizer.py", "step", 88),
                ("torch/optim/optimizer.py", "wrapper", 487), ("train.py", "<module>", 50))
MOMENT_TRAIN = frames(*RECORDER, ("train.py", "step", 30),
                      ("torch/optim/optimizer.py", "wrapper", 487), ("train.py", "<module>", 50))
WORKSPACE = frames(*RECORDER, ("??", "at::cuda::getNewWorkspace()", 0),
                   ("??", "at::cuda::getCurrentCUDABlasHandle()", 0),
                   ("torch/nn/functional.py", "linear", (1 << 64) - 1),
                   ("model.py", "forward", 20), ("train.py", "<module>", 45))
FWD = frames(*RECORDER, ("model.py", "forward", 21),
             ("torch/nn/modules/module.py", "_call_impl", 1), ("train.py", "<module>", 45))
BWD = frames(*RECORDER, ("engine.cpp", "torch::autograd::Engine::thread_main(...)", 0))

# before the window: (address, bytes, stack)
BEFORE = [(0x100000000, 4 * MiB, SETUP), (0x100400000, 4 * MiB, GRAD),
          (0x100800000, 4 * MiB, MOMENT), (0x100c00000, 4 * MiB, MOMENT),
          (0x101000000, 2 * MiB, MOMENT_TRAIN), (0x101200000, 8 * MiB, WORKSPACE)]
ACT, TEMP = (0x102000000, 1 * MiB), (0x102100000, 512 * 1024)


def recording():
    def ev(action, addr, size, t, fr):
        return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t,
                "frames": fr}

    trace = [ev("alloc", *ACT, 100, FWD),
             ev("alloc", *TEMP, 200, BWD),  # the peak
             ev("free_completed", *TEMP, 210, BWD),
             ev("free_completed", *ACT, 220, BWD)]
    blocks = [{"address": a, "size": n, "requested_size": n, "state": "active_allocated",
               "frames": fr} for a, n, fr in BEFORE]
    blocks += [{"address": ACT[0], "size": 1536 * 1024, "requested_size": 0,
                "state": "inactive", "frames": []}]
    segments = [{"device": 0, "address": 0x100000000, "total_size": 0x2200000, "stream": 0,
                 "segment_type": "large", "blocks": blocks}]
    return {"segments": segments, "device_traces": [trace], "allocator_settings": {},
            "external_annotations": [
                {"stage": "START", "name": "Optimizer.step#AdamW.step", "device": 0,
                 "time_us": 300},
                {"stage": "END", "name": "Optimizer.step#AdamW.step", "device": 0,
                 "time_us": 310}]}


def main():
    with tempdir() as tmp:
        path = os.path.join(tmp, "evidence.pickle")
        with open(path, "wb") as f:
            pickle.dump(recording(), f)
        snap, p = import_file(path, tmp)
        if not check(p.returncode == 0, f"import exit {p.returncode}: {p.stderr}"):
            done()
        lines = [f.get("line") for s in snap["sites"] for f in s["frames"]
                 if f.get("file") == "torch/nn/functional.py"]
        check(lines == [None], f"the out-of-range line is unknown: {lines}")
        r = run(["report", "--json", path + ".vramtap.json"])
        if not check(r.returncode == 0, f"report exit {r.returncode}: {r.stderr}"):
            done()
        dev = json.loads(r.stdout)["devices"][0]
        want = {"parameters": 4 * MiB, "gradients": 4 * MiB, "optimizer_state": 10 * MiB,
                "activations": 1 * MiB, "temporary": 8 * MiB + 512 * 1024, "unattributed": 0}
        check(dev["categories"] == want, f"categories {dev['categories']}, expected {want}")
        evidence = {
            "parameters": {"identity": 0, "stack": 0, "timing": 4 * MiB},
            "gradients": {"identity": 0, "stack": 4 * MiB, "timing": 0},
            "optimizer_state": {"identity": 0, "stack": 10 * MiB, "timing": 0},
            "activations": {"identity": 0, "stack": 0, "timing": 1 * MiB},
            "temporary": {"identity": 0, "stack": 8 * MiB, "timing": 512 * 1024},
        }
        check(dev["evidence"] == evidence, f"evidence {dev['evidence']}, expected {evidence}")
        check(dev["library_workspace_bytes"] == 8 * MiB,
              f"library workspaces {dev['library_workspace_bytes']}")
        check(dev["checks"]["optimizer_state_per_parameter"] == 2.5
              and dev["checks"]["gradients_per_parameter"] == 1.0, f"checks {dev['checks']}")
        text = run(["report", path + ".vramtap.json"]).stdout
        check("of which library workspaces" in text and "8.00 MiB" in text,
              f"the report shows the library workspaces:\n{text}")
    done()


main()
