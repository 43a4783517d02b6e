"""A PyTorch model of nested modules running the same code at several paths
(enc.layers.{0,1,2}.{attn,mlp} and a head), each saving a buffer of its own size in stand-in
device memory for backward, and allocating a temporary in its backward. Run under `vramtap run`
by check_modules.py.

    modules_workload.py VARIANT EXPECT_JSON

VARIANT: plain; checkpoint (each encoder layer under torch.utils.checkpoint: its forward
saves nothing and runs again inside backward); or unlisted (plain, and the encoder also calls a
block it keeps in a plain list, which named_modules() does not name: vramtap names it by its
class under the encoder, enc.Block). Every device allocation is made by the module
that names itself (the path given to its constructor, not what vramtap says); the script keeps
its own books of them and writes, for the first moment its live bytes reach their highest, what
each module path holds then: bytes by category, saved for backward, recomputed, to EXPECT_JSON.
"""

import ctypes
import json
import os
import sys

import torch
import torch.utils.checkpoint

VARIANT, EXPECT = sys.argv[1], sys.argv[2]
MiB = 1 << 20

rt = ctypes.CDLL(os.path.join(os.environ["VT_STANDIN_DIR"], "libcudart.so.13"))
rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
rt.cudaFree.argtypes = [ctypes.c_void_p]

# The script's own books: where the program is, what is live, the first highest moment.
state = {"phase": "setup", "live": {}, "bytes": 0, "peak": -1, "at_peak": None}


def alloc(size, path):
    p = ctypes.c_void_p()
    if rt.cudaMalloc(ctypes.byref(p), size) != 0:
        sys.exit("cudaMalloc(%d) failed" % size)
    recomputed = path is not None and state["phase"] == "backward" and in_forward[0] > 0
    state["live"][p.value] = {"size": size, "path": path, "born": state["phase"],
                              "recomputed": recomputed}
    state["bytes"] += size
    if state["bytes"] > state["peak"]:
        state["peak"] = state["bytes"]
        state["at_peak"] = ({k: dict(v) for k, v in state["live"].items()}, state["phase"])
    return p.value


def free(ptr):
    a = state["live"].pop(ptr)
    if state["at_peak"] and ptr in state["at_peak"][0]:
        state["at_peak"][0][ptr]["died"] = state["phase"]
    state["bytes"] -= a["size"]
    rt.cudaFree(ctypes.c_void_p(ptr))


in_forward = [0]  # module forwards running (a forward inside backward is a recomputation)
# The library's current module path (its cell, as the hooks see it): once each step's forward
# returned (the one before it, 0), and inside an outermost module call made during backward
# (that module's path, marked as a recomputation).
current = ctypes.c_uint32.in_dll(ctypes.CDLL(None), "vramtap_module_current")
after_forward, in_backward = [], []


class Probe(torch.nn.Module):
    def forward(self, x):
        in_backward.append(current.value)
        return x


probe = Probe()


class Save(torch.autograd.Function):
    """Saves `nbytes` of device memory for backward; its backward allocates a quarter of that
    as a temporary."""

    @staticmethod
    def forward(ctx, x, nbytes, path):
        ctx.buf, ctx.nbytes, ctx.path = alloc(nbytes, path), nbytes, path
        return x * 2

    @staticmethod
    def backward(ctx, g):
        if ctx.path == "head":
            probe(g)
        tmp = alloc(ctx.nbytes // 4, ctx.path)
        free(tmp)
        free(ctx.buf)
        return g * 2, None, None


class Block(torch.nn.Module):
    """The same code at every path: attention and MLP alike."""

    def __init__(self, path, nbytes):
        super().__init__()
        self.path, self.nbytes = path, nbytes
        self.w = torch.nn.Parameter(torch.ones(4))

    def forward(self, x):
        in_forward[0] += 1
        try:
            x = x * self.w
            if torch.is_grad_enabled():
                return Save.apply(x, self.nbytes, self.path)
            free(alloc(self.nbytes, self.path))  # computed under no_grad: nothing saved
            return x * 2
        finally:
            in_forward[0] -= 1


class Layer(torch.nn.Module):
    def __init__(self, k):
        super().__init__()
        self.attn = Block("enc.layers.%d.attn" % k, (2 * k + 1) * MiB)
        self.mlp = Block("enc.layers.%d.mlp" % k, (2 * k + 2) * MiB)

    def forward(self, x):
        return self.mlp(self.attn(x))


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([Layer(k) for k in range(3)])
        self.unlisted = [Block("enc.Block", 7 * MiB)] if VARIANT == "unlisted" else []

    def forward(self, x):
        for layer in self.layers:
            if VARIANT == "checkpoint":
                x = torch.utils.checkpoint.checkpoint(layer, x, use_reentrant=True)
            else:
                x = layer(x)
        for block in self.unlisted:
            x = block(x)
        return x


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = Encoder()
        self.head = Block("head", 512 * 1024)

    def forward(self, x):
        return self.head(self.enc(x))


torch.manual_seed(0)
net = Net()
weights = alloc(3 * MiB, None)  # made in setup, outside every module: parameters
opt = torch.optim.SGD(net.parameters(), lr=0.01)
x = torch.randn(4, 4, requires_grad=VARIANT == "checkpoint")
output_hooks = []
for step in range(2):
    state["phase"] = "forward"
    out = net(x)
    after_forward.append(current.value)
    # A hook of the program's own on an output vramtap hooked (the process's first
    # RemovableHandle: id 0): the tensor keeps both
    out.register_hook(lambda grad: None)
    output_hooks.append(len(out._backward_hooks))
    state["phase"] = "backward"
    out.sum().backward()
    state["phase"] = "optimizer"
    opt.step()
    opt.zero_grad()
    state["phase"] = "other"
free(weights)

live, peak_phase = state["at_peak"]
modules = {}
outside = {"parameters": 0, "activations": 0, "temporary": 0}
for a in live.values():
    born, died = a["born"], a.get("died")
    if born == "setup":
        cat = "parameters"
    elif died == born:
        cat = "temporary"
    else:
        cat = "activations"
    if a["path"] is None:
        outside[cat] += a["size"]
        continue
    m = modules.setdefault(a["path"], {"bytes": 0, "categories": {}, "saved_for_backward": 0,
                                       "recomputed": 0, "count": 0})
    m["bytes"] += a["size"]
    m["count"] += 1
    m["categories"][cat] = m["categories"].get(cat, 0) + a["size"]
    if born == "forward" and peak_phase == "backward":
        m["saved_for_backward"] += a["size"]
    if a["recomputed"]:
        m["recomputed"] += a["size"]
with open(EXPECT, "w") as f:
    json.dump({"peak_bytes": state["peak"], "peak_phase": peak_phase, "modules": modules,
               "outside": outside, "output_hooks": output_hooks, "after_forward": after_forward,
               "in_backward": in_backward}, f, indent=1, sort_keys=True)
