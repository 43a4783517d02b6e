"""Run under vramtap by check_modes.py and check_bootstrap.py: prints, as one JSON line, what the
program sees (allocator settings, whether the PyTorch hooks are in, which sitecustomize ran),
and makes one allocation through the stand-in so that a snapshot is written.

    probe_env.py [--no-torch] [--no-alloc] [--api] [--set-conf VALUE]

--api also marks phases and a step through vramtap_torch and allocates inside them.
--set-conf sets PYTORCH_CUDA_ALLOC_CONF before importing torch, as many training scripts do.
"""

import ctypes
import json
import os
import sys

if "--set-conf" in sys.argv:
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = sys.argv[sys.argv.index("--set-conf") + 1]
report = {
    "PYTORCH_CUDA_ALLOC_CONF": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
    "user_sitecustomize": os.environ.get("VT_TEST_USER_SITECUSTOMIZE"),
    "sitecustomize": getattr(sys.modules.get("sitecustomize"), "__file__", None),
}
if "--no-torch" not in sys.argv:
    import torch

    report["hooked"] = hasattr(torch.nn.Module.__call__, "__wrapped__")
    report["backward_hooked"] = hasattr(torch.autograd.backward, "__wrapped__")
    model = torch.nn.Linear(2, 1)
    model(torch.ones(1, 2)).sum().backward()
report["vramtap_torch_imported"] = "vramtap_torch" in sys.modules

rt = None
if "--no-alloc" not in sys.argv:
    rt = ctypes.CDLL(os.path.join(os.environ["VT_STANDIN_DIR"], "libcudart.so.13"))
    rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]


def alloc(size):
    p = ctypes.c_void_p()
    if rt.cudaMalloc(ctypes.byref(p), size) != 0:
        sys.exit("cudaMalloc failed")
    return p


kept = [alloc(1 << 20)] if rt else []
if "--api" in sys.argv:
    import vramtap_torch

    report["loaded"] = vramtap_torch.loaded()
    with vramtap_torch.phase("forward"):
        kept.append(alloc(2 << 20))
    vramtap_torch.step()

    @vramtap_torch.phase("optimizer")
    def update():
        kept.append(alloc(3 << 20))

    update()
    with vramtap_torch.phase("no such phase"):
        kept.append(alloc(4 << 20))
print(json.dumps(report))
