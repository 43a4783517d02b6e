#!/usr/bin/python3
"""The README's commands work when pasted, as a newcomer would, in a fresh copy of the
repository (the files git has, nothing built): its build and install line (into a temporary
prefix), `scripts/demo`, and every command of its first block, run with the installed `vramtap`
over the stand-in of the CUDA driver, the simulated training job in place of `python train.py`.
Each output is checked for its exact figures, and each path vramtap prints is pasted as it is
printed. A command added to that block without a case here fails the test.

The copy is built plainly, so a sanitized build of the suite skips this test (its plain run has
it)."""
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

SRC = os.environ["VT_SRC"]
sys.path.insert(0, os.path.join(SRC, "tests", "import"))
from common import check as expect, done as finish  # noqa: E402  (the import tests' helpers)

if os.environ.get("VT_SANITIZE", "none") not in ("", "none"):
    print("skipped: the fresh copy is built without sanitizers; the plain build runs this test")
    sys.exit(77)
if not os.path.isdir(os.path.join(SRC, ".git")) and not os.path.isfile(os.path.join(SRC, ".git")):
    print("skipped: %s is not a git checkout, so there is no clone to copy" % SRC)
    sys.exit(77)

top = tempfile.mkdtemp(prefix="vt-readme-")
fresh, prefix, work = (os.path.join(top, d) for d in ("vramtap", "prefix", "work"))
# A clone: the files git tracks, and new ones not yet committed; nothing ignored, nothing built.
names = subprocess.run(["git", "-C", SRC, "ls-files", "-z", "-co", "--exclude-standard"],
                       capture_output=True, check=True).stdout.decode().split("\0")
for name in filter(None, names):
    if os.path.isfile(os.path.join(SRC, name)):
        os.makedirs(os.path.join(fresh, os.path.dirname(name)), exist_ok=True)
        shutil.copy2(os.path.join(SRC, name), os.path.join(fresh, name), follow_symlinks=False)
os.makedirs(work)

# Nothing of the test's own environment leaks in: no preload, no vramtap or allocator settings.
env = {k: v for k, v in os.environ.items() if not k.startswith(("VRAMTAP_", "VT_", "PYTORCH_",
                                                                "XLA_", "TF_", "LD_", "ASAN_"))}


def sh(cmd, cwd, extra=None, timeout=900):
    p = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=dict(env, **(extra or {})),
                       capture_output=True, text=True, timeout=timeout)
    return p


with open(os.path.join(fresh, "README.md")) as f:
    readme = f.read()
blocks = re.findall(r"^```\n(.*?)^```", readme, re.S | re.M)

# Build and install, as the README says, into a prefix of our own (without the fuzz targets,
# which a user does not run).
install = "meson setup build && ninja -C build && ninja -C build install"
expect(install in readme, "the README's install line: %r not found" % install)
p = sh(install.replace("meson setup build", "meson setup build --prefix=%s -Dfuzz=disabled"
                       % shlex.quote(prefix)), fresh, timeout=1500)
if not expect(p.returncode == 0, "%s: exit %d\n%s%s" % (install, p.returncode, p.stdout[-3000:],
                                                        p.stderr[-3000:])):
    finish()
env["PATH"] = os.path.join(prefix, "bin") + ":" + env.get("PATH", "")
standin = os.path.join(fresh, "build", "tests", "standin")
sim = os.path.join(fresh, "build", "tests", "e2e", "train_sim")
run_env = {"LD_LIBRARY_PATH": standin}  # the stand-in in place of NVIDIA's libraries
lib = sh("vramtap lib", work).stdout.strip()
expect(lib.startswith(prefix + "/") and lib.endswith("/libvramtap.so") and os.path.isfile(lib),
       "vramtap lib names the installed library: %r" % lib)

# Quick start: the demo reports and diffs a simulated run (and reuses the build).
expect("scripts/demo" in blocks[1] if len(blocks) > 1 else False, "the quick start runs scripts/demo")
p = sh("scripts/demo", fresh, timeout=900)
demo = p.stdout
expect(p.returncode == 0, "scripts/demo: exit %d\n%s" % (p.returncode, p.stderr[-2000:]))
for line in ("    parameters                    17.00 MiB  22.2%  ####................",
             "    gradients                     16.00 MiB  20.9%  ####................",
             "    optimizer state               32.00 MiB  41.8%  ########............",
             "    activations                    9.50 MiB  12.4%  ##..................",
             "    temporary                      2.00 MiB   2.6%  #...................",
             "    total                         76.50 MiB 100.0%  in 24 allocations",
             "  peak                            76.50 MiB            86.00 MiB     +9.50 MiB   +12.4%"):
    expect(line in demo.splitlines(), "scripts/demo prints %r:\n%s" % (line, demo))
