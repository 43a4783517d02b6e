#!/usr/bin/python3
"""Tests of `vramtap report` and `vramtap diff` over the fixture snapshots in data/
(data/README.md says what each one holds). Figures are checked exactly, through --json.

    test_cli.py CASE [--gen PATH_OF_gen_snapshot]

CASE is one of the case_* functions below, or bad:FILE for a file of data/bad/."""
import json
import locale
import os
import pty
import select
import subprocess
import sys
import tempfile

CLI = os.environ["VT_CLI"]
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
failures = []


def d(*parts):
    return os.path.join(DATA, *parts)


def eq(got, want, what):
    if got != want:
        failures.append("%s: got %r, want %r" % (what, got, want))


def has(text, fragment, what):
    if fragment not in text:
        failures.append("%s: %r not found in:\n%s" % (what, fragment, text))


def run(*args, rc=0, env=None):
    p = subprocess.run([CLI, *args], capture_output=True, text=True, env=env)
    if p.returncode < 0:
        failures.append("vramtap %s: killed by signal %d\n%s" % (" ".join(args), -p.returncode, p.stderr))
    elif p.returncode != rc:
        failures.append("vramtap %s: exit %d, want %d\n%s" % (" ".join(args), p.returncode, rc, p.stderr))
    elif rc == 0 and p.stderr:
        failures.append("vramtap %s: unexpected stderr:\n%s" % (" ".join(args), p.stderr))
    return p


def report(*args):
    return json.loads(run("report", "--json", *args).stdout or "null")


def cats(parameters=0, gradients=0, optimizer_state=0, activations=0, temporary=0, unattributed=0):
    return {"parameters": parameters, "gradients": gradients, "optimizer_state": optimizer_state,
            "activations": activations, "temporary": temporary, "unattributed": unattributed}


def one_line_error(p, command, fragment, what):
    """Bad input: exit 2, nothing on stdout, exactly one line on stderr that says why."""
    if p.returncode != 2:
        failures.append("%s: exit %d, want 2\n%s" % (what, p.returncode, p.stderr))
    eq(p.stdout, "", what + ": stdout")
    lines = p.stderr.splitlines()
    eq(len(lines), 1, what + ": lines on stderr (%r)" % p.stderr)
    if lines:
        has(lines[0], "vramtap %s: " % command, what)
        has(lines[0], fragment, what)


# --- the category table -------------------------------------------------------------------

def case_table():
    r = report(d("table.json"))
    got = {dev["device"]: dev["categories"] for dev in r["devices"]}
    eq(got[0], cats(parameters=(1 << 20) + (1 << 21) + (1 << 12) + (1 << 19), gradients=(1 << 15) + (1 << 16),
                    optimizer_state=(1 << 17) + (1 << 18), activations=(1 << 13) + (1 << 22),
                    temporary=1 << 14), "cuda:0 (peak in backward of step 1)")
    eq(got[1], cats(parameters=1 << 12, activations=(1 << 10) + (1 << 9), temporary=1 << 11),
       "cuda:1 (peak in the first forward)")
    eq(got[2], cats(parameters=1 << 14, temporary=1 << 13), "cuda:2 (peak in setup)")
    eq(got[3], cats(parameters=1 << 18, gradients=1 << 17, optimizer_state=1 << 16, temporary=1 << 15),
       "cuda:3 (peak in the first optimizer phase)")
    eq(got[4], cats(activations=1 << 20, temporary=1 << 19), "cuda:4 (peak between phases)")
    dev0 = r["devices"][0]
    eq(dev0["peak_bytes"], (1 << 23) - (1 << 12), "cuda:0 peak")
    eq(dev0["peak"], {"time_s": 5.5, "step": 1, "phase": "backward"}, "cuda:0 peak moment")
    eq(dev0["live_allocations"], 11, "cuda:0 allocations")
    eq(r["devices"][3]["checks"], {"gradients_per_parameter": 0.5, "optimizer_state_per_parameter": 0.25},
       "cuda:3 checks")
    # the allocation without a stack
    act = dev0["top_sites"]["activations"]
    eq([(s["site"], s["bytes"], s["label"]) for s in act],
       [(None, 1 << 22, "(no stack recorded)"), (1, 1 << 13, "model.py:30 forward < train.py:52 main")],
       "cuda:0 activation sites")


def case_tricky():
    r = report(d("tricky.json"))
    dev = r["devices"][0]
    eq(dev["categories"], cats(parameters=65 * MiB, gradients=64 * MiB, activations=22 * MiB, temporary=8 * MiB),
       "categories")
    eq([(s["bytes"], s["label"]) for s in dev["top_sites"]["activations"]],
       [(16 * MiB, "model.py:70 attention < model.py:35 forward < train.py:60 main"),
        (4 * MiB, "model.py:40 forward < train.py:60 main"),
        (2 * MiB, "train.py:20 load_batch < train.py:58 main")], "activation sites")
    eq([(s["bytes"], s["label"]) for s in dev["top_sites"]["parameters"]],
       [(64 * MiB, "model.py:12 __init__ < train.py:40 main"),
        (1 * MiB, "model.py:88 rotary_cache < model.py:31 forward < train.py:60 main")], "parameter sites")


def case_short_run():
    r = report(d("short_run.json"))
    dev = r["devices"][0]
    eq(dev["categories"], cats(parameters=32 * MiB, gradients=32 * MiB, optimizer_state=64 * MiB,
                               activations=1 * MiB, temporary=4 * MiB), "categories")
    eq(dev["checks"], {"gradients_per_parameter": 1.0, "optimizer_state_per_parameter": 2.0}, "checks")
    out = run("report", d("short_run.json")).stdout
    has(out, "gradients / parameters          1.00 about 1, as usual", "gradient check")
    has(out, "optimizer state / parameters    2.00 about 2, as usual for Adam and AdamW", "optimizer check")


