"""The parts of scripts/gpu-validate.d/validate.py that only a GPU run reaches, on made-up
inputs with known answers: the profiler's raw memory timeline replay, the rounding that explains
a pool's count, grouping a snapshot's allocations by the program's tensors, the phase of
PyTorch's peak, site labels."""

import gzip
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.environ["VT_SRC"], "scripts", "gpu-validate.d"))
import validate as v  # noqa: E402

failures = []


def expect(got, want, what):
    if got != want:
        failures.append("%s: got %r, expected %r" % (what, got, want))


# export_memory_timeline(...raw.json.gz): (time, action, bytes, category index); releases and
# the old version of an INCREMENT_VERSION carry negative bytes. Categories in torch's order.
names = [str(n) for n in v.FALLBACK_CATEGORY_ORDER]
P, OPT, INP, TMP, ACT, GRAD = 0, 1, 2, 3, 4, 5
events = [
    [-1, 0, 1000, P],           # parameters, pre-existing
    [10, 1, 200, INP],          # the batch
    [20, 1, 500, ACT],          # activations
    [20, 1, 50, TMP],           # same time stamp: applied together
    [25, 3, -50, TMP],
    [30, 1, 1000, GRAD],        # gradients: total 2700 here, the peak
    [40, 3, -500, ACT],
    [40, 2, -1000, GRAD],       # a version bump: gradient -> optimizer state
    [40, 2, 1000, OPT],
    [50, 1, 300, TMP],          # 2500 again: not a new peak
]
tmp = tempfile.mkdtemp(prefix="vt-parsers-")
path = os.path.join(tmp, "memory.raw.json.gz")
with gzip.open(path, "wt") as f:
    json.dump(events, f)
r = v.replay_timeline(path, names)
expect(r["peak"], 2700, "timeline peak")
expect(r["time"], 30, "timeline peak time")
expect({k: b for k, b in r["categories"].items() if b},
       {"PARAMETER": 1000, "INPUT": 200, "ACTIVATION": 500, "GRADIENT": 1000}, "categories at peak")
expect(r["events"], len(events), "events")

# A pool that rounds every request up to 512 bytes.
sizes = [100, 512, 513, 4096]
expect(v.explain_rounding(sizes, sum(v.round_up(s, 512) for s in sizes)), 512, "granularity 512")
expect(v.explain_rounding(sizes, sum(sizes)), 1, "exact sizes")
expect(v.explain_rounding(sizes, 7), None, "nothing explains 7")

snap = {
    "allocations": [
        {"device": 0, "address": "0x1000", "size": 64, "kind": "pool", "site": 0,
         "birth": {"phase": "setup"}},
        {"device": 0, "address": "0x2000", "size": 64, "kind": "pool", "site": 0,
         "birth": {"phase": "backward"}},
        {"device": 0, "address": "0x3000", "size": 128, "kind": "pool", "site": 1,
         "birth": {"phase": "optimizer"}},
        {"device": 0, "address": "0x4000", "size": 999, "kind": "device", "site": 1,
         "birth": {"phase": "forward"}},
        {"device": 0, "address": "0x5000", "size": 32, "kind": "pool", "site": None,
         "birth": {"phase": "forward"}},
        {"device": 1, "address": "0x1000", "size": 5, "kind": "pool", "site": None,
         "birth": {"phase": "setup"}},
    ],
    "sites": [
        {"frames": [{"type": "native", "module": "libcudart.so.13", "symbol": "cudaMallocAsync"},
                    {"type": "native", "module": "libc10_cuda.so", "symbol": "c10::cuda::alloc"},
                    {"type": "native", "module": "libtorch_cuda.so", "offset": "0x10"},
                    {"type": "native", "module": "libtorch_cpu.so", "symbol": "deeper"},
                    {"type": "python", "file": "/x/train.py", "function": "step", "line": 7},
                    {"type": "python", "file": "/x/main.py", "function": "<module>", "line": 1}]},
        {"frames": [{"type": "native", "module": "libffi.so.8", "symbol": "ffi_call"},
                    {"type": "native", "module": "python3", "symbol": "_PyEval"}]},
    ],
}
res = {"params": [{"name": "w", "address": 0x1000, "size": 64}],
       "grads": [{"name": "w", "address": 0x2000, "size": 64}],
       "state": [{"name": "w.exp_avg", "address": 0x3000, "size": 128, "on_device": True},
                 {"name": "w.exp_avg_sq", "address": 0x5000, "size": 256, "on_device": True},
                 {"name": "w.step", "address": None, "size": 4, "on_device": False}],
       "batch": []}
groups, off = v.group_allocations(snap, res)
expect({g: [a["address"] for a in al] for g, al in groups.items()},
       {"parameters and buffers": ["0x1000"], "gradients (.grad)": ["0x2000"],
        "optimizer state": ["0x3000"], "other": ["0x4000", "0x5000"]}, "groups")
