"""Runs identity_workload.py VARIANT under `vramtap run` over host-backed stand-in memory and
holds `vramtap report --json` to the workload's own account: every category to the byte, the
evidence that decided each byte (identity for what the hooks labelled, timing for the rest),
the run record field by field, and `report --record`'s Markdown.

    check_identity.py flat|none|accum|main_grad|native
"""

import glob
import json
import os
import subprocess
import sys

from vtpy import (CLI, HERE, PYTHON, check, clean_env, finish, require_python_under_sanitizer,
                  show, tmpdir)

variant = sys.argv[1]
require_python_under_sanitizer()
tmp = tmpdir()
expect_path = os.path.join(tmp, "expect.json")
out = os.path.join(tmp, "out")
env = clean_env(STANDIN_HOST_BACKED="1", STANDIN_CAPACITY=str(1 << 30))
mode = ["--mode", "native"] if variant == "native" else []
p = subprocess.run([CLI, "run", "--out", out] + mode + ["--", PYTHON,
                    os.path.join(HERE, "identity_workload.py"), variant, expect_path],
                   env=env, capture_output=True, text=True, timeout=300)
snaps = sorted(glob.glob(os.path.join(out, "vramtap.*.json")))
if not check(p.returncode == 0 and len(snaps) == 1, "workload ran and wrote one snapshot",
             "%d snapshots, %s" % (len(snaps), show(p))):
    finish()
check("vramtap:" not in p.stderr, "nothing said on stderr", p.stderr)
with open(expect_path) as f:
    expect = json.load(f)
snap = json.loads(subprocess.check_output([CLI, "export", "--json", snaps[0]]))

r = subprocess.run([CLI, "report", "--json", snaps[0]], capture_output=True, text=True)
if not check(r.returncode == 0, "report --json", r.stderr):
    finish()
dev = json.loads(r.stdout)["devices"][0]
check(dev["categories"] == expect["categories"], "categories to the byte",
      "\n report   %s\n expected %s" % (dev["categories"], expect["categories"]))
check(dev["evidence"] == expect["evidence"], "evidence of each category",
      "\n report   %s\n expected %s" % (dev["evidence"], expect["evidence"]))
theory = dev["theory"]
if expect["theory"] is None:
    check(theory is None, "no theory in native mode", theory)
else:
    figures = {c: {k: v for k, v in row.items() if k != "explanation"}
               for c, row in (theory or {}).items()}
    check(figures == expect["theory"], "theory beside measurement",
          "\n report   %s\n expected %s" % (figures, expect["theory"]))
    why = theory["parameters"]["explanation"] if theory else None
    planted = expect["theory"]["parameters"]["measured_bytes"] - \
        expect["theory"]["parameters"]["expected_bytes"]
    check(why is None if not planted else why.startswith("+64.00 KiB: ")
          and why.endswith("(64.00 KiB of it billed by timing)"),
          "the planted difference explained", why)
    check(theory and theory["gradients"]["explanation"] is None
          and theory["optimizer_state"]["explanation"] is None,
          "gradients and Adam's state as the rules say", theory)
if expect["theory"] is not None:
    text = subprocess.run([CLI, "report", snaps[0]], capture_output=True, text=True).stdout
    check("  theory beside measurement  Adam: 2 buffers per trainable parameter\n" in text
          and "expected  as expected\n    optimizer state " in text,
          "the report shows the theory", text)
check(dev["library_workspace_bytes"] == 0, "no library workspace",
      dev["library_workspace_bytes"])
check(snap["identity"]["dropped"] == 0, "no label dropped", snap["identity"])

record = dict(snap["run_record"])
# The library's own key: Python frames read from the interpreter (CPython 3.9-3.13).
check(record.pop("python_frames", None) == "read", "run_record.python_frames",
      snap["run_record"].get("python_frames"))
for key, want in sorted(expect["record"].items()):
    check(record.get(key) == want, "run_record.%s" % key,
          "snapshot %r, expected %r" % (record.get(key), want))
check(sorted(record) == sorted(expect["record"]), "run_record keys",
      "snapshot %s, expected %s" % (sorted(record), sorted(expect["record"])))

# --record: a Markdown table, every row from the record and the device
rec = expect["record"]
peak = snap["devices"][0]["peak_bytes"]
MiB = 1 << 20


def fmt_bytes(n):
    return "%d B" % n if n < 1024 else "%.2f KiB" % (n / 1024) if n < MiB else "%.2f MiB" % (n / MiB)


def count(n):
    return "{:,}".format(n)


want = "\n".join([
    "| run | %s |" % snaps[0],
    "|---|---|",
    "| GPU | cuda:0 %s, %s |" % (snap["devices"][0]["name"],
                                "%.2f GiB" % (snap["devices"][0]["total_bytes"] / (1 << 30))),
    "| framework | %s |" % rec["framework"],
    "| model | Net, %s parameters (%s trainable), float32, %s |" % (
        count(rec["parameters"]), count(rec["trainable_parameters"]),
        fmt_bytes(rec["parameter_bytes"])),
    "| batch size | 4 |",
    "| micro-batches per step | %d |" % rec["micro_batches"],
    "| optimizer | %s |" % rec["optimizer"],
    "| input shape | 4x16 (float32) |",
    "| AMP | %s |" % rec["amp"],
    "| activation checkpointing | %s |" % rec["gradient_checkpointing"],
    "| Python frames | read from each thread's interpreter frames |",
    "| peak allocated | %s (cuda:0) |" % fmt_bytes(peak),
]) + "\n"
m = subprocess.run([CLI, "report", "--record", snaps[0]], capture_output=True, text=True)
check(m.returncode == 0 and m.stdout == want, "report --record",
      "exit %d\n--- got\n%s--- expected\n%s" % (m.returncode, m.stdout, want))
finish()
