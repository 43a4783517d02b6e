"""The cost of the PyTorch hooks' identity refresh (run by scripts/bench under libvramtap.so
over host-backed stand-in memory), as a training step pays it after each optimizer step: a
model of 1,000 parameters in device memory shaped like a transformer's (125 blocks of two
linear layers and two layer norms: 627 modules), a gradient for each and Adam's state (two
moments in device memory, the step count in host memory).

    identity_refresh.py STANDIN_DIR [ROUNDS]

Each case runs ROUNDS (default 7) rounds of 32 refreshes: two of the periodic full looks at the
model and the optimizer's state, as a run of 32 steps has them. A refresh is timed alone, in the
refreshing thread's CPU time (other tenants of a shared machine do not add to it, as they do to
wall time). For each case it prints the mean microseconds per refresh of the best round and of
the median round, and the slowest single refresh of the median round:
  steady: nothing new since the last refresh (zero_grad(set_to_none=False), torch 1.x's default);
  regrad: every gradient made again (set_to_none=True, torch 2.x's default): 1,000 new storages;
  first:  everything new, as at the first step: 3,000 storages in device memory, 1,000 in host.
"""

import ctypes
import os
import statistics
import sys
import time
import weakref

import torch

import vramtap_identity

BLOCKS = 125  # 8 parameters each
rt = ctypes.CDLL(os.path.join(sys.argv[1], "libcudart.so.13"))
rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
rt.cudaFree.argtypes = [ctypes.c_void_p]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 7


def device_tensor(like):
    """A float32 tensor shaped like `like`, in stand-in device memory."""
    n = like.numel()
    p = ctypes.c_void_p()
    if rt.cudaMalloc(ctypes.byref(p), n * 4) != 0:
        sys.exit("cudaMalloc failed")
    buf = (ctypes.c_char * (n * 4)).from_address(p.value)
    weakref.finalize(buf, rt.cudaFree, ctypes.c_void_p(p.value))
    return torch.frombuffer(buf, dtype=torch.float32).view(like.shape)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = torch.nn.LayerNorm(16)
        self.attn = torch.nn.Linear(16, 16)
        self.norm2 = torch.nn.LayerNorm(16)
        self.mlp = torch.nn.Linear(16, 16)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(BLOCKS))
        for module in self.modules():
            for name, p in list(module.named_parameters(recurse=False)):
                setattr(module, name, torch.nn.Parameter(device_tensor(p)))

    def forward(self, x):
        return x


model = Model()
params = list(model.parameters())
assert len(params) == 8 * BLOCKS
opt = torch.optim.Adam(params)
model(torch.zeros(1))  # the first forward: a root module for the hooks
for p in params:
    p.grad = device_tensor(p)
    opt.state[p] = {"step": torch.zeros(()), "exp_avg": device_tensor(p),
                    "exp_avg_sq": device_tensor(p)}
vramtap_identity.note_optimizer(opt)


def stepped():
    """What the optimizer step has just done when the hooks refresh: read every gradient (its
    storage: the kernels' pointers) and every state entry."""
    for p in params:
        p.grad.data_ptr()
        opt.state[p]["exp_avg"].data_ptr()


def regrad():
    for p in params:
        p.grad = device_tensor(p)
    stepped()


def forget():
    vramtap_identity._seen.clear()
    vramtap_identity._state_sizes.clear()
    vramtap_identity._stale = True


def measure(setup, per_round=32):
    means, slowest = [], []
    for _ in range(rounds):
        times = []
        for _ in range(per_round):
            setup()
            t = time.thread_time()
            vramtap_identity.note_step()
            times.append(time.thread_time() - t)
        means.append(sum(times) / per_round)
        slowest.append(max(times))
    median = sorted(range(rounds), key=means.__getitem__)[rounds // 2]
    return min(means) * 1e6, statistics.median(means) * 1e6, slowest[median] * 1e6


vramtap_identity.note_step()
for name, setup in (("steady", stepped), ("regrad", regrad), ("first", forget)):
    figures = measure(setup)
    if vramtap_identity._api is None:
        sys.exit("the refresh failed")
    print("%s %.1f %.1f %.1f" % ((name,) + figures))