def case_no_markers():
    r = report(d("nomarkers.json"))
    dev = r["devices"][0]
    eq(r["phase_markers"], False, "phase_markers")
    eq(dev["categories"], cats(unattributed=19 * MiB), "categories")
    eq(dev["unattributed_split"], {"persistent": 16 * MiB, "transient": 3 * MiB}, "split")
    eq(dev["checks"], {"gradients_per_parameter": None, "optimizer_state_per_parameter": None}, "checks")
    eq(dev["peak"], {"time_s": 0.75, "step": 0, "phase": None}, "no phase without markers")
    out = run("report", d("nomarkers.json")).stdout
    has(out, "  peak        19.00 MiB at 0.75 s, step 0 (0.1% of the device)\n", "peak without a phase")
    has(out, "    unattributed (persistent)     16.00 MiB  84.2%", "persistent row")
    has(out, "    unattributed (transient)       3.00 MiB  15.8%", "transient row")
    has(out, "no phase markers", "note")
    has(out, "the C API in include/vramtap.h", "C API hint")
    has(out, "NVTX ranges named forward, backward and optimizer", "NVTX hint")
    has(out, "'vramtap run -- python train.py' for PyTorch", "vramtap run hint")
    if "parameters  " in out or "checks" in out:
        failures.append("a run without markers shows no category it cannot know:\n" + out)


def case_imported():
    r = report(d("imported.json"))
    eq((r["kind"], r["pid"], r["command"]), ("import", None, []), "an imported snapshot")
    dev = r["devices"][0]
    eq(dev["categories"], cats(parameters=100 * MiB, activations=48 * MiB), "categories")
    eq(dev["levels"], {"tensors": 148 * MiB, "reserved": None, "reserved_source": None, "used": None,
                        "host_ram": None}, "levels")
    # Windows paths: the innermost frame names the operation, then the user's own frames
    eq(dev["top_sites"]["activations"][0]["label"],
       "torch\\functional.py:373 einsum < work\\model.py:39 attention < work\\train.py:80 main", "label")
    out = run("report", d("imported.json")).stdout
    has(out, "(imported from a PyTorch trace)", "title")
    has(out, "    allocator reserved              - not recorded\n", "no reserved figure")
    has(out, "    device used                     - not sampled\n", "no device figure")
    has(out, "  no gradients and no optimizer state were live at the peak: an inference run", "no checks")
    eq("checks" in out, False, "ratios of zero are not shown as checks")
    eq("before the first backward" in out, False, "a peak in step 2 came after a backward")
    # A peak inside the first backward did not come before it.
    with open(d("imported.json")) as f:
        doc = json.load(f)
    doc["devices"][0].update(peak_phase="backward", peak_step=0)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(doc, f)
    out = run("report", f.name).stdout
    os.unlink(f.name)
    has(out, "no gradients and no optimizer state were live at the peak: an inference run\n",
        "peak in backward")
    eq("before the first backward" in out, False, "a peak in backward is not before it")


def case_native_frames():
    """Labels start at the user's first frame: allocator, dispatch, CUDA and start-up frames
    folded, identical labels one row, lines cut to COLUMNS; --all-frames keeps everything."""
    def labels(*opts):
        sites = report(*opts, d("native_frames.json"))["devices"][0]["top_sites"]["activations"]
        return [(s["label"], s["bytes"], s["count"]) for s in sites]
    eq(labels(), [("torch::autograd::generated::MulBackward0::apply < torch::autograd::Node::operator() "
                   "< torch::autograd::Engine::evaluate_function", 3 * KiB, 2),
                  ("alloc < main", 512, 1),
                  ("(only library frames: --all-frames shows them)", 256, 1)], "folded labels")
    eq([l[0] for l in labels("--all-frames")],
       ["cudaMalloc < c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc < "
        "at::detail::_empty_generic<long>",
        "cudaMalloc < c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc < "
        "at::detail::empty_generic",
        "cudaMalloc < alloc < main", "cudaMalloc < libcuda.so.1+0x99 < start_thread"], "--all-frames")
    for width in (80, 100, 132):
        out = run("report", d("native_frames.json"), env=dict(os.environ, COLUMNS=str(width))).stdout
        eq(max(len(l) for l in out.splitlines()) <= width, True, "lines fit COLUMNS=%d:\n%s" % (width, out))
        has(out, "3.00 KiB       2 x  torch::autograd::generated::MulBackward0::apply", "merged row")


# --- out of memory ------------------------------------------------------------------------

