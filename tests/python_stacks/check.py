"""Python frames in allocation sites: runs a scenario of cases.py under LD_PRELOAD of
libvramtap.so and compares the snapshot's Python frames with what the scenario expects.

usage: check.py CASE HELPER_LIB      (CASE "signature" runs "nested" twice and compares)

Each scenario runs twice: with Python frames read from the interpreter (the default; the
mechanism must be 3 there) and with VRAMTAP_PYTHON_STACKS=2, which follows Python calls with the
shadow stack (mechanism 1 or 2).

The scenarios run under VT_PYTHON (/usr/bin/python3), and under every interpreter listed in
VT_PYSTACK_PYTHONS (colon-separated) as well, e.g. other CPython versions between 3.9 and 3.13.
Exit 0, 1 (a check failed) or 77 (skipped).
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# vramtap.<prog>.<host>[.r<rank>].<pid>.oom<N>[-<k>].json
POSTMORTEM = re.compile(r"\.oom(\d+)(?:-\d+)?\.json$")

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "cases.py")
LIB = os.environ["VT_LIB"]
PRELOAD = os.environ["VT_PRELOAD"]
SANITIZED = "address" in os.environ.get("VT_SANITIZE", "")
failures = []


def fail(what):
    failures.append(what)
    print("FAIL:", what)


def environment(helper, out, extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("VRAMTAP_") and k not in ("LD_PRELOAD", "PYTHONPATH")}
    env.update(LD_PRELOAD=PRELOAD, VRAMTAP_OUT=out, PYSTACK_HELPER=helper)
    env.update(extra)
    return env


def run(python, case, helper, extra=None):
    """Runs one scenario; returns (snapshot, expectations) or None after a failure."""
    out = tempfile.mkdtemp(prefix="vt-pystack-")
    try:
        # These set the scene before vramtap installs, so no bootstrap may install first.
        early = case in ("monitoring_taken", "thread_before_install")
        args = [python] + (["-S"] if early else []) + [CASES, case]
        p = subprocess.run(args, env=environment(helper, out, extra or {}), capture_output=True,
                           text=True, timeout=300)
        if p.returncode != 0:
            fail("%s %s: exit %d\n%s%s" % (python, case, p.returncode, p.stdout, p.stderr))
            return None
        snaps = [f for f in glob.glob(os.path.join(out, "vramtap.*.json"))
                 if not POSTMORTEM.search(f)]
        if len(snaps) != 1:
            fail("%s %s: %d snapshots in %s" % (python, case, len(snaps), out))
            return None
        with open(snaps[0]) as f:
            snap = json.load(f)
        with open(os.path.join(out, "expect.json")) as f:
            expect = json.load(f)
        return snap, expect
    finally:
        shutil.rmtree(out, ignore_errors=True)


def sites_by_size(snap):
    sites = {s["id"]: s for s in snap["sites"]}
    found = {}
    for a in snap["allocations"]:
        found.setdefault(a["size"], []).append(sites.get(a["site"]))
    return found


def python_frames(site):
    return [f for f in (site or {}).get("frames", []) if f["type"] == "python"]


def compare(python, case, snap, expect):
    name = "%s %s" % (python, case)
    for e in expect["errors"]:
        fail("%s: %s" % (name, e))
    by_size = sites_by_size(snap)
    for size, want in sorted(expect["allocs"].items(), key=lambda kv: int(kv[0])):
        sites = by_size.get(int(size), [])
        if len(sites) != 1:
            fail("%s: %d allocations of %s bytes in the snapshot" % (name, len(sites), size))
            continue
        got = python_frames(sites[0])
        frames = want["frames"]
        head = got[:len(frames)] if not want["whole"] else got
        ok = len(head) == len(frames) and all(
            g["file"] == CASES and [g["function"], g["line"]] == w for g, w in zip(head, frames))
        # A part of the stack must still sit on top of more Python frames.
        if ok and not want["whole"] and len(got) <= len(frames):
            ok = False
        if not ok:
            fail("%s: %s bytes: expected %s%s, got %s" % (
                name, size, frames, "" if want["whole"] else " on top of more",
                [(g["file"], g["function"], g["line"]) for g in got][:12]))
    if case == "off" and snap.get("stacks", {}).get("python") is not False:
        fail("%s: the snapshot does not say that Python stacks were off" % name)


def signatures(snap):
    return {size: sites[0]["signature"] for size, sites in sites_by_size(snap).items()
            if len(sites) == 1}


def check_signature(python, helper):
    runs = [run(python, "nested", helper) for _ in range(2)]
    if None in runs:
        return
    first, second = (signatures(snap) for snap, _ in runs)
    if first != second:
        fail("%s: signatures differ between two runs of the same code: %s vs %s" %
             (python, first, second))
    # Allocations whose Python frames differ are different code paths.
    paths = {}
    for size, want in runs[0][1]["allocs"].items():
        paths.setdefault(first.get(int(size)), set()).add(json.dumps(want["frames"]))
    shared = {sig: p for sig, p in paths.items() if len(p) > 1}
    if shared:
        fail("%s: different code paths share a signature: %s" % (python, shared))


def sanitizer_can_run(python):
    p = subprocess.run([python, "-c", "pass"], env=environment("", tempfile.gettempdir(), {}),
                       capture_output=True, text=True, timeout=120)
    return p.returncode == 0, (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]


def main():
    case, helper = sys.argv[1], sys.argv[2]
    pythons = [os.environ.get("VT_PYTHON", "/usr/bin/python3")]
    pythons += [p for p in os.environ.get("VT_PYSTACK_PYTHONS", "").split(":") if p]
    for python in pythons:
        if SANITIZED:
            ok, why = sanitizer_can_run(python)
            if not ok:
                print("SKIP: %s does not start with the ASan runtime preloaded: %s" % (python, why))
                sys.exit(77)
        if case == "signature":
            check_signature(python, helper)
            continue
        for follow in ((False,) if case == "off" else (False, True)):
            extra = {"VRAMTAP_PYTHON_STACKS": "0" if case == "off" else "2" if follow else "1"}
            result = run(python, case, helper, extra)
            if not result:
                continue
            mech = result[1].get("mechanism", 0)
            if case != "off" and (mech in (1, 2)) != follow:
                fail("%s %s: mechanism %d with VRAMTAP_PYTHON_STACKS=%s" % (
                    python, case, mech, extra["VRAMTAP_PYTHON_STACKS"]))
            compare(python, case, *result)
            print("%s %s: mechanism %s, %d allocations checked" % (
                python, case, mech, len(result[1]["allocs"])))
    print("%d failed" % len(failures) if failures else "all checks passed")
    sys.exit(1 if failures else 0)


main()
