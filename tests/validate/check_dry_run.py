"""Runs `scripts/gpu-validate --dry-run` over this build and holds its report to what a dry run
must show: exit 0, one Markdown and one JSON report in the directory given, every section, the
checks that the stand-in can answer passed, the GPU-only ones marked as skipped for the dry run,
and nothing written into docs/validation."""

import glob
import json
import os
import shutil
import re
import subprocess
import sys
import tempfile

SRC = os.environ["VT_SRC"]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


if "address" in os.environ.get("VT_SANITIZE", ""):
    print("SKIP: the dry run starts many Python processes; it runs in the plain build")
    sys.exit(77)

report_dir = tempfile.mkdtemp(prefix="vt-validate-report-")
python = os.environ.get("VT_PYTHON", "/usr/bin/python3")
# The frames check names the version of the Python it ran on.
PYV = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                     capture_output=True, text=True).stdout.strip()
work = tempfile.mkdtemp(prefix="vt-validate-work-")
docs = os.path.join(SRC, "docs", "validation")
env = {k: v for k, v in os.environ.items() if not k.startswith(("VRAMTAP_", "STANDIN_"))
       and k not in ("LD_PRELOAD", "PYTORCH_CUDA_ALLOC_CONF")}
env["VT_PYTHON"] = python
p = subprocess.run([os.path.join(SRC, "scripts", "gpu-validate"), "--dry-run", "--build",
                    os.environ["VT_BUILD"], "--report-dir", report_dir, "--work", work],
                   env=env, capture_output=True, text=True, timeout=560)
