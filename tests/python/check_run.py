"""`vramtap run` itself: errors, exec (the command keeps vramtap's pid and passes its exit status
through), and the environment it hands the command."""

import os
import subprocess
import tempfile

from vtpy import (BOOTSTRAP, CLI, LIB, PYTHON, check, clean_env, finish, sanitizer_preload, show)


def run(args, env=None, cwd=None):
    return subprocess.Popen([CLI, "run"] + args, env=clean_env() if env is None else env,
                            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def done(proc):
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


for case, args, env in (
        ("no command", [], None),
        ("only options", ["--mode", "tensor", "--"], None),
        ("bad mode", ["--mode", "fast", "--", "true"], None),
        ("mode without value", ["--mode"], None),
        ("unknown option", ["--fast", "true"], None),
        ("missing command", ["--", "/nonexistent/command"], None),
        ("missing library", ["true"], clean_env(VRAMTAP_LIB="/nonexistent/libvramtap.so"))):
    p = done(run(args, env))
    lines = p.stderr.splitlines()
    check(p.returncode == 2 and len(lines) == 1 and lines[0].startswith("vramtap run: "),
          case + ": exit 2 and one line", show(p))

p = done(run(["--help"]))
check(p.returncode == 0 and p.stdout.startswith("usage: vramtap run"), "--help", show(p))

# exec, not fork: the command has the pid vramtap started with, and its exit status.
proc = run(["--", PYTHON, "-c", "import os, sys; print(os.getpid()); sys.exit(7)"])
p = done(proc)
check(p.returncode == 7, "exit status passes through", show(p))
check(p.stdout.strip() == str(proc.pid), "the command runs in vramtap's process", show(p))

# The environment: the library first in LD_PRELOAD (the user's entries kept, no duplicate when
# nested), the bootstrap first on PYTHONPATH, an absolute VRAMTAP_OUT that exists.
cwd = tempfile.mkdtemp(prefix="vt-py-run-")
user_preload = ":".join(filter(None, [sanitizer_preload(), "libm.so.6"]))
show_env = ["sh", "-c", 'printf "%s\\n" "$LD_PRELOAD" "$PYTHONPATH" "$VRAMTAP_OUT" "$VRAMTAP_MODE"']
for case, args in (("run", ["--out", "snaps", "--mode", "native", "--"] + show_env),
                   ("nested run", ["--out", "snaps", "--mode", "native", "--", CLI, "run", "--"]
                    + show_env)):
    p = done(run(args, clean_env(LD_PRELOAD=user_preload, PYTHONPATH="/user/path"), cwd=cwd))
    lines = p.stdout.splitlines()
    if check(p.returncode == 0 and len(lines) == 4, case + ": ran", show(p)):
        preload, pythonpath, out, mode = lines
        check(preload == os.path.realpath(LIB) + ":" + user_preload,
              case + ": LD_PRELOAD", preload)
        check(pythonpath == BOOTSTRAP + ":/user/path", case + ": PYTHONPATH", pythonpath)
        check(out == os.path.join(os.path.realpath(cwd), "snaps") and os.path.isdir(out),
              case + ": VRAMTAP_OUT", out)
        check(mode == "native", case + ": VRAMTAP_MODE", mode)

p = done(run(["--", "sh", "-c", 'echo "$LD_PRELOAD"'], clean_env(VRAMTAP_LIB=LIB)))
check(p.returncode == 0 and p.stdout.split(":")[0].strip() == os.path.realpath(LIB),
      "VRAMTAP_LIB names the library", show(p))
finish()