def case_postmortem():
    path = d("vramtap.python.777.oom1.json")
    r = report(path)
    o = r["oom"]
    eq((o["size"], o["device"], o["api"], o["phase"], o["step"], o["error"]),
       (2 * GiB, 0, "cudaMallocAsync", "forward", 3, 2), "the request")
    eq((o["free_bytes"], o["total_bytes"], o["live_bytes"], o["outside_bytes"]),
       (512 * MiB, 8 * GiB, 7 * GiB, 512 * MiB), "free, total, live, outside")
    eq(o["categories"], cats(parameters=1 * GiB, gradients=1 * GiB, optimizer_state=2 * GiB, activations=3 * GiB),
       "live by category")
    eq(o["dominant"], "activations", "dominant")
    eq([a.split(" ")[0:2] for a in o["advice"]],
       [["a", "smaller"], ["gradient", "accumulation"], ["mixed", "precision"], ["activation", "checkpointing"],
        ["fragmentation,", "last:"]], "advice, in the seeds' order")
    eq(o["stack"]["label"], "model.py:70 attention < model.py:35 forward < train.py:60 main", "stack")
    eq(len(o["stack"]["frames"]), 5, "stack frames")
    eq([(s["bytes"], s["count"]) for s in o["top_sites"]],
       [(2 * GiB, 2), (2 * GiB, 1), (1 * GiB, 1), (1 * GiB, 1), (1 * GiB, 1)], "live by site")
    out = run("report", path).stdout
    has(out, "out-of-memory post-mortem", "title")
    has(out, "  asked       2.00 GiB via cudaMallocAsync, forward of step 3, at 12.50 s (error 2)", "asked")
    has(out, "  device      512.00 MiB free of 8.00 GiB", "free")
    # the user's frames; the CUDA runtime's and the allocator's folded, shown on request
    has(out, "  from        attention (model.py:70)\n              forward (model.py:35)\n"
        "              main (train.py:60)\n              (2 frames of the C library, CUDA, "
        "vramtap or the allocator folded: --all-frames shows them)\n", "stack")
    has(run("report", "--all-frames", path).stdout, "  from        cudaMallocAsync\n"
        "              c10::cuda::CUDACachingAllocator::Native::malloc\n"
        "              attention (model.py:70)\n", "stack, all frames")
    has(out, "    activations                    3.00 GiB  42.9%", "activations row")
    has(out, "what to try first  (activations hold 3.00 GiB, 42.9% of the live memory)", "dominant")
    has(out, "    1. a smaller micro-batch or a shorter sequence", "first remedy")
    has(out, "    5. fragmentation, last", "last remedy")
    # parameters dominate in rank 1's post-mortem: mixed precision first, and the free memory
    # (3 GiB) is less than the 4 GiB asked
    o = report(d("ranks", "vramtap.python.1002.oom1.json"))["oom"]
    eq(o["dominant"], "parameters", "rank 1 dominant")
    eq([a.split(" ")[0:2] for a in o["advice"]],
       [["9.00", "GiB"], ["mixed", "precision"], ["fragmentation,", "last:"]],
       "rank 1 advice: the 9 GiB outside vramtap's view first")
    eq(o["stack"]["site"], None, "rank 1 stack")
    # a request larger than the device, in a run without markers
    o = report(d("oom_huge_request.json"))["oom"]
    eq((o["size"], o["live_bytes"], o["outside_bytes"], o["dominant"]), (1 << 40, 6 * GiB, 8 * GiB, "unattributed"),
       "huge request")
    eq([a.split(" ")[0:2] for a in o["advice"]],
       [["the", "request"], ["8.00", "GiB"], ["mark", "the"], ["a", "smaller"], ["gradient", "accumulation"],
        ["mixed", "precision"], ["activation", "checkpointing"], ["fewer", "trainable"]], "huge request advice")
    out = run("report", d("oom_huge_request.json")).stdout
    has(out, "    1. the request alone (1.00 TiB) is larger than the device (16.00 GiB)", "size first")
    has(out, "  elsewhere   8.00 GiB in use that vramtap did not see allocated", "elsewhere")
    # 8 of the 14 GiB in use are outside vramtap's view: said before any remedy for what it saw
    has(out, "    2. 8.00 GiB of the 14.00 GiB in use on the device is outside what vramtap saw allocated",
        "outside first")


def case_bill_and_postmortem():
    """A glob that catches a run's snapshot and its post-mortem: the bill, then the post-mortem,
    not a table of processes."""
    out = run("report", d("vramtap.python.777.oom1.json"), d("minimal.json")).stdout
    first, _, second = out.partition("\nvramtap report")
    has(first, "vramtap report  " + d("minimal.json"), "the bill first")
    has(second, "(out-of-memory post-mortem)", "then the post-mortem")
    eq("heaviest" in out, False, "no table of processes")
    # --json: the bill's own document, as for the bill alone, with the post-mortem's in
    # "postmortems" (not a table of processes)
    pm, bill = report(d("vramtap.python.777.oom1.json")), report(d("minimal.json"))
    bill["postmortems"] = [pm]
    eq(report(d("vramtap.python.777.oom1.json"), d("minimal.json")), bill,
       "--json of a bill and its post-mortem")
    eq((pm["kind"], pm["oom"]["size"] > 0, bill["kind"]), ("oom", True, "exit"),
       "the post-mortem is the post-mortem's report")


def case_oom_events():
    r = report(d("oom_events.json"))
    eq(r["oom_events"], [
        {"n": 1, "time_s": 5.5, "device": 0, "size": 3 * GiB, "api": "cudaMalloc", "phase": "forward", "step": 1,
         "retry_succeeded": True, "file": "vramtap.python.778.oom1.json"},
        {"n": 2, "time_s": 9.25, "device": 0, "size": 6 * GiB, "api": "cuMemCreate", "phase": "backward", "step": 2,
         "retry_succeeded": False, "file": "vramtap.python.778.oom2.json"}], "oom_events")
    out = run("report", d("oom_events.json")).stdout
    has(out, "  #1 at 5.50 s: 3.00 GiB asked on cuda:0 via cudaMalloc, forward of step 1: a retry succeeded",
        "retried event")
    has(out, "  #2 at 9.25 s: 6.00 GiB asked on cuda:0 via cuMemCreate, backward of step 2: no retry succeeded;",
        "failed event")
    # the post-mortem's path as a user pastes it: next to the snapshot, not in the working directory
    has(out.replace("\n    ", " "), "post-mortem: vramtap report " + d("vramtap.python.778.oom2.json"),
        "post-mortem path")


# --- native mode, several processes, diff -------------------------------------------------

def case_native():
    r = report(d("native.json"))
    dev = r["devices"][0]
    eq((r["mode"], dev["view"], dev["categories"]), ("native", "segments", None), "no category split")
    eq(dev["segments_by_birth"], [
        {"phase": "setup", "step": 0, "bytes": 20 * MiB, "count": 2},
        {"phase": "forward", "step": 0, "bytes": 2 * MiB, "count": 1},
        {"phase": "backward", "step": 0, "bytes": 40 * MiB, "count": 1},
        {"phase": "optimizer", "step": 0, "bytes": 20 * MiB, "count": 1},
        {"phase": "forward", "step": 1, "bytes": 8 * MiB, "count": 1}], "segments by birth")
    eq(dev["levels"], {"tensors": 90 * MiB, "reserved": 90 * MiB, "reserved_source": "segments", "used": 400 * MiB,
                        "host_ram": None},
       "levels")
    eq(list(dev["top_sites"]), ["segments"], "sites are segment sites")
    out = run("report", d("native.json")).stdout
    has(out, "native mode", "note")
    has(out, "needs tensor mode", "what to do")
    has(out, "    backward of step 0            40.00 MiB  1 segment\n", "a group")
    has(out, "    setup                         20.00 MiB  2 segments\n", "setup group")


