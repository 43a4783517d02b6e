"""What the tests here that run a program under the library and read its files share: runs
repeated while the threads' timing left them testing nothing, and the end of a test (its
failures said, its folders removed when it passed, kept to look into when it failed)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile


def run_debug(prog, args, prefix, outs, timeout=600):
    """Runs prog with args under the library, its debug lines on, writing into a new folder
    (added to outs, named from prefix): the folder and the finished process."""
    out = tempfile.mkdtemp(prefix=prefix)
    outs.append(out)
    env = dict(os.environ, LD_PRELOAD=os.environ["VT_PRELOAD"], VRAMTAP_OUT=out,
               VRAMTAP_DEBUG="1", LD_LIBRARY_PATH=os.environ["VT_STANDIN_DIR"])
    return out, subprocess.run([prog] + [str(a) for a in args], env=env, capture_output=True,
                               text=True, timeout=timeout)


def export_json(path):
    """The snapshot file at path as JSON, read through the command (`vramtap export --json`)."""
    return json.loads(subprocess.run([os.environ["VT_CLI"], "export", "--json", path],
                                     capture_output=True, text=True, check=True).stdout)


def until_tested(run, failures, untested, runs=5):
    """Calls run() until it returns true (that run tested what the test is for) or a run added
    to failures, at most `runs` times; if none tested anything, says so with `untested` (what no
    run had)."""
    for _ in range(runs):
        if run() or failures:
            return
    failures.append("in %d runs %s: nothing was tested (a loaded machine?)" % (runs, untested))


def finish(failures, outs):
    """Prints the failures and exits 1, or removes the folders `outs` and exits 0."""
    for f in failures:
        print("FAIL:", f)
    if not failures:
        for out in outs:
            shutil.rmtree(out, ignore_errors=True)
    sys.exit(1 if failures else 0)
