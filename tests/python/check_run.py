"""`vramtap run` itself: errors; the command runs as vramtap's child, which passes its exit status
through, passes on the signals vramtap is sent, and says how the command died when a signal
ended it (which signal, whether the OOM killer of a fake cgroup counted it, which snapshot it
left); and the environment it hands the command."""

import glob
import os
import subprocess

from vtpy import (BOOTSTRAP, CLI, LIB, PYTHON, check, clean_env, finish, sanitizer_preload, show,
                  tmpdir, vramtap_run)


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
        ("bad attach", ["--attach", "ptrace", "--", "true"], None),
        ("another injection library", ["--attach", "cupti", "--", "true"],
         clean_env(CUDA_INJECTION64_PATH="/opt/nsight/libToolsInjection64.so")),
        ("missing command", ["--", "/nonexistent/command"], None),
        ("missing library", ["true"], clean_env(VRAMTAP_LIB="/nonexistent/libvramtap.so"))):
    p = done(run(args, env))
    lines = p.stderr.splitlines()
    check(p.returncode == 2 and len(lines) == 1 and lines[0].startswith("vramtap run: "),
          case + ": exit 2 and one line", show(p))

p = done(run(["--help"]))
check(p.returncode == 0 and p.stdout.startswith("usage: vramtap run"), "--help", show(p))

# The command is vramtap's child; the library takes it for the process the user started, and its
# exit status is vramtap's.
proc = run(["--", PYTHON, "-c",
            "import os, sys; print(os.getpid(), os.environ['VRAMTAP_ROOT_PID']); sys.exit(7)"])
p = done(proc)
check(p.returncode == 7, "exit status passes through", show(p))
pids = p.stdout.split()
check(len(pids) == 2 and pids[0] == pids[1] and pids[0] != str(proc.pid),
      "the command is a child, and VRAMTAP_ROOT_PID names it", show(p))

# A signal sent to vramtap reaches the command, whose own exit status then comes back.
proc = run(["--", PYTHON, "-c",
            "import signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda s, f: sys.exit(3))\n"
            "print('ready', flush=True)\n"
            "time.sleep(60)"])
ready = proc.stdout.readline().strip()
proc.terminate()
p = done(proc)
check(ready == "ready" and p.returncode == 3, "SIGTERM sent to vramtap reaches the command",
      "%r %s" % (ready, show(p)))

# Killed by SIGKILL after an interim snapshot (a step mark where the peak rose), in a cgroup
# whose OOM killer count rises meanwhile: 137, the signal, the OOM killer, the snapshot.
standin = os.path.join(os.environ["VT_BUILD"], "tests", "standin")
cgroup = tmpdir("vt-py-cgroup-")
events = os.path.join(cgroup, "memory.events")
killed = tmpdir("vt-py-killed-")
job = ("import ctypes, os\n"
       "rt = ctypes.CDLL('libcudart.so.13')\n"
       "p = ctypes.c_void_p()\n"
       "assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(1 << 20)) == 0\n"
       "ctypes.CDLL(None).vramtap_step_mark()\n"
       "if os.environ.get('OOM'):\n"
       "    open(%r, 'w').write('oom 1\\noom_kill 1\\n')\n"
       "print(os.getpid(), flush=True)\n"
       "os.kill(os.getpid(), 9)\n" % events)
for case, oom in (("SIGKILL", ""), ("OOM killer", "1")):
    with open(events, "w") as f:
        f.write("low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n")
    for old in glob.glob(os.path.join(killed, "*")):
        os.unlink(old)
    p = done(run(["--out", killed, "--", PYTHON, "-c", job],
                 clean_env(VRAMTAP_CGROUP=cgroup, OOM=oom,
                           LD_LIBRARY_PATH=standin + ":" + os.environ.get("LD_LIBRARY_PATH", ""))))
    pid = p.stdout.strip()
    snaps = glob.glob(os.path.join(killed, "vramtap.*.%s.json" % pid))
    check(p.returncode == 137, case + ": exit 137", show(p))
    check("(pid %s) was killed by SIGKILL (signal 9)" % pid in p.stderr,
          case + ": names the signal", show(p))
    check(len(snaps) == 1 and "its last snapshot is %s," % snaps[0] in p.stderr,
          case + ": names the interim snapshot", "%s %s" % (snaps, show(p)))
    said_oom = "the kernel's OOM killer killed it" in p.stderr and "oom_kill 0 -> 1" in p.stderr
    check(said_oom == bool(oom), case + ": OOM killer named exactly when its count rose",
          show(p))
    if not oom:
        check("not by the OOM killer of its cgroup (oom_kill stayed 0)" in p.stderr,
              case + ": says the OOM killer did not", show(p))

p = done(run(["--out", killed, "--", "sh", "-c", "kill -9 $$"]))
check(p.returncode == 137 and "it left no snapshot in %s" % os.path.realpath(killed) in p.stderr,
      "SIGKILL before any snapshot: says none was left", show(p))

# The environment: the library first in LD_PRELOAD (the user's entries kept, no duplicate when
# nested), the bootstrap first on PYTHONPATH, an absolute VRAMTAP_OUT that exists.
cwd = tmpdir("vt-py-run-")
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

# --attach cupti: nothing of vramtap preloaded (the user's entries kept), the driver told to load
# it (CUDA_INJECTION64_PATH), NVTX too, the bootstrap on PYTHONPATH.
p = done(run(["--attach", "cupti", "--", "sh", "-c",
              'printf "%s\\n" "$LD_PRELOAD" "$CUDA_INJECTION64_PATH" "$NVTX_INJECTION64_PATH" '
              '"$PYTHONPATH"'], clean_env(LD_PRELOAD=user_preload, PYTHONPATH="/user/path")))
lines = p.stdout.splitlines()
check(p.returncode == 0 and lines == [user_preload, os.path.realpath(LIB), os.path.realpath(LIB),
                                      BOOTSTRAP + ":/user/path"],
      "--attach cupti: the environment", show(p))

# A C program under --attach cupti: its snapshot says so and holds every allocation, the one
# made through the runtime's own cudaMalloc under its name.
tests_tap = os.path.join(os.environ["VT_BUILD"], "tests", "tap")
p, snaps = vramtap_run([os.path.join(tests_tap, "tap_coverage"), "complete",
                        os.path.join(tests_tap, "libplanted.so")], ["--attach", "cupti"],
                       env=clean_env(LD_LIBRARY_PATH=standin))
if check(p.returncode == 0 and len(snaps) == 1, "--attach cupti: one snapshot", show(p)):
    check(snaps[0]["attach"] == "cupti" and sorted((a["size"], a["api"]) for a in
                                                   snaps[0]["allocations"])
          == [(700, "cudaMalloc"), (1000, "cudaMalloc"), (2000, "cuMemAlloc_v2")],
          "--attach cupti: recorded through CUPTI",
          [snaps[0]["attach"]] + snaps[0]["allocations"])

p = done(run(["--", "sh", "-c", 'echo "$LD_PRELOAD"'], clean_env(VRAMTAP_LIB=LIB)))
check(p.returncode == 0 and p.stdout.split(":")[0].strip() == os.path.realpath(LIB),
      "VRAMTAP_LIB names the library", show(p))
finish()
