"""A Python process that vramtap follows starts Python children, as torchrun, torch.compile's
compile workers and spawned data-loader workers do. Each child allocates through the stand-in
and prints its pid; "late" first puts torch's CUDA to work (torch.cuda._lazy_init, which a CPU
build of torch answers with an error after vramtap's hook has run).

    children_workload.py             the parent: runs the children, prints their pids
    children_workload.py CHILD MODE  a child: MODE is plain or late
"""
import ctypes
import os
import subprocess
import sys


def allocate():
    rt = ctypes.CDLL(os.path.join(os.environ["VT_STANDIN_DIR"], "libcudart.so.13"))
    rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), 3 << 20) == 0


if len(sys.argv) == 3:
    if sys.argv[2] == "late":
        import torch

        try:
            torch.cuda._lazy_init()
        except (AssertionError, RuntimeError):  # no CUDA in this torch build
            pass
    allocate()
    print(sys.argv[2], os.getpid())
else:
    allocate()
    print("parent", os.getpid())
    for mode in ("plain", "late"):
        out = subprocess.run([sys.executable, __file__, "child", mode], capture_output=True,
                             text=True, check=True)
        sys.stdout.write(out.stdout)