grew = demo.split("sites that grew most\n")[-1].splitlines()[:3]
expect(len(grew) == 3 and all(re.search(r"[+]\S+ \S+ .* e2e/train_sim\.c:\d+ alloc < "
                                         r"e2e/train_sim\.c:\d+ main$", l) for l in grew)
       and "libc.so" not in demo,
       "the demo's sites name lines of train_sim.c, nothing of the C library's start-up: %r" % grew)

# The first block, command by command.
ran = {}


def exit_line(stderr, what):
    """The command vramtap's exit line says to paste, as printed."""
    m = re.search(r"%s.*; to read it: (vramtap report \S+)$" % what, stderr, re.M)
    expect(m, "the exit line after %s:\n%s" % (what, stderr))
    return m.group(1) if m else "false"


def run_job(batch, folder, preload=False, extra=None):
    os.makedirs(folder, exist_ok=True)
    job = "%s --batch %d --steps 3" % (shlex.quote(sim), batch)
    p = sh('LD_PRELOAD=$(vramtap lib) ' + job if preload else "vramtap run -- " + job, folder,
           dict(run_env, **(extra or {})))
    return p


def case_run(cmd, comment):
    bs4, bs8 = os.path.join(work, "bs4"), os.path.join(work, "bs8")
    p = run_job(4, bs4)
    lines = [l for l in p.stderr.splitlines() if l.startswith("vramtap:")]
    snap = glob.glob(os.path.join(bs4, "vramtap.train_sim.*.json"))
    expect(p.returncode == 0 and len(snap) == 1 and lines == [
        "vramtap: snapshot written, cuda:0 peak 76.50 MiB in backward of step 1; to read it: "
        "vramtap report " + (snap[0] if snap else "?")],
        "%s: one line at exit, the snapshot's absolute path (nothing about tensor mode for a "
        "program that is not Python): %r" % (cmd, lines))
    ran["report"] = exit_line(p.stderr, "snapshot written")
    ran["bs4"] = snap[0] if snap else "?"
    p = run_job(8, bs8)
    snap8 = glob.glob(os.path.join(bs8, "vramtap.train_sim.*.json"))
    expect(p.returncode == 0 and len(snap8) == 1, "batch 8: %s" % p.stderr)
    ran["bs8"] = snap8[0] if snap8 else "?"
    if expect("LD_PRELOAD=$(vramtap lib)" in comment, "the preload line: %r" % comment):
        pre = os.path.join(work, "preload")
        p = run_job(4, pre, preload=True)
        expect(p.returncode == 0 and re.search(
            r"^vramtap: snapshot written, cuda:0 peak 76.50 MiB in backward of step 1; to read "
            r"it: vramtap report %s/vramtap\.train_sim\.[^ ]+\.json$" % re.escape(pre), p.stderr,
            re.M), "LD_PRELOAD=$(vramtap lib) writes a snapshot and says so:\n%s" % p.stderr)


def case_report(cmd, comment):
    if ".oom" in cmd:
        folder = os.path.join(work, "oom")
        p = run_job(4, folder, extra={"STANDIN_CAPACITY": str(40 << 20)})
        pasted = exit_line(p.stderr, "out-of-memory post-mortem 1 written")
        r = sh(pasted, work)
        expect(r.returncode == 0 and "out of memory on cuda:0" in r.stdout.splitlines()
               and re.search(r"^  asked +4\.00 MiB via cuMemAlloc_v2, optimizer of step 0, at ",
                             r.stdout, re.M)
               and "    total                         37.50 MiB 100.0%  in 11 allocations"
               in r.stdout.splitlines(),
               "%s (as printed): the post-mortem\n%s%s" % (pasted, r.stdout, r.stderr))
        # the README's glob in that folder: the bill, then the post-mortem, in text and --json
        r = sh("vramtap report vramtap.train_sim.*.json", folder)
        expect(r.returncode == 0 and r.stdout.startswith("vramtap report  vramtap.train_sim.")
               and "(out-of-memory post-mortem)" in r.stdout and "heaviest" not in r.stdout,
               "the glob after an OOM: the bill, then the post-mortem\n%s" % r.stdout)
        r = sh("vramtap report --json vramtap.train_sim.*.json", folder)
        doc = json.loads(r.stdout or "{}")
        expect(doc.get("kind") == "exit" and [d["kind"] for d in doc.get("postmortems", [])]
               == ["oom"], "the glob after an OOM, --json: the bill with its post-mortem")
        return
    r = sh(ran.get("report", "false"), work)
    out = r.stdout.splitlines()
    expect(r.returncode == 0 and re.match(r"  peak        76\.50 MiB at \d+\.\d\d s, backward of "
                                          r"step 1 \(0\.5% of the device\)$",
                                          next((l for l in out if l.startswith("  peak ")), ""))
           and "    total                         76.50 MiB 100.0%  in 24 allocations" in out,
           "%s (as printed at exit): the bill\n%s%s" % (ran.get("report"), r.stdout, r.stderr))
    r = sh("vramtap report vramtap.train_sim.*.json", os.path.join(work, "bs4"))
    expect(r.stdout.startswith("vramtap report  vramtap.train_sim.") and r.stdout.splitlines()[4:]
           == out[4:], "vramtap report with the README's glob: the same bill\n%s" % r.stdout)


