"""The bill by nn.Module path: runs modules_workload.py plain and with checkpointing under
`vramtap run` and holds `report --json`, the text report and `diff` to the workload's own books
(each allocation made by a module that knows its own path): every path's bytes at the peak by
category, saved for backward and recomputed, to the byte; each parent path the sum of its
children; the recomputation and the smaller saved set under checkpointing; the difference by
module path."""

import atexit
import glob
import json
import os
import re
import shutil
import subprocess
import tempfile

from vtpy import CLI, HERE, PYTHON, check, clean_env, finish, require_python_under_sanitizer, show

require_python_under_sanitizer()
tmp = tempfile.mkdtemp(prefix="vt-modules-")
atexit.register(shutil.rmtree, tmp, True)  # finish() exits through sys.exit: atexit still runs
env = clean_env(STANDIN_CAPACITY=str(1 << 30))
MiB = 1 << 20
RECOMPUTED = 1 << 31
LEAVES = ["enc.layers.%d.%s" % (k, m) for k in range(3) for m in ("attn", "mlp")] + ["head"]


def run(variant, followed=False, builtins=True):
    """Runs the workload; followed: with Python frames followed call by call (a layout forced
    to mismatch), where the hooks keep the current module themselves; without builtins: the
    hooks call the library through ctypes and tell nested module calls in Python."""
    name = variant + (" followed" if followed else "") + ("" if builtins else " no builtins")
    out = os.path.join(tmp, name)
    expect_path = os.path.join(tmp, name + ".expect.json")
    p = subprocess.run([CLI, "run", "--out", out, "--", PYTHON,
                        os.path.join(HERE, "modules_workload.py"), variant, expect_path],
                       env=dict(env, VRAMTAP_TEST_PYFRAMES_SKEW="1" if followed else "0",
                                VRAMTAP_TEST_NO_BUILTINS="0" if builtins else "1"),
                       capture_output=True, text=True, timeout=300)
    variant = name
    snaps = sorted(glob.glob(os.path.join(out, "vramtap.*.json")))
    if not check(p.returncode == 0 and len(snaps) == 1, variant + ": one snapshot",
                 "%d snapshots, %s" % (len(snaps), show(p))):
        finish()
    with open(expect_path) as f:
        expect = json.load(f)
    r = subprocess.run([CLI, "report", "--json", snaps[0]], capture_output=True, text=True)
    if not check(r.returncode == 0, variant + ": report --json", r.stderr):
        finish()
    return snaps[0], expect, json.loads(r.stdout)["devices"][0]


def rows_by_path(dev):
    return {m["path"]: m for m in dev["modules"]}


def nonzero(cats):
    return {k: v for k, v in cats.items() if v}


def check_bill(variant, expect, dev, leaves=LEAVES):
    check(dev["peak_bytes"] == expect["peak_bytes"], variant + ": the peak",
          "%d, expected %d" % (dev["peak_bytes"], expect["peak_bytes"]))
    check(expect["output_hooks"] == [2, 2], variant + ": the program's hook beside vramtap's",
          expect["output_hooks"])
    rows = rows_by_path(dev)
    for path in leaves:
        want = expect["modules"].get(path, {"bytes": 0, "categories": {}, "saved_for_backward": 0,
                                            "recomputed": 0, "count": 0})
        got = rows.get(path)
        if not check(got is not None, "%s: a row for %s" % (variant, path), sorted(map(str, rows))):
            continue
        for key in ("bytes", "saved_for_backward", "recomputed", "count"):
            check(got[key] == want[key], "%s: %s %s" % (variant, path, key),
                  "%d, expected %d" % (got[key], want[key]))
        check(got["self_bytes"] == want["bytes"], "%s: %s holds its bytes itself" % (variant, path),
              got)
        check(nonzero(got["categories"]) == want["categories"],
              "%s: %s by category" % (variant, path),
              "%s, expected %s" % (nonzero(got["categories"]), want["categories"]))
    # each parent sums its children; the root's own class names it apart
    for parent in ("enc", "enc.layers", "enc.layers.0", "enc.layers.1", "enc.layers.2"):
        kids = [p for p in leaves if p.startswith(parent + ".")]
        for key in ("bytes", "saved_for_backward", "recomputed"):
            want = sum(expect["modules"].get(p, {}).get(key, 0) for p in kids)
            check(rows.get(parent, {}).get(key) == want, "%s: %s %s sums its children"
                  % (variant, parent, key), "%s, expected %d" % (rows.get(parent), want))
    check("Net" in rows and rows["Net"]["bytes"] == 0, variant + ": the root named by its class",
          sorted(map(str, rows)))
    outside = rows.get(None, {}).get("categories", {})
    check(nonzero(outside) == nonzero(expect["outside"]), variant + ": outside modules",
          "%s, expected %s" % (outside, expect["outside"]))
    check(expect["after_forward"] == [0, 0], variant + ": the path before the forward put back",
          expect["after_forward"])
    probe = expect["in_backward"]
    check(len(probe) == 2 and probe[0] == probe[1] and probe[0] & RECOMPUTED
          and probe[0] & ~RECOMPUTED, variant + ": a module called in backward is current, "
          "recomputed", ["%#x" % v for v in probe])


plain_snap, plain_expect, plain_dev = run("plain")
ckpt_snap, ckpt_expect, ckpt_dev = run("checkpoint")
check_bill("plain", plain_expect, plain_dev)
check_bill("checkpoint", ckpt_expect, ckpt_dev)
# The same bills where the library cannot read Python frames, and a module named_modules() does
# not name, both ways.
def python_frames(snap):
    return json.loads(subprocess.check_output([CLI, "export", "--json", snap]))[
        "run_record"].get("python_frames")