sys.stdout.write(p.stdout)
sys.stderr.write(p.stderr[-3000:])
check(p.returncode == 0, "gpu-validate --dry-run exited %d" % p.returncode)
mds = glob.glob(os.path.join(report_dir, "*.md"))
jsons = glob.glob(os.path.join(report_dir, "*.json"))
check(len(mds) == 1 and len(jsons) == 1, "one .md and one .json report, got %s" % (mds + jsons))
check(not glob.glob(os.path.join(docs, "*dry-run*")), "a dry run wrote into docs/validation")
if mds and jsons:
    text = open(mds[0]).read()
    for title in ("## Summary", "## 1. Machine and versions", "## 2. CUDA C", "## 3. PyTorch, tensor mode",
                  "## 4. PyTorch, native allocator", "## 5. Against PyTorch's own tools",
                  "## 6. Out of memory", "## 7. Attached through CUPTI",
                  "## 8. Python frames on this Python",
                  "## 9. What an allocation costs on this driver", "## Raw data",
                  "Dry run"):
        check(title in text, "the report has no %r" % title)
    doc = json.load(open(jsons[0]))
    checks = doc["checks"]
    by_name = {c["name"]: c for c in checks}
    for c in checks:
        check(c["status"] != "FAIL", "exact check failed: %s (expected %s, got %s; %s)" % (
            c["name"], c["expected"], c["got"], c["note"][:300]))
        check(c["status"] != "outside tolerance", "outside tolerance: %s" % c["name"])
        if c["status"] == "skipped":
            check("dry run" in c["note"] or "torch 1" in c["note"],
                  "skipped without saying why: %s (%s)" % (c["name"], c["note"]))
    # What the stand-in can answer must have been answered, not skipped.
    for name in ("dynamic runtime: live set at the peak (address, size, kind)",
                 "dynamic runtime: API name recorded for each route",
                 "dynamic runtime: cudaMemGetInfo's change from start to peak",
                 "dynamic runtime: copies by direction and host kind, and the downloads waited for",
                 "tensor mode, fp32: vramtap classifies them as parameters",
                 "tensor mode, fp32: vramtap classifies them as gradients",
                 "tensor mode, bf16: vramtap classifies them as optimizer_state",
                 "tensor mode, fp32: peak vs torch.cuda.max_memory_allocated()",
                 "native allocator: vramtap's peak in PyTorch's segments vs max_memory_reserved()",
                 "OOM (device full): the failed request (size, api, phase, step)",
                 "OOM (device full): the program's live tensors are all in it",
                 "copies, pageable batches: bytes uploaded a step",
                 "copies, pageable batches: of them from pageable memory",
                 "copies, pageable batches: pin_memory advised",
                 "copies, pin_memory=True: of them from pageable memory",
                 "copies, pin_memory=True: pin_memory advised",
                 "attached, dynamic runtime: recorded through CUPTI",
                 "attached, dynamic runtime: live set at the peak (address, size, kind)",
                 "attached, dynamic runtime: API name recorded for each route",
                 "coverage, dynamic runtime: allocations interposition missed",
                 "coverage, dynamic runtime: allocations seen by CUPTI and recorded by "
                 "interposition",
                 "attached, fp32: recorded through CUPTI",
                 "attached, fp32: vramtap classifies them as parameters",
                 "coverage, PyTorch fp32: allocations interposition missed",
                 "frames.py ran under vramtap",
                 "CPython %s: frames read from the interpreter, not followed" % PYV,
                 "CPython %s: every allocation's Python frames equal traceback.extract_stack()"
                 % PYV,
                 "CPython %s: freed exec'd code whose address was reused" % PYV,
                 "the pair program builds", "every run succeeded",
                 "8 threads, every event buffered: events applied from the buffers",
                 "8 threads, every event buffered: allocations, frees, unknown frees, dropped",
                 "8 threads, every event buffered: live at exit",
                 "8 threads, every event buffered: the peak",
                 "8 threads, every event buffered: the history replayed in order"):
        check(by_name.get(name, {}).get("status") == "pass",
              "%s: %s" % (name, by_name.get(name, {}).get("status", "missing")))
    check(by_name.get("static runtime: program builds", {}).get("status") in ("pass", "skipped"),
          "static runtime: program builds: %s" % by_name.get("static runtime: program builds"))
    check(by_name.get("static runtime: run under vramtap", {}).get("status") in ("skipped", None),
          "the static runtime cannot run over the stand-in and must say it was skipped")
    check(doc["raw"].get("timing_table"), "no step-time table")
    # The stand-in's pair costs are shown, not held to the GPU's bounds.
    for name in ("1 thread: vramtap's added cost a pair, stacks off",
                 "1 thread: vramtap's added cost a pair, native stacks (the default)",
                 "8 threads: added cost a pair over 1 thread's, stacks off"):
        check(by_name.get(name, {}).get("status") == "info",
              "%s: %s" % (name, by_name.get(name, {}).get("status", "missing")))
    huge = by_name.get("the history's huge pages (200,000 pairs, stacks off)", {})
    check(huge.get("status") == "info" and huge.get("note", "").startswith("exit 0;")
          and re.fullmatch(r"kept|small pages after a chunk of [0-9]+ us", str(huge.get("got"))),
          "the history's huge pages: %s" % huge)
    cost = doc["raw"].get("cost", {})
    check(len(cost.get("table", [])) == 8 and cost.get("rounds") == 3,
          "the cost table: 4 configurations on 1 and 8 threads, 3 rounds: %s" % cost.get("table"))
    never = by_name.get("8 threads, never buffered: added cost a pair over 1 thread's", {})
    check(never.get("status") == "info" and re.fullmatch(r"[0-9.]+x|infx", str(never.get("got")))
          and "VRAMTAP_THREAD_BUFFERS=0" in never.get("note", ""),
          "8 threads never buffered: %s" % never)
    cov = doc["raw"].get("coverage", {}).get("coverage, dynamic runtime", {})
    check(cov.get("cupti", {}).get("allocations", 0) > 0, "no coverage figures for the routes: %s"
          % cov)
for f in failures:
    print("FAIL:", f)
print("%d failures" % len(failures))
if not failures:  # kept only to look into a failure
    for folder in (report_dir, work):
        shutil.rmtree(folder, ignore_errors=True)
sys.exit(1 if failures else 0)