def case_diff(cmd, comment):
    r = sh("vramtap diff %s %s" % (ran.get("bs4"), ran.get("bs8")), work)
    expect(r.returncode == 0 and "  activations                      9.50 MiB            19.00 MiB"
           "     +9.50 MiB  +100.0%" in r.stdout.splitlines(), "%s: the activations double\n%s%s"
           % (cmd, r.stdout, r.stderr))


def case_fit(cmd, comment):
    r = sh("vramtap fit %s=4 %s=8" % (ran.get("bs4"), ran.get("bs8")), work)
    expect(r.returncode == 0 and "  largest X that fits: 6525: peak 15.20 GiB in backward, device "
           "used 15.20 GiB (fits)" in r.stdout.splitlines(), "%s\n%s%s" % (cmd, r.stdout, r.stderr))


def case_import(cmd, comment):
    shutil.copy(os.path.join(fresh, "tests", "import", "fixtures", "inference.pt.trace.json.gz"),
                os.path.join(work, "trace.json.gz"))
    r = sh(cmd.replace(" trace.json.gz", " trace.json.gz"), work)
    expect(r.returncode == 0 and r.stdout.splitlines()[0] == "vramtap import: trace.json.gz (kineto)"
           " -> trace.vramtap.json", "%s\n%s%s" % (cmd, r.stdout, r.stderr))
    r = sh("vramtap report trace.vramtap.json", work)
    expect(r.returncode == 0 and "warning: the recording began with 3.00 MiB already live "
           "(allocated before it), so the run's peak may have come before the recording: every "
           "figure below is a lower bound" in " ".join(r.stdout.split())
           and "  peak        3.08 MiB at 0.00 s, forward of step 6 (0.0% of the device)"
           in r.stdout.splitlines(), "the imported trace's report\n%s%s" % (r.stdout, r.stderr))


def case_view(cmd, comment):
    r = sh("vramtap view %s" % ran.get("bs4"), work)
    page = os.path.join(work, os.path.basename(ran.get("bs4", "?"))[:-5] + ".html")
    expect(r.returncode == 0 and r.stdout.strip() == "vramtap view: wrote " + os.path.basename(page)
           and os.path.isfile(page) and open(page).read(15).lower() == "<!doctype html>",
           "%s\n%s%s" % (cmd, r.stdout, r.stderr))


def case_export(cmd, comment):
    r = sh("vramtap export --perfetto %s" % ran.get("bs4"), work)
    out = os.path.join(work, os.path.basename(ran.get("bs4", "?"))[:-5] + ".perfetto.json")
    ok = r.returncode == 0 and os.path.isfile(out)
    events = json.load(open(out)).get("traceEvents", []) if ok else []
    expect(ok and any(e.get("name") == "peak" or "peak" in str(e.get("name", "")) for e in events),
           "%s: a trace with the peak\n%s%s" % (cmd, r.stdout, r.stderr))


cases = {"run": case_run, "report": case_report, "diff": case_diff, "fit": case_fit,
         "import": case_import, "view": case_view, "export": case_export}
first = blocks[0] if blocks else ""
covered = []
for line in first.splitlines():
    cmd, _, comment = line.partition("#")
    words = cmd.split()
    if not words:
        continue
    if not expect(words[0] == "vramtap" and len(words) > 1 and words[1] in cases,
                  "a README command this test does not run: %r" % line):
        continue
    cases[words[1]](cmd.strip(), comment)
    covered.append(words[1])
expect(covered[:1] == ["run"] and len(covered) >= 7, "the first block's commands: %s" % covered)
shutil.rmtree(top, ignore_errors=True)
finish()