def check_ranks(r, what):
    eq([(p["rank"], p["local_rank"], p["pid"], p["device"], p["peak_bytes"], p["dominant"]) for p in r["processes"]],
       [(0, 0, 1001, 0, 10 * GiB, "activations"), (1, 1, 1002, 1, 12 * GiB, "activations"),
        (2, 2, 1003, 2, 11 * GiB, "activations")], what + ": processes")
    eq({k: r["heaviest"][k] for k in ("rank", "pid", "device", "peak_bytes")},
       {"rank": 1, "pid": 1002, "device": 1, "peak_bytes": 12 * GiB}, what + ": heaviest")
    eq(r["spread"], {"min_bytes": 10 * GiB, "max_bytes": 12 * GiB, "bytes": 2 * GiB, "ratio": 1.2}, what + ": spread")


def case_ranks():
    r = report(d("ranks"))
    check_ranks(r, "directory")
    eq([(os.path.basename(p["file"]), p["rank"], p["size"]) for p in r["oom_postmortems"]],
       [("vramtap.python.1002.oom1.json", 1, 4 * GiB)], "post-mortems")
    files = [d("ranks", "vramtap.python.%d.json" % pid) for pid in (1003, 1001, 1002)]
    r = report(*files)
    check_ranks(r, "files")
    eq(r["oom_postmortems"], [], "no post-mortem given")
    out = run("report", d("ranks")).stdout
    has(out, "vramtap report  3 processes on 1 node\n\nhost not recorded  3 processes\n", "title")
    has(out, "      1     1     1002  cuda:1    12.00 GiB  backward of step 7, 25.00 s  activations 66.7%"
        "        yes\n", "rank 1 line: its post-mortem is among the files")
    has(out, "      2     2     1003  cuda:2    11.00 GiB  backward of step 7, 25.00 s  activations 63.6%"
        "        -\n", "rank 2 line")
    has(out, "  heaviest  rank 1, pid 1002: 12.00 GiB on cuda:1\n", "heaviest")
    has(out, "  spread    10.00 GiB to 12.00 GiB: 2.00 GiB, the heaviest is 20.0% above the lightest\n", "spread")
    has(out, "  rank 1, pid 1002: 4.00 GiB asked on cuda:1 via cudaMallocAsync, backward of step 7", "post-mortem")


def case_nodes():
    """Four ranks of a world of six on two nodes: ranks 3 and 5 left no file, ranks 2 and 4
    used one GPU, rank 1 died of an out-of-memory failure (a post-mortem beside its snapshot)."""
    r = report(d("nodes"))
    eq([(p["host"], p["rank"], p["pid"], p["device"], p["peak_bytes"], p["dominant"], p["oom_events"],
         [g["uuid"][4:12] + " " + g["pci_bus_id"] for g in p["gpus"]]) for p in r["processes"]],
       [("gpu-a.cluster", 0, 500, 0, 10 * GiB, "activations", 0, ["aaaaaaaa 0000:3b:00.0"]),
        ("gpu-a.cluster", 1, 501, 1, 12 * GiB, "activations", 1, ["aaaaaaaa 0000:5e:00.0"]),
        ("gpu-b.cluster", 2, 500, 0, 11 * GiB, "activations", 0, ["bbbbbbbb 0000:3b:00.0"]),
        ("gpu-b.cluster", 4, 502, 0, 9 * GiB, "activations", 0, ["bbbbbbbb 0000:3b:00.0"])],
       "processes by node and rank")
    eq((r["world_size"], r["missing_ranks"]), (6, [3, 5]), "missing ranks")
    eq({k: r["heaviest"][k] for k in ("host", "rank", "pid", "device", "peak_bytes")},
       {"host": "gpu-a.cluster", "rank": 1, "pid": 501, "device": 1, "peak_bytes": 12 * GiB}, "heaviest")
    r["spread"]["ratio"] = round(r["spread"]["ratio"], 6)
    eq(r["spread"], {"min_bytes": 9 * GiB, "max_bytes": 12 * GiB, "bytes": 3 * GiB, "ratio": 1.333333}, "spread")
    eq([(g["uuid"], g["pci_bus_id"], [(u["host"], u["rank"], u["pid"], u["device"]) for u in g["processes"]])
        for g in r["shared_gpus"]],
       [("GPU-bbbbbbbb-0000-0000-0000-000000000000", "0000:3b:00.0",
         [("gpu-b.cluster", 2, 500, 0), ("gpu-b.cluster", 4, 502, 0)])], "one GPU, two ranks")
    eq([(p["host"], p["rank"], p["pid"], p["size"]) for p in r["oom_postmortems"]],
       [("gpu-a.cluster", 1, 501, 4 * GiB)], "post-mortems")
    out = run("report", d("nodes")).stdout
    has(out, "vramtap report  4 processes on 2 nodes\n\ngpu-a.cluster  2 processes\n", "title, first node")
    has(out, "\ngpu-b.cluster  2 processes\n", "second node")
    has(out, "      1     1      501  cuda:1    12.00 GiB  backward of step 7, 25.00 s  activations 66.7%"
        "        yes\n", "rank 1 line")
    has(out, "      4     1      502  cuda:0     9.00 GiB  backward of step 7, 25.00 s  activations 55.6%"
        "        -\n", "rank 4 line")
    has(out, "  heaviest  rank 1, pid 501 on gpu-a.cluster: 12.00 GiB on cuda:1\n", "heaviest")
    has(out, "  spread    9.00 GiB to 12.00 GiB: 3.00 GiB, the heaviest is 33.3% above the lightest\n", "spread")
    has(out, "  missing   ranks 3, 5 of world size 6: no snapshot given\n", "missing")
    has(out, "  shared GPU GPU-bbbbbbbb-0000-0000-0000-000000000000 (0000:3b:00.0) used by rank 2, pid 500 "
        "on gpu-b.cluster (cuda:0); rank 4, pid 502 on gpu-b.cluster (cuda:0)\n", "shared GPU")
    has(out, "  rank 1, pid 501 on gpu-a.cluster: 4.00 GiB asked on cuda:1 via cudaMallocAsync", "post-mortem")