expect(off, [("w.exp_avg_sq", 256, 32)], "an address reused by another size")
expect(v.site_label(snap, 0),
       "libc10_cuda.so!c10::cuda::alloc < libtorch_cuda.so!0x10 < train.py:7 step", "site label")
expect(v.site_label(snap, 1), "(only CUDA and interpreter frames)", "plumbing only")
expect(v.site_label(snap, None), "(no stack)", "no stack")

samples = [{"phase": "forward", "step": 0, "max_allocated": 10},
           {"phase": "backward", "step": 0, "max_allocated": 30},
           {"phase": "optimizer", "step": 0, "max_allocated": 30},
           {"phase": "forward", "step": 1, "max_allocated": 40}]
expect(v.torch_peak_phase({"max_allocated": 40, "phase_samples": samples}), ("forward", 1),
       "PyTorch's peak phase")
expect(v.torch_peak_phase({"max_allocated": 30, "phase_samples": samples}), ("backward", 0),
       "first phase that shows the final maximum")
expect(v.fmt_bytes(1536), "1,536 B (1.50 KiB)", "fmt_bytes")
expect(v.fmt_bytes(None), "n/a", "fmt_bytes None")

# The report with what only a GPU run fills in (profiler, history timings, a post-mortem), so
# that its rendering is exercised before the one GPU run that needs it.
out = os.path.join(tmp, "report")
os.makedirs(out)
ctx = v.Ctx()
ctx.dry, ctx.date, ctx.notes = False, "2026-01-01", ["a note"]
ctx.checks = v.Checks()
ctx.checks.add("tensor", "tensor mode, fp32: something exact", 1, 2)
ctx.checks.add("tensor", "tensor mode, fp32: peak vs torch.cuda.max_memory_allocated()", 100, 99,
               kind="tolerance", ok=True, note="rounded to 512")
ctx.checks.skip("oom", "OOM (set_per_process_memory_fraction): post-mortem", "why")


class Args:
    archive = None


class Runner:
    started = 0.0


ctx.args, ctx.runner = Args(), Runner()
ctx.md_path, ctx.json_path = os.path.join(out, "r.md"), os.path.join(out, "r.json")
dev = {"device": 0, "peak_bytes": 3000, "peak": {"phase": "backward", "step": 1},
       "categories": {"parameters": 1000, "gradients": 1000, "optimizer_state": 0,
                      "activations": 1000, "temporary": 0, "unattributed": 0}}
ctx.raw = {
    "versions": {"nvidia_smi": "NVIDIA H200, 143771 MiB, 580.1, 0000:00:00.0",
                 "cuda_found": {"include": "/usr/local/cuda/include"}},
    "torch": {"gpu": "NVIDIA H200", "gpu_total_bytes": 150 << 30, "torch": "2.11.0"},
    "cuda": {"dynamic": {"account": {"driver_version": 13000},
                         "table": [["runtime sync", "1 B", "device", "yes", "cudaMalloc",
                                    "cudaMalloc", "2 MiB", "2 MiB"]]}},
    "runs": {"tensor-fp32": {"report": {"devices": [dev]}, "categories": dev["categories"],
                             "groups": {"other": {"count": 1, "bytes": 5,
                                                  "categories": {"parameters": 5}}},
                             "other_allocations": [{"label": "libcublasLt.so.13!x", "kind":
                                                    "device", "born": "forward", "count": 1,
                                                    "bytes": 5}]}},
    "profiler": {"timeline": {"peak": 2900, "events": 10, "categories": {}},
                 "mapped": {"parameters": 1000, "gradients": 900, "activations": 1000},
                 "result": {"profiled_s": 1.5, "export_s": 0.5}},
    "timing_table": [["plain", "1.000", "1.000", ""], ["history", "n/a", "n/a", "why"]],
    "oom": {"device": {"result": {"message": "CUDA out of memory.\nmore"},
                       "other_allocations": [{"label": "x", "kind": "pool", "born": "setup",
                                              "count": 1, "bytes": 1}]}},
}
v.write_report(ctx, final=True)
md = open(ctx.md_path).read()
for want in ("# vramtap on NVIDIA H200", "could not be rendered", "torch.profiler (",
             "| parameters | 1,000 B | 1,000 B |", "Step time",
             "PyTorch said: `CUDA out of memory.`", "libcublasLt.so.13!x", "Exact checks failed: 1"):
    if (want in md) == (want == "could not be rendered"):
        failures.append("rendered report: %r %s" % (want, "present" if want in md else "missing"))
expect(json.load(open(ctx.json_path))["raw"]["torch"]["gpu"], "NVIDIA H200", "JSON beside it")

for f in failures:
    print("FAIL:", f)
print("%d failures" % len(failures))
if not failures:  # kept only to look into a failure
    shutil.rmtree(tmp, ignore_errors=True)
sys.exit(1 if failures else 0)