check(python_frames(plain_snap) == "read", "frames read in the first runs",
      python_frames(plain_snap))
for variant in ("plain", "checkpoint"):
    snap, expect, dev = run(variant, followed=True)
    check(python_frames(snap) == "followed", variant + ": frames followed", python_frames(snap))
    check_bill(variant + " followed", expect, dev)
    for followed in (False, True):
        snap, expect, dev = run(variant, followed, builtins=False)
        check_bill(variant + (" followed" if followed else "") + " no builtins", expect, dev)
for followed in (False, True):
    _, unlisted_expect, unlisted_dev = run("unlisted", followed)
    check(unlisted_expect["modules"]["enc.Block"]["saved_for_backward"] == 7 * MiB,
          "the unlisted block saves its buffer", unlisted_expect["modules"].get("enc.Block"))
    check_bill("unlisted" + (" followed" if followed else ""), unlisted_expect, unlisted_dev,
               LEAVES + ["enc.Block"])

# The workload's own figures say what the test is about: distinct saved sizes without
# checkpointing, a recomputation and a smaller saved set with it.
saved = [plain_expect["modules"][p]["saved_for_backward"]
         for p in LEAVES if p in plain_expect["modules"]]
check(len(saved) == 6 and len(set(saved)) == 6, "six paths save distinct sizes", saved)
plain_saved = rows_by_path(plain_dev)["enc"]["saved_for_backward"]
ckpt_saved = rows_by_path(ckpt_dev)["enc"]["saved_for_backward"]
check(ckpt_saved < plain_saved == 21 * MiB, "checkpointing saves less",
      "%d with, %d without" % (ckpt_saved, plain_saved))
check(rows_by_path(ckpt_dev)["enc"]["recomputed"] == 11 * MiB,
      "the recomputation of the last layer", rows_by_path(ckpt_dev)["enc"])

# The text report names the paths and says what is saved for backward.
text = subprocess.run([CLI, "report", "--modules", "all", plain_snap], capture_output=True,
                      text=True).stdout
section = text[text.find("by module"):text.find("top sites")]
check("saved for backward" in section, "the text says what is saved for backward", section)
for k in range(3):
    for m, size in (("attn", 2 * k + 1), ("mlp", 2 * k + 2)):
        want = plain_expect["modules"]["enc.layers.%d.%s" % (k, m)]
        row = r"\n {10}%s +%.2f MiB +%d x  saved %.2f MiB" % (
            m, want["bytes"] / MiB, want["count"], want["saved_for_backward"] / MiB)
        check(re.search(row, section), "the text names enc.layers.%d.%s" % (k, m), section)
check(re.search(r"\n    enc +22\.50 MiB +7 x  saved 21\.00 MiB", section), "enc sums its paths",
      section)
ckpt_text = subprocess.run([CLI, "report", ckpt_snap], capture_output=True, text=True).stdout
check(re.search(r"\n {8}2 +12\.50 MiB +3 x  recomputed 11\.00 MiB", ckpt_text),
      "the text shows the recomputation", ckpt_text)

# diff by module path
d = subprocess.run([CLI, "diff", "--json", plain_snap, ckpt_snap], capture_output=True,
                   text=True)
if check(d.returncode == 0, "diff --json", d.stderr):
    mods = {m["path"]: m for m in json.loads(d.stdout)["devices"][0]["modules"]}
    for path in LEAVES:
        a = plain_expect["modules"].get(path, {})
        b = ckpt_expect["modules"].get(path, {})
        got = mods.get(path)
        want = (a.get("bytes", 0), b.get("bytes", 0), a.get("saved_for_backward", 0),
                b.get("saved_for_backward", 0), a.get("recomputed", 0), b.get("recomputed", 0))
        check(got and (got["a"]["bytes"], got["b"]["bytes"], got["a"]["saved_for_backward"],
                       got["b"]["saved_for_backward"], got["a"]["recomputed"],
                       got["b"]["recomputed"]) == want and
              got["change"] == want[1] - want[0], "diff of " + path, "%s, expected %s"
              % (got, want))
dtext = subprocess.run([CLI, "diff", plain_snap, ckpt_snap], capture_output=True,
                       text=True).stdout
check(re.search(r"\n    enc\.layers\.1\.attn +3\.00 MiB -> 0 B +-3\.00 MiB  saved 3\.00 MiB -> 0 B\n",
                dtext), "the text diff by module", dtext)
check(re.search(r"\n    enc\.layers\.2\.attn +5\.00 MiB -> 5\.00 MiB +0 B  saved 5\.00 MiB -> 0 B  "
                r"recomputed 0 B -> 5\.00 MiB\n", dtext), "the text diff shows the recomputation",
      dtext)

# VRAMTAP_MODULES=0 switches the paths off.
off = os.path.join(tmp, "off")
p = subprocess.run([CLI, "run", "--out", off, "--", PYTHON,
                    os.path.join(HERE, "modules_workload.py"), "plain",
                    os.path.join(tmp, "off.json")],
                   env=dict(env, VRAMTAP_MODULES="0"), capture_output=True, text=True, timeout=300)
snaps = glob.glob(os.path.join(off, "vramtap.*.json"))
if check(p.returncode == 0 and len(snaps) == 1, "a run with VRAMTAP_MODULES=0", show(p)):
    snap = json.loads(subprocess.check_output([CLI, "export", "--json", snaps[0]]))
    check(snap["module_paths"] == [] and not any("module_path" in a for a in snap["allocations"]),
          "no module path with VRAMTAP_MODULES=0", snap["module_paths"])
finish()