def case_diff():
    a, b = d("diff", "bs4.json"), d("diff", "bs8.json")
    r = json.loads(run("diff", "--json", a, b).stdout)
    dev = r["devices"][0]
    eq(dev["change"], {"peak_bytes": 400 * MiB, "live_bytes": 400 * MiB,
                       "categories": cats(activations=400 * MiB)}, "change: only activations")
    eq((dev["a"]["peak_bytes"], dev["b"]["peak_bytes"]), (850 * MiB, 1250 * MiB), "peaks")
    eq((dev["a"]["peak"], dev["b"]["peak"]), ({"time_s": 17.5, "step": 5, "phase": "backward"},) * 2, "peak moments")
    eq([(s["signature"], s["a_bytes"], s["b_bytes"], s["change"]) for s in dev["sites_grew"]],
       [("0000000000000304", 300 * MiB, 600 * MiB, 300 * MiB), ("0000000000000305", 100 * MiB, 200 * MiB, 100 * MiB)],
       "sites that grew, matched by signature")
    eq(dev["sites_shrank"], [], "nothing shrank")
    eq(r["command_differs"], True, "command differs")
    eq(r["b"]["command"], ["python", "train.py", "--batch-size", "8"], "command B")
    eq(r["env"], [{"name": "CUDA_VISIBLE_DEVICES", "a": None, "b": "1"}], "env")
    back = json.loads(run("diff", "--json", "--top", "1", b, a).stdout)["devices"][0]
    eq([(s["signature"], s["change"]) for s in back["sites_shrank"]], [("0000000000000304", -300 * MiB)],
       "reversed: shrank, --top 1")
    eq(back["sites_grew"], [], "reversed: nothing grew")
    same = json.loads(run("diff", "--json", a, a).stdout)
    eq((same["devices"][0]["change"]["peak_bytes"], same["devices"][0]["sites_grew"], same["env"],
        same["command_differs"]), (0, [], [], False), "a file against itself")
    out = run("diff", a, b).stdout
    has(out, "  command   A: python train.py --batch-size 4\n            B: python train.py --batch-size 8\n", "command")
    has(out, "  env       CUDA_VISIBLE_DEVICES  A: (unset)  B: 1\n", "env")
    has(out, "  peak                           850.00 MiB             1.22 GiB   +400.00 MiB   +47.1%\n", "peak row")
    has(out, "  peak at                backward of step 5   backward of step 5\n", "peak moment row")
    has(out, "  activations                    400.00 MiB           800.00 MiB   +400.00 MiB  +100.0%\n",
        "activations row")
    has(out, "  gradients                      100.00 MiB           100.00 MiB           0 B    +0.0%\n",
        "gradients row")
    has(out, "     +300.00 MiB  300.00 MiB -> 600.00 MiB  model.py:70 attention < model.py:35 forward", "grew")
    eq(run("diff", a, a).stdout, "identical\n", "a file against itself: only 'identical'")
    eq(same["identical"], True, "a file against itself: identical in --json")
    eq(r["identical"], False, "bs4 and bs8 are not identical")

    # The driver script edited: every caller's line moved, so every signature changed. The
    # sites still match: nothing grew or shrank.
    with open(a) as f:
        doc = json.load(f)
    for site in doc["sites"]:
        site["signature"] = "f" + site["signature"][1:]
        for fr in site["frames"][1:]:
            if fr.get("type") == "python":
                fr["line"] += 2
    with tempfile.TemporaryDirectory(prefix="vt-cli-") as tmp:
        moved = os.path.join(tmp, "moved.json")
        with open(moved, "w") as f:
            json.dump(doc, f)
        dev = json.loads(run("diff", "--json", a, moved).stdout)["devices"][0]
        eq((dev["sites_grew"], dev["sites_shrank"]), ([], []), "lines moved in callers: no change")

        # What a snapshot does not record is unknown, not the same.
        with open(d("minimal.json")) as f:
            doc = json.load(f)
        doc["allocations"][0]["size"] = 2048
        doc["devices"][0]["peak_bytes"] = 2048
        other = os.path.join(tmp, "minimal2.json")
        with open(other, "w") as f:
            json.dump(doc, f)
        out = run("diff", d("minimal.json"), other).stdout
        has(out, "  command   unknown (neither snapshot records it)\n", "no command")
        has(out, "  env       unknown (neither snapshot records it)\n", "no env")
        eq("the same" in out, False, "nothing claimed the same")
        r = json.loads(run("diff", "--json", d("minimal.json"), other).stdout)
        eq((r["command_differs"], r["env"]), (None, None), "unknown in --json")


