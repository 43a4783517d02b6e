"""The PyTorch training step on the CPU, for the cost of vramtap's PyTorch hooks (run by
scripts/bench plainly and under `vramtap run`, with and without module paths): a transformer-
shaped model of nested modules (6 layers of attention-sized and MLP blocks, about 60 module
calls per step) trained with Adam, small enough that Python and the dispatcher, not arithmetic,
take most of a step (the hooks' share is then at its largest). Prints the best of 7 rounds of 20
steps, in milliseconds of the process's CPU time per step (other tenants of a loaded machine do
not add to it, as they add to wall time).

    module_step.py [--paired] [STANDIN_DIR]

With STANDIN_DIR (run with STANDIN_HOST_BACKED=1), every module call's output is copied into a
new allocation of the stand-in's host-backed device memory (its libcudart.so.13 there), as on a
GPU, where each call's output is new device memory: the module-path hooks then give every output
its backward hook, and backward runs each of them.

With --paired (under vramtap, module paths on): blocks of 10 steps with module paths and of 10
without (the module-call wrapper made without them, and the library told no wrapper's frames),
alternately, 60 pairs; prints the lower quartile of the steps with paths and its difference to
that of the others, in milliseconds: the paths' own cost, both sets taken under the same load.
The backward wrapper counts backward calls for the paths in both.
"""

import ctypes
import os
import sys
import time
import weakref

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paired import paired  # noqa: E402

PAIRED = sys.argv[1:2] == ["--paired"]
if PAIRED:
    del sys.argv[1]

torch.manual_seed(0)
torch.set_num_threads(1)  # one core: the figure should not depend on what else the machine runs
D = 32


def device_copies(standin_dir):
    """to_device(y): y copied into new stand-in device memory, freed with the tensor. The copy
    is part of the autograd graph (CopyBackwards): y's gradient flows through it."""
    rt = ctypes.CDLL(os.path.join(standin_dir, "libcudart.so.13"))
    rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    rt.cudaFree.argtypes = [ctypes.c_void_p]

    def to_device(y):
        p = ctypes.c_void_p()
        n = y.numel() * y.element_size()
        if rt.cudaMalloc(ctypes.byref(p), n) != 0:
            sys.exit("cudaMalloc failed")
        buf = (ctypes.c_char * n).from_address(p.value)
        weakref.finalize(buf, rt.cudaFree, ctypes.c_void_p(p.value))
        flat = torch.frombuffer(buf, dtype=y.dtype)
        storage = flat.untyped_storage() if hasattr(flat, "untyped_storage") else flat.storage()
        # a tensor of its own on that memory, not a view: a copy into a view would give it the
        # graph of an in-place change of a view (AsStridedBackward0), which no GPU output has
        return torch.empty(0, dtype=y.dtype).set_(storage, 0, y.shape).copy_(y)
    return to_device


def on_device(base):
    """base, whose calls return their output in device memory."""
    class Device(base):
        def forward(self, *args):
            return to_device(super().forward(*args))
    Device.__name__ = base.__name__
    return Device


if len(sys.argv) > 1:
    to_device = device_copies(sys.argv[1])
    Linear, GELU, LayerNorm, CrossEntropyLoss = map(on_device, (
        torch.nn.Linear, torch.nn.GELU, torch.nn.LayerNorm, torch.nn.CrossEntropyLoss))
else:
    def to_device(y):
        return y
    Linear, GELU, LayerNorm, CrossEntropyLoss = (
        torch.nn.Linear, torch.nn.GELU, torch.nn.LayerNorm, torch.nn.CrossEntropyLoss)


class Attn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = Linear(D, 3 * D)
        self.out = Linear(D, D)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        a = torch.softmax(q @ k.transpose(-1, -2) / D ** 0.5, dim=-1)
        return to_device(x + self.out(a @ v))


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = Linear(D, 4 * D)
        self.act = GELU()
        self.down = Linear(4 * D, D)

    def forward(self, x):
        return to_device(x + self.down(self.act(self.up(x))))


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = LayerNorm(D)
        self.attn = Attn()
        self.mlp = Mlp()

    def forward(self, x):
        return self.mlp(self.attn(self.norm(x)))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([Layer() for _ in range(6)])
        self.head = Linear(D, 10)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return to_device(self.head(x).mean(dim=1))


net = Net()
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
x, y = torch.randn(4, 8, D), torch.randint(0, 10, (4,))
loss_fn = CrossEntropyLoss()


def step():
    opt.zero_grad()
    loss_fn(net(x), y).backward()
    opt.step()


def paths_switch():
    """A function that turns module paths on (True) or off (False)."""
    vt = sys.modules.get("vramtap_torch")
    paths = getattr(vt, "_paths", None)
    if paths is None:
        sys.exit("--paired: run it under vramtap, with module paths")
    on = torch.nn.Module.__call__
    torch.nn.Module.__call__ = on.__wrapped__  # the wrapper made next wraps torch's own
    vt._paths = None
    vt._install_forward(torch, vt._compiling_probe(torch))
    vt._paths = paths
    off = torch.nn.Module.__call__
    vt._wrappers[0] = on
    frames = (on.__code__, torch.autograd.backward.__code__) if paths.frames else None

    def use(flag):
        torch.nn.Module.__call__ = on if flag else off
        if frames:
            paths.watch(*(frames if flag else (None, None)))

    return use


for _ in range(5):
    step()
if PAIRED:
    with_paths, without = paired(step, paths_switch(), 60)
    print("%.3f %.3f" % (with_paths * 1e3, (with_paths - without) * 1e3))
    sys.exit(0)
best = None
for _ in range(7):
    t = time.process_time()
    for _ in range(20):
        step()
    ms = (time.process_time() - t) * 1000 / 20
    best = ms if best is None else min(best, ms)
print("%.3f" % best)
