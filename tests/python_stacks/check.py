"""Python frames in allocation sites: runs a scenario of cases.py under LD_PRELOAD of
libvramtap.so and compares the snapshot's Python frames with what the scenario expects.

usage: check.py CASE HELPER_LIB      (CASE "signature" runs "nested" twice and compares)
       check.py frames VERSION      (frames.py under CPython VERSION: 3.9 ... 3.15 from pyenv,
                                     or "system" for VT_PYTHON; skipped when not installed)
       check.py fallback VERSION    (the same with the frame layout forced to mismatch)
       check.py layout VERSION      (layout_check.c compiled against that CPython's headers)

Each scenario runs twice: with Python frames read from the interpreter (the default; the
mechanism must be 3 there) and with VRAMTAP_PYTHON_STACKS=2, which follows Python calls with the
shadow stack (mechanism 1 or 2).

The scenarios run under VT_PYTHON (/usr/bin/python3), and under every interpreter listed in
VT_PYSTACK_PYTHONS (colon-separated) as well, e.g. other CPython versions between 3.9 and 3.15.
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
FRAMES = os.path.join(HERE, "frames.py")
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


def run(python, case, helper, extra=None, script=CASES):
    """Runs one scenario; returns (snapshot, expectations, stderr) or None after a failure."""
    out = tempfile.mkdtemp(prefix="vt-pystack-")
    try:
        # These set the scene before vramtap installs, so no bootstrap may install first.
        early = case in ("monitoring_taken", "thread_before_install")
        args = [python] + (["-S"] if early else []) + [script, case]
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
        snap = json.loads(subprocess.check_output([os.environ["VT_CLI"], "export", "--json", snaps[0]]))
        report = subprocess.check_output([os.environ["VT_CLI"], "report", snaps[0]], text=True)
        with open(os.path.join(out, "expect.json")) as f:
            expect = json.load(f)
        return snap, expect, p.stderr, report
    finally:
        shutil.rmtree(out, ignore_errors=True)


# What the snapshot's run record and the report say of a mechanism (pystack.h's numbering).
SAID = {3: ("read", "read from each thread's interpreter frames"),
        1: ("followed", "followed: a shadow stack kept on every Python call"),
        2: ("followed", "followed: a shadow stack kept on every Python call")}


def check_said(name, mech, snap, report):
    """The run record says whether the frames were read or followed, and the report shows it."""
    value, shown = SAID.get(mech, (None, None))
    got = (snap.get("run_record") or {}).get("python_frames")
    lines = [l.strip() for l in report.splitlines() if l.strip().startswith("Python frames")]
    want = ["%-26s %s" % ("Python frames", shown)] if shown else []
    if got != value or lines != want:
        fail("%s: mechanism %d: run_record.python_frames %r and the report's %r, expected %r and %r"
             % (name, mech, got, lines, value, want))


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
    first, second = (signatures(snap) for snap, _, _, _ in runs)
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


def skip_unless_sanitizer_runs(python):
    if SANITIZED:
        ok, why = sanitizer_can_run(python)
        if not ok:
            print("SKIP: %s does not start with the ASan runtime preloaded: %s" % (python, why))
            sys.exit(77)


def find_python(version):
    """The interpreter of CPython VERSION ("system": VT_PYTHON), or None."""
    if version == "system":
        return os.environ.get("VT_PYTHON", "/usr/bin/python3")
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found = glob.glob(os.path.join(root, "versions", version + ".*", "bin", "python" + version))

    def release(path):  # the newest patch release: 3.14.10 after 3.14.9
        patch = os.path.basename(os.path.dirname(os.path.dirname(path)))[len(version) + 1:]
        return int(patch) if patch.isdigit() else -1
    return max(found, key=release) if found else None


FALLBACK = re.compile(r"^vramtap: Python frames: CPython \d+\.\d+'s frames did not read as "
                      r"sys\._getframe\(\) shows them \(.*\); following Python calls instead")


def check_frames(python, fallback):
    """Every allocation of frames.py has the Python frames traceback.extract_stack() showed on
    the line of its cudaMalloc: same files, lines and functions (the qualified name from 3.11,
    as the snapshot writes it), the whole stack."""
    extra = {"VRAMTAP_TEST_PYFRAMES_SKEW": "1"} if fallback else {}
    result = run(python, "frames", "", extra, FRAMES)
    if not result:
        return
    snap, expect, stderr, report = result
    name = "%s %s" % (python, "fallback" if fallback else "frames")
    for e in expect["errors"]:
        fail("%s: %s" % (name, e))
    mech = expect["mechanism"]
    said = [line for line in stderr.splitlines() if "Python frames" in line]
    if fallback:
        if mech not in (1, 2) or len(said) != 1 or not FALLBACK.match(said[0]):
            fail("%s: mechanism %d, and the library said %s, not the mismatch once" %
                 (name, mech, said))
    elif mech != 3 or said:
        fail("%s: mechanism %d (not 3: frames read), and the library said %s" % (name, mech, said))
    check_said(name, mech, snap, report)
    if not fallback and expect["reused"] == 0:
        fail("%s: no code object made by exec was freed and its address reused: the check of "
             "the per-thread memo against reused addresses proved nothing" % name)
    by_size = sites_by_size(snap)
    for size, frames in sorted(expect["allocs"].items(), key=lambda kv: int(kv[0])):
        for file, line, short, qual in frames:
            if qual != short and not qual.endswith("." + short):
                fail("%s: %s bytes: co_qualname %s is not %s" % (name, size, qual, short))
        sites = by_size.get(int(size), [])
        got = [[g["file"], g["line"], g["function"]] for g in python_frames(sites[0])] \
            if len(sites) == 1 else None
        want = [[file, line, qual if sys_version(python) >= (3, 11) else short]
                for file, line, short, qual in frames]
        if got != want:
            fail("%s: %s bytes: expected %s, got %s" % (name, size, want, got))
    print("%s: mechanism %d, %d allocations checked, %d code addresses reused" % (
        name, mech, len(expect["allocs"]), expect["reused"]))


def check_layout(python, version):
    """src/tap/pylayout.h's row agrees with the version's own headers. Exit 77 without them or
    without a C compiler."""
    include = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                              "['include'])"], capture_output=True, text=True).stdout.strip()
    cc = shutil.which(os.environ.get("CC", "cc"))
    if not os.path.exists(os.path.join(include, "internal")) or not cc:
        print("SKIP: no C compiler, or no internal headers of CPython %s in %s" % (
            version, include or "(none)"))
        sys.exit(77)
    exe = os.path.join(tempfile.mkdtemp(prefix="vt-layout-"), "layout_check")
    try:
        p = subprocess.run([cc, "-std=gnu11", "-w", "-I", include, "-I",
                            os.path.join(include, "internal"), "-I",
                            os.path.join(os.environ["VT_SRC"], "src", "tap"),
                            os.path.join(HERE, "layout_check.c"), "-o", exe],
                           capture_output=True, text=True)
        if p.returncode != 0:
            fail("%s: layout_check.c does not compile against %s:\n%s" % (
                version, include, p.stderr[-3000:]))
            return
        p = subprocess.run([exe], capture_output=True, text=True)
        print(p.stdout, end="")
        if p.returncode != 0:
            fail("CPython %s: the layout table differs from the headers" % version)
    finally:
        shutil.rmtree(os.path.dirname(exe), ignore_errors=True)


def sys_version(python, known={}):
    if python not in known:
        out = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:2])"],
                             capture_output=True, text=True).stdout.split()
        known[python] = tuple(int(x) for x in out)
    return known[python]


def main():
    case, helper = sys.argv[1], sys.argv[2]
    if case in ("frames", "fallback", "layout"):
        python = find_python(helper)
        if not python:
            print("SKIP: CPython %s is not installed (pyenv root: %s)" % (
                helper, os.environ.get("PYENV_ROOT", "~/.pyenv")))
            sys.exit(77)
        skip_unless_sanitizer_runs(python)
        if case == "layout":
            check_layout(python, helper)
        else:
            check_frames(python, case == "fallback")
        print("%d failed" % len(failures) if failures else "all checks passed")
        sys.exit(1 if failures else 0)
    pythons = [os.environ.get("VT_PYTHON", "/usr/bin/python3")]
    pythons += [p for p in os.environ.get("VT_PYSTACK_PYTHONS", "").split(":") if p]
    for python in pythons:
        skip_unless_sanitizer_runs(python)
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
            check_said("%s %s" % (python, case), mech, result[0], result[3])
            compare(python, case, result[0], result[1])
            print("%s %s: mechanism %s, %d allocations checked" % (
                python, case, mech, len(result[1]["allocs"])))
    print("%d failed" % len(failures) if failures else "all checks passed")
    sys.exit(1 if failures else 0)


main()
