"""Fork in a loop while another thread writes out-of-memory post-mortems with Python frames on
(data-loader workers and subprocess launches fork while training runs out of memory). The fork
handler takes every vramtap lock; a writer that held one lock while waiting for another, or
took them in another order, deadlocks the two threads. Ten runs, each must finish, each with
exactly its post-mortems, each with the Python frames of the failed call.

usage: fork_postmortems.py            (the driver, under meson's test_env)
       fork_postmortems.py workload   (one run, under LD_PRELOAD)
"""
import ctypes
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

RUNS = 10
OOMS = 60
RUN_TIMEOUT_S = 120


def fail_alloc(cudart, size):
    ptr = ctypes.c_void_p()
    return cudart.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(size))  # @fail


def workload():
    cudart = ctypes.CDLL(os.path.join(os.environ["VT_STANDIN_DIR"], "libcudart.so.13"))
    if ctypes.PyDLL(None).vramtap_python_install() <= 0:
        sys.exit("Python frames did not install")
    keep = ctypes.c_void_p()
    if cudart.cudaMalloc(ctypes.byref(keep), ctypes.c_size_t(1 << 20)) != 0:
        sys.exit("the first allocation failed")
    done = threading.Event()
    codes = []

    def ooms():
        for _ in range(OOMS):
            codes.append(fail_alloc(cudart, 1 << 40))
        done.set()

    t = threading.Thread(target=ooms)
    t.start()
    forks = 0
    while not done.is_set():
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        forks += 1
    t.join()
    if codes != [2] * OOMS:
        sys.exit("expected %d out-of-memory errors, got %s" % (OOMS, codes))
    print("forks", forks)


def line_of(mark):
    with open(os.path.abspath(__file__)) as f:
        for n, text in enumerate(f, 1):
            if text.rstrip().endswith("# @" + mark):
                return n
    raise KeyError(mark)


def driver():
    env = {k: v for k, v in os.environ.items() if not k.startswith("VRAMTAP_")}
    env.update(LD_PRELOAD=os.environ["VT_PRELOAD"], VRAMTAP_OOM_MAX=str(OOMS),
               STANDIN_CAPACITY=str(64 << 20), PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    failures = []
    for run in range(RUNS):
        failed = len(failures)
        out = tempfile.mkdtemp(prefix="vt-forkoom-")
        env["VRAMTAP_OUT"] = out
        try:
            p = subprocess.run([os.environ["VT_PYTHON"], "-S", __file__, "workload"], env=env,
                               capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            failures.append("run %d: did not finish in %d s (deadlock)" % (run, RUN_TIMEOUT_S))
            continue
        if p.returncode != 0:
            failures.append("run %d: exit %d\n%s%s" % (run, p.returncode, p.stdout, p.stderr))
            continue
        posts = glob.glob(os.path.join(out, "vramtap.*.oom*.json"))
        if len(posts) != OOMS:
            failures.append("run %d: %d post-mortems, expected %d" % (run, len(posts), OOMS))
            continue
        doc = json.loads(subprocess.check_output([os.environ["VT_CLI"], "export", "--json", posts[0]]))
        site = doc["sites"][doc["oom"]["site"]] if doc["oom"]["site"] is not None else {}
        py = [(fr["function"], fr["line"]) for fr in site.get("frames", [])
              if fr["type"] == "python"]
        if not py or py[0] != ("fail_alloc", line_of("fail")):
            failures.append("run %d: the failed call's Python frames are %s" % (run, py))
        print("run %d: %s, %d post-mortems" % (run, p.stdout.strip(), len(posts)))
        if len(failures) == failed:  # kept only to look into a failure
            shutil.rmtree(out, ignore_errors=True)
    for f in failures:
        print("FAIL:", f)
    print("%d of %d runs completed with their post-mortems" % (RUNS - len(failures), RUNS))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    workload() if sys.argv[1:] == ["workload"] else driver()
