"""What keeping Python frames costs: a call-heavy Python loop, and cudaMalloc/cudaFree pairs
through ctypes, without vramtap, with vramtap but VRAMTAP_PYTHON_STACKS=0, with Python frames read
from the interpreter (the default) and with the shadow stack that follows every call
(VRAMTAP_PYTHON_STACKS=2, the fallback).

usage: bench.py [PYTHON...]        (VT_LIB, VT_PRELOAD and VT_STANDIN_DIR in the environment;
                                    meson test --benchmark --suite pystack sets them)

Each figure is the best of several runs, interleaved so that load on the machine hits all three
alike.
"""

import os
import shutil
import subprocess
import sys
import tempfile

WORKLOAD = r"""
import ctypes, os, sys, time
if sys.argv[1] in ("frames", "follow") and ctypes.PyDLL(None).vramtap_python_install() <= 0:
    raise SystemExit("Python frames could not be installed")
cudart = ctypes.CDLL(os.path.join(os.environ["VT_STANDIN_DIR"], "libcudart.so.13"))

def leaf(x):
    return x + 1

def mid(x):
    return leaf(x) + leaf(x)

def loop(n):
    s = 0
    for i in range(n):
        s += mid(i)
        s += len("c")
    return s

class Box:
    @property
    def prop(self):
        return 1

def implicit(n):
    box = Box()
    s = 0
    for i in range(n):
        s += box.prop
        s += len("c")
    return s

def pairs(n):
    ptr = ctypes.c_void_p()
    for _ in range(n):
        cudart.cudaMalloc(ctypes.byref(ptr), 4096)
        cudart.cudaFree(ptr)

def best(fn, n):
    fn(n // 10)
    t = []
    for _ in range(5):
        t0 = time.perf_counter()
        fn(n)
        t.append(time.perf_counter() - t0)
    return min(t)

N, P = 200000, 20000
print(best(loop, N) / (N * 4) * 1e9, best(implicit, N) / (N * 2) * 1e9, best(pairs, P) / P * 1e9)
"""

CONFIGS = (("without vramtap", None), ("vramtap, Python frames off", "off"),
           ("vramtap, frames read", "frames"), ("vramtap, following calls", "follow"))


def run(python, config):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("VRAMTAP_") and k not in ("LD_PRELOAD", "PYTHONPATH")}
    out = tempfile.mkdtemp(prefix="vt-pystack-bench-")
    if config:
        env["LD_PRELOAD"] = os.environ["VT_PRELOAD"]
        env["VRAMTAP_OUT"] = out
        env["VRAMTAP_PYTHON_STACKS"] = {"frames": "1", "follow": "2"}.get(config, "0")
    try:
        p = subprocess.run([python, "-c", WORKLOAD, config or "none"], env=env,
                           capture_output=True, text=True, timeout=600)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if p.returncode != 0:
        raise SystemExit("%s (%s) failed:\n%s" % (python, config, p.stderr))
    return [float(x) for x in p.stdout.split()]


def main():
    pythons = sys.argv[1:] or [os.environ.get("VT_PYTHON", "/usr/bin/python3")]
    for python in pythons:
        version = subprocess.run([python, "-c", "import sys; print(sys.version.split()[0])"],
                                 capture_output=True, text=True).stdout.strip()
        best = {}
        for _ in range(3):
            for name, config in CONFIGS:
                got = run(python, config)
                best[name] = [min(a, b) for a, b in zip(best.get(name, got), got)]
        base = best[CONFIGS[0][0]]
        print("%s (%s), ns per: Python call | implicit call (property) | cudaMalloc+cudaFree "
              "pair via ctypes" % (python, version))
        for name, _ in CONFIGS:
            print("  %-28s" % name + " | ".join(
                "%7.1f (%+6.1f)" % (x, x - b) for x, b in zip(best[name], base)))


main()