def case_record():
    """The run record in report, report --record and diff; labels split an allocation."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for name, record in (("bs4.json", {"model": "GPT", "batch_size": 4, "amp": "off",
                                           "parameters": 1234567, "trainable_parameters": 1234567,
                                           "optimizer": "AdamW (amsgrad=False)"}),
                             ("bs8.json", {"model": "GPT", "batch_size": 8, "amp": "bfloat16",
                                           "parameters": 1234567, "trainable_parameters": 1234567,
                                           "optimizer": "AdamW (amsgrad=False)"})):
            with open(d("diff", name)) as f:
                doc = json.load(f)
            doc["run_record"] = record
            paths.append(os.path.join(tmp, name))
            with open(paths[-1], "w") as f:
                json.dump(doc, f)
        out = run("diff", *paths).stdout
        has(out, "  run       batch size 4 \u2192 8, AMP off \u2192 bfloat16\n", "diff names the changes")
        r = json.loads(run("diff", "--json", *paths).stdout)
        eq(r["record_changes"], "batch size 4 \u2192 8, AMP off \u2192 bfloat16", "diff --json changes")
        eq(r["b"]["run_record"]["batch_size"], 8, "diff --json record")
        with open(paths[0]) as f:
            doc = json.load(f)
        doc["pid"] += 1  # another run with the same record
        same = os.path.join(tmp, "same.json")
        with open(same, "w") as f:
            json.dump(doc, f)
        has(run("diff", paths[0], same).stdout, "  run       the same run record\n", "same record")
        text = run("report", paths[0]).stdout
        has(text, "  run record\n    GPU                        cuda:0 NVIDIA Test GPU, 16.00 GiB\n"
            "    model                      GPT, 1,234,567 parameters (1,234,567 trainable)\n"
            "    batch size                 4\n    optimizer                  AdamW (amsgrad=False)\n"
            "    AMP                        off\n\n", "record at the top of the report")
        eq(run("report", "--record", paths[0]).stdout,
           "| run | %s |\n|---|---|\n| GPU | cuda:0 NVIDIA Test GPU, 16.00 GiB |\n"
           "| model | GPT, 1,234,567 parameters (1,234,567 trainable) |\n"
           "| batch size | 4 |\n| optimizer | AdamW (amsgrad=False) |\n| AMP | off |\n"
           "| peak allocated | 850.00 MiB (cuda:0) |\n" % paths[0], "report --record")
        one_line_error(run("report", "--record", *paths, rc=2), "report", "--record reads one snapshot",
                       "--record of two files")

        # tricky.json: no optimizer state at the peak; what the record says picks the cause
        with open(d("tricky.json")) as f:
            doc = json.load(f)
        for optimizer, meaning in (
                ("SGD (momentum=0)", "0.00 about 0, as expected: plain SGD keeps no state\n"),
                ("AdamW (amsgrad=False)", "0.00 about 0: AdamW (amsgrad=False) had not made its "
                                          "state by\n")):
            doc["run_record"] = {"optimizer": optimizer, "parameters": 10, "trainable_parameters": 10}
            path = os.path.join(tmp, "tricky.json")
            with open(path, "w") as f:
                json.dump(doc, f)
            out = run("report", path).stdout
            has(out, "optimizer state / parameters    " + meaning, "the record picks the cause")
            check = out[out.index("  checks"):out.index("  top sites")]
            eq("frozen" in check, False, "all parameters trainable: frozen ones are no cause")

        # theory beside measurement: the rules per optimizer and setting, from the record
        base = {"parameters": 1000, "trainable_parameters": 1000, "parameter_bytes": 4000,
                "parameter_dtypes": "float32"}
        for record, rows in (
                ({"optimizer": "SGD (momentum=0, nesterov=False)"}, (4000, 4000, 0)),
                ({"optimizer": "SGD (momentum=0.9, nesterov=False)"}, (4000, 4000, 4000)),
                ({"optimizer": "AdamW (amsgrad=True)"}, (4000, 4000, 12000)),
                ({"optimizer": "RMSprop (momentum=0, centered=True)"}, (4000, 4000, 8000)),
                ({"optimizer": "Adam (amsgrad=False); SGD (momentum=0)"}, (4000, 4000, None)),
                ({"optimizer": "LBFGS"}, (4000, 4000, None)),
                ({"optimizer": "momentum=0.9"}, (4000, 4000, None)),
                ({"optimizer": "Adam (amsgrad=False)", "trainable_parameters": 500,
                  "parameter_dtypes": "bfloat16", "parameter_bytes": 2000, "buffer_bytes": 48},
                 (2048, 1000, 2000)),
                ({"optimizer": "Adam (amsgrad=False)", "trainable_parameter_bytes": 1200,
                  "trainable_parameters": 600, "parameter_dtypes": "float32, bfloat16"},
                 (4000, 1200, 2400))):
            doc["run_record"] = dict(base, **record)
            with open(path, "w") as f:
                json.dump(doc, f)
            theory = report(path)["devices"][0]["theory"]
            got = tuple(theory[k]["expected_bytes"] if k in theory else None
                        for k in ("parameters", "gradients", "optimizer_state"))
            eq(got, rows, "theory from %s" % record)
        doc["run_record"] = {"optimizer": "Adam (amsgrad=False)"}
        with open(path, "w") as f:
            json.dump(doc, f)
        eq(report(path)["devices"][0]["theory"], None, "no theory without parameter figures")

        dev = report(d("labelled.json"))["devices"][0]
        eq(dev["categories"], cats(parameters=128, gradients=256, optimizer_state=128, activations=512),
           "labels split, overlapping bytes counted once")
        eq(dev["evidence"]["activations"], {"identity": 0, "stack": 0, "timing": 512}, "the rest by timing")
        eq(dev["evidence"]["optimizer_state"], {"identity": 128, "stack": 0, "timing": 0}, "by identity")
        has(run("report", d("labelled.json")).stdout,
            "  how each category was established\n    by identity  parameters 128 B, gradients 256 B, "
            "optimizer state 128 B\n    by timing    activations 512 B\n",
            "the report says which evidence")
        with open(d("labelled.json")) as f:
            doc = json.load(f)
        doc["allocations"][0]["labels"].append({"offset": 900, "bytes": 10, "category": "a_newer_one"})
        path = os.path.join(tmp, "labels.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        eq(report(path)["devices"][0]["categories"]["activations"], 512, "an unknown category is ignored")
        doc["allocations"][0]["labels"] = [{"offset": 1000, "bytes": 100, "category": "gradients"}]
        with open(path, "w") as f:
            json.dump(doc, f)
        one_line_error(run("report", path, rc=2), "report", "lie outside the allocation", "label past the end")


def case_folded():
    out = run("report", "--folded", d("diff", "bs4.json")).stdout
    alloc = "c10::cuda::CUDACachingAllocator::Native::malloc;cudaMallocAsync"
    eq(out.splitlines(), [
        "cuda:0;parameters;main (train.py:40);__init__ (model.py:12);%s %d" % (alloc, 100 * MiB),
        "cuda:0;gradients;main (train.py:61);%s %d" % (alloc, 100 * MiB),
        "cuda:0;optimizer_state;main (train.py:62);_init_group (/usr/lib/python3/dist-packages/torch/optim/adamw.py:170);"
        "%s %d" % (alloc, 200 * MiB),
        "cuda:0;activations;main (train.py:60);forward (model.py:35);attention (model.py:70);%s %d" % (alloc, 300 * MiB),
        "cuda:0;activations;main (train.py:60);forward (model.py:33);mlp (model.py:50);%s %d" % (alloc, 100 * MiB),
        "cuda:0;temporary;main (train.py:61);%s %d" % (alloc, 50 * MiB)], "folded stacks")
    out = run("report", "--folded", d("table.json")).stdout
    eq(sum(int(line.rsplit(" ", 1)[1]) for line in out.splitlines() if line.startswith("cuda:0;")),
       (1 << 23) - (1 << 12), "folded bytes add up to the peak")
    has(out, "cuda:0;activations;[no stack] %d\n" % (1 << 22), "allocation without a stack")


def case_top_device():
    r = report("--top", "1", "--device", "3", d("table.json"))
    eq([dev["device"] for dev in r["devices"]], [3], "--device 3")
    eq({k: len(v) for k, v in r["devices"][0]["top_sites"].items()},
       {"parameters": 1, "gradients": 1, "optimizer_state": 1, "temporary": 1}, "--top 1")
    r = report("--top", "0", d("tricky.json"))
    eq(r["devices"][0]["top_sites"], {}, "--top 0")
    out = run("report", "--device", "1", d("table.json")).stdout
    has(out, "\ncuda:1\n", "device title")
    if "cuda:0" in out:
        failures.append("--device 1 shows cuda:0:\n" + out)


def case_levels():
    out = run("report", d("tricky.json")).stdout
    has(out, "  peak        159.00 MiB at 2.25 s, backward of step 0 (1.0% of the device)\n", "peak")
    has(out, "    tensors                159.00 MiB live allocations at the peak (the bill above)\n", "tensors")
    has(out, "    allocator reserved     170.00 MiB +11.00 MiB held by the allocator beyond the tensors:", "reserved")
    has(out, "    device used            590.00 MiB +420.00 MiB beyond the allocator: the CUDA context", "used")
    has(out, "    gradients / parameters          0.98 about 1, as usual", "gradient check")
    has(out, "    optimizer state / parameters    0.00 about 0: plain SGD keeps no state", "optimizer check")
    has(out, "    parameters                    65.00 MiB  40.9%  ########............\n", "bar")
    has(out, "    total                        159.00 MiB 100.0%  in 7 allocations\n", "total")
    r = report(d("tricky.json"))
    eq(r["devices"][0]["levels"], {"tensors": 159 * MiB, "reserved": 170 * MiB, "reserved_source": "pool",
                                   "used": 590 * MiB, "host_ram": None}, "levels")


def tty_output(args, env):
    """Runs vramtap with stdout on a pseudo-terminal and returns what it printed."""
    master, slave = pty.openpty()
    p = subprocess.Popen([CLI, *args], stdout=slave, stderr=subprocess.PIPE, env=env)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 10)
        if not ready:
            break
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    p.wait()
    os.close(master)
    eq(p.returncode, 0, "exit status on a terminal")
    return b"".join(chunks).decode("utf-8", "replace")


def case_colour():
    try:
        for fd in os.openpty():
            os.close(fd)
    except OSError:
        print("no pseudo-terminal here: skipped")
        sys.exit(77)
    try:
        locale.setlocale(locale.LC_CTYPE, "C.UTF-8")
        utf8 = True
    except locale.Error:
        utf8 = False
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM", "LANG", "LC_ALL", "LC_CTYPE")}
    args = ["report", d("tricky.json")]
    out = tty_output(args, dict(base, TERM="xterm", LANG="C.UTF-8"))
    has(out, "\x1b[1m", "bold on a terminal")
    if utf8:
        has(out, "\u2588", "block bars on a UTF-8 terminal")
    out = tty_output(args, dict(base, TERM="xterm", LANG="C.UTF-8", NO_COLOR=""))
    has(out, "\x1b[", "an empty NO_COLOR does not count")
    out = tty_output(args, dict(base, TERM="xterm", LANG="C.UTF-8", NO_COLOR="1"))
    eq("\x1b[" in out, False, "escape codes with NO_COLOR=1")
    out = tty_output(args, dict(base, TERM="dumb", LANG="C"))
    eq("\x1b[" in out, False, "escape codes on a dumb terminal")
    has(out, "########", "ASCII bars without UTF-8")
    out = run(*args, env=dict(base, TERM="xterm", LANG="C.UTF-8")).stdout
    eq(("\x1b[" in out, "\u2588" in out), (False, False), "escape codes or blocks in a pipe")


def case_generated(gen):
    with tempfile.TemporaryDirectory() as tmp:
        snap, expect = os.path.join(tmp, "gen.json"), os.path.join(tmp, "expect.json")
        subprocess.run([gen, "--allocs", "20000", "--sites", "3000", "--depth", "6", "--expect", expect, snap],
                       check=True)
        want = json.load(open(expect))
        r = report(snap)
        dev = r["devices"][0]
        eq(dev["peak_bytes"], want.pop("peak_bytes"), "peak")
        eq(dev["categories"], want, "categories built in by the generator")
        eq(dev["live_allocations"], 20000, "allocations")
        run("report", snap)
        eq(sum(int(line.rsplit(" ", 1)[1]) for line in run("report", "--folded", snap).stdout.splitlines()),
           dev["peak_bytes"], "folded total")


# --- bad input ----------------------------------------------------------------------------

BAD = {
    "empty.json": "empty file",
    "not_json.json": "not valid JSON at line 1, column 5",
    "truncated.json": "truncated: the file ends inside an array",
    "truncated_in_string.json": "truncated",
    "top_level_array.json": "not a vramtap snapshot: the file holds an array",
    "trailing_data.json": "data after the end of the snapshot at line 19",
    "other_format.json": "not a vramtap snapshot (format is \"heaptrack-json\"",
    "profiler_trace.json": "looks like a PyTorch profiler trace; convert it with 'vramtap import'",
    "future_version.json": "format version 2 is newer than this vramtap reads (1)",
    "size_string.json": "allocations[0].size: expected an integer, found a string",
    "devices_object.json": "devices: expected an array, found an object",
    "size_absurd.json": "allocations[0].size: 1152921504606846976 is not a plausible number of bytes",
    "size_negative.json": "allocations[0].size: -1 is not a plausible number of bytes",
    "integer_overflow.json": "not valid JSON at line 12",
    "step_past_end.json": "allocations[0].birth.step: 7 is not plausible (expected 0 to 2)",
    "death_before_birth.json": "allocations[0].death: step 0, instance 2 comes before its birth",
    "site_out_of_range.json": "allocations[0].site: 3 is not an index into sites[]",
    "unknown_device.json": "allocations[0].device: 1 is not in devices[]",
    "bad_phase.json": "allocations[0].birth.phase: \"warmup\" is not a phase",
    "duplicate_key.json": "the key \"steps\" appears twice",
    "missing_allocations.json": "allocations: missing",
    "oom_without_request.json": "oom: missing (expected an object)",
    "bad_frame.json": "sites[0].frames[0].line: expected an integer, found a string",
    "wrong_bool.json": "phase_markers: expected true or false, found a string",
    "peak_time_negative.json": "devices[0].peak_time_s: -5 is not a plausible time",
    # compact files (the library's): cut in the allocations' section, a later container, a
    # record naming a kind the head's table does not have
    "compact_cut_short.json": "the compact file's section ALOC is cut short",
    "compact_newer.json": "compact snapshot container version 9 is newer than this vramtap reads (2): update vramtap",
    "compact_bad_kind.json": "allocations[0].kind: 9 does not index compact.kinds",
}


def case_bad(name):
    path = d("bad", name)
    fragment = BAD[name]
    one_line_error(run("report", path, rc=2), "report", fragment, "report " + name)
    one_line_error(run("report", "--json", path, rc=2), "report", fragment, "report --json " + name)
    one_line_error(run("diff", d("minimal.json"), path, rc=2), "diff", fragment, "diff " + name)


def case_bad_complete():
    """Every file in data/bad/ has a test, and the file they break is itself fine."""
    eq(sorted(os.listdir(d("bad"))), sorted(BAD), "data/bad/ and BAD")
    eq(report(d("minimal.json"))["devices"][0]["categories"], cats(activations=1024), "minimal.json")


def case_compact():
    """Compact snapshots (the library's, as tests/tap's programs left them: a history, labels, a
    post-mortem; tests/fuzz's seeds) and their `export --json` are read alike; a JSON snapshot
    exports as it is."""
    seeds = os.path.join(os.environ["VT_SRC"], "tests/fuzz/seeds/snapshot")
    names = sorted(os.listdir(seeds))
    eq(len(names) >= 3, True, "compact seeds found")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            path, out = os.path.join(seeds, name), os.path.join(tmp, name + ".json")
            with open(out, "w") as f:
                f.write(run("export", "--json", path).stdout)
            with open(out) as f:
                doc = json.load(f)
            eq("compact" in doc, False, name + ": the export leaves the head's names out")
            eq(len(doc["allocations"]) > 0, True, name + ": allocations exported")
            a, b = report(path), report(out)
            a.pop("file", None), b.pop("file", None)
            eq(a, b, name + ": report --json of the file and of its export")
            eq(run("report", "--folded", path).stdout, run("report", "--folded", out).stdout,
               name + ": report --folded of the file and of its export")
    with open(d("labelled.json")) as f:
        eq(run("export", "--json", d("labelled.json")).stdout, f.read(), "a JSON snapshot exported")


def case_usage():
    missing = d("no-such-file.json")
    for args, command, fragment in [
            ((), "report", "no snapshot given"),
            ((missing,), "report", "no-such-file.json: cannot open: No such file or directory"),
            ((d("bad"),), "report", "no vramtap.*.json snapshots in this directory"),
            (("--frobnicate", d("minimal.json")), "report", "unknown option '--frobnicate'"),
            (("-x", d("minimal.json")), "report", "unknown option '-x'"),
            (("--top", "many", d("minimal.json")), "report", "--top needs a number from 0 to 1000000, not 'many'"),
            (("--top",), "report", "'--top' needs a value"),
            (("--device", "9", d("minimal.json")), "report", "no device 9 in this snapshot (devices: 0)"),
            (("--json", "--folded", d("minimal.json")), "report", "--json, --folded and --record exclude each other"),
            (("--folded", d("minimal.json"), d("tricky.json")), "report", "--folded reads one snapshot, not 2"),
            ((d("minimal.json"), missing), "report", "cannot open"),
    ]:
        one_line_error(run("report", *args, rc=2), command, fragment, "report " + " ".join(args))
    for args, fragment in [
            ((d("minimal.json"),), "needs two snapshots"),
            ((d("minimal.json"),) * 3, "needs two snapshots"),
            (("--folded", d("minimal.json"), d("minimal.json")), "unknown option '--folded'"),
            ((missing, d("minimal.json")), "cannot open"),
    ]:
        one_line_error(run("diff", *args, rc=2), "diff", fragment, "diff " + " ".join(args))
    has(run("report", "--help").stdout, "usage: vramtap report [OPTIONS] SNAPSHOT...", "report --help")
    has(run("diff", "--help").stdout, "usage: vramtap diff [OPTIONS] A.json B.json", "diff --help")


def main():
    case = sys.argv[1]
    gen = sys.argv[sys.argv.index("--gen") + 1] if "--gen" in sys.argv else None
    if case.startswith("bad:"):
        case_bad(case[4:])
    elif case == "generated":
        case_generated(gen)
    else:
        globals()["case_" + case]()
    for f in failures:
        print("FAIL " + f, file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
