"""Shared helpers of the Python tests: run a command under `vramtap run` and read its snapshot.

Drivers run with /usr/bin/python3 under meson's test_env (tests/meson.build). A driver calls
check(...) for each expectation and finish() at the end: exit 0, 1 (some check failed) or 77
(skipped).
"""

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ["VT_SRC"]
CLI = os.environ["VT_CLI"]
LIB = os.environ["VT_LIB"]
PYTHON = os.environ.get("VT_PYTHON", "/usr/bin/python3")
BOOTSTRAP = os.path.join(SRC, "src", "python", "vramtap")
SANITIZED = "address" in os.environ.get("VT_SANITIZE", "")

_failures = []
_made = []  # temporary folders: removed when every check passed, kept to look into a failure


def tmpdir(prefix="vt-py-"):
    """A temporary folder, removed at finish() when every check passed."""
    _made.append(tempfile.mkdtemp(prefix=prefix))
    return _made[-1]


def check(ok, what, detail=None):
    if not ok:
        _failures.append(what if detail is None else "%s: %s" % (what, detail))
    return ok


def finish():
    for f in _failures:
        print("FAIL:", f)
    print("%d failed" % len(_failures) if _failures else "all checks passed")
    if not _failures:
        for folder in _made:
            shutil.rmtree(folder, ignore_errors=True)
    sys.exit(1 if _failures else 0)


def skip(why):
    print("SKIP:", why)
    sys.exit(77)


def sanitizer_preload():
    """The sanitizer runtimes that VT_PRELOAD puts in front of the library (empty if none)."""
    parts = [p for p in os.environ.get("VT_PRELOAD", "").split(":") if p and p != LIB]
    return ":".join(parts)


def clean_env(**extra):
    """The test's environment without anything vramtap or the user's allocator settings would
    carry in, plus `extra` (a value of None removes the variable). VRAMTAP_QUIET=1 keeps
    vramtap's start and exit notices out of what the tests read on stderr."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("VRAMTAP_") and k not in (
               "LD_PRELOAD", "PYTHONPATH", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF",
               "NVTX_INJECTION64_PATH", "CUDA_INJECTION64_PATH", "XLA_PYTHON_CLIENT_ALLOCATOR",
               "XLA_PYTHON_CLIENT_PREALLOCATE", "TF_GPU_ALLOCATOR")}
    # Importing the bootstrap must not leave __pycache__ in the source tree, which is installed.
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["VRAMTAP_QUIET"] = "1"
    # Attached through CUPTI, vramtap must find the stand-in's CUPTI, never the toolkit's.
    env["VRAMTAP_CUPTI"] = os.path.join(os.environ["VT_STANDIN_DIR"], "libcupti.so.13")
    # In a sanitized build libvramtap.so needs the ASan runtime loaded first.
    if sanitizer_preload():
        env["LD_PRELOAD"] = sanitizer_preload()
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def require_python_under_sanitizer():
    """Exit 77 when the sanitized library cannot run inside Python here."""
    if not SANITIZED:
        return
    env = clean_env(LD_PRELOAD=os.environ["VT_PRELOAD"])
    p = subprocess.run([PYTHON, "-c", "import torch"], env=env, capture_output=True, text=True,
                       timeout=300)
    if p.returncode != 0:
        skip("Python with torch does not run under the ASan runtime here: " +
             (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1])


def vramtap_run(command, run_args=(), env=None, timeout=300):
    """Run `vramtap run --out TMP [run_args] -- command`. Returns (completed process, list of
    snapshots written, each a dict)."""
    out = tmpdir()
    p = subprocess.run([CLI, "run", "--out", out] + list(run_args) + ["--"] + list(command),
                       env=clean_env() if env is None else env, capture_output=True, text=True,
                       timeout=timeout)
    snaps = []
    for path in sorted(glob.glob(os.path.join(out, "vramtap.*.json"))):
        snaps.append(json.loads(subprocess.check_output([CLI, "export", "--json", path])))
    return p, snaps


def show(p):
    """The output of a finished process, for failure messages."""
    return "exit %d\n--- stdout\n%s--- stderr\n%s" % (p.returncode, p.stdout, p.stderr)
