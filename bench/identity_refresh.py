"""The cost of the PyTorch hooks' identity refresh (run by scripts/bench under libvramtap.so
over host-backed stand-in memory): 1,000 parameters in device memory, a gradient for each and
Adam's two moments, refreshed as after each optimizer step.

    identity_refresh.py STANDIN_DIR

Prints the best of 5 rounds of 20 refreshes, in microseconds of the refreshing thread's CPU time
per refresh (other tenants of a shared machine do not add to it, as they do to wall time):
  steady: nothing new since the last refresh (the usual step);
  regrad: every gradient made again (zero_grad(set_to_none=True)): 1,000 new storages;
  first:  everything new (the first step): 4,000 storages.
"""

import ctypes
import os
import sys
import time
import weakref

import torch

import vramtap_identity

N = 1000
rt = ctypes.CDLL(os.path.join(sys.argv[1], "libcudart.so.13"))
rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
rt.cudaFree.argtypes = [ctypes.c_void_p]


def device_tensor(n):
    p = ctypes.c_void_p()
    if rt.cudaMalloc(ctypes.byref(p), n * 4) != 0:
        sys.exit("cudaMalloc failed")
    buf = (ctypes.c_char * (n * 4)).from_address(p.value)
    weakref.finalize(buf, rt.cudaFree, ctypes.c_void_p(p.value))
    return torch.frombuffer(buf, dtype=torch.float32)


class Many(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ps = torch.nn.ParameterList(
            [torch.nn.Parameter(device_tensor(256)) for _ in range(N)])

    def forward(self, x):
        return x


model = Many()
opt = torch.optim.Adam(model.parameters())
model(torch.zeros(1))  # the first forward: a root module for the hooks
for p in model.parameters():
    p.grad = device_tensor(256)
    opt.state[p] = {"exp_avg": device_tensor(256), "exp_avg_sq": device_tensor(256)}
vramtap_identity.note_optimizer(opt)


def best(setup, rounds=5, n=20):
    times = []
    for _ in range(rounds):
        total = 0.0
        for _ in range(n):
            setup()
            t = time.thread_time()
            vramtap_identity.note_step()
            total += time.thread_time() - t
        times.append(total / n)
    return min(times) * 1e6


def regrad():
    for p in model.parameters():
        p.grad = device_tensor(256)


def forget():
    vramtap_identity._seen.clear()
    vramtap_identity._state_sizes.clear()
    vramtap_identity._stale = True


vramtap_identity.note_step()
print("steady %.1f" % best(lambda: None))
print("regrad %.1f" % best(regrad))
print("first %.1f" % best(forget))
