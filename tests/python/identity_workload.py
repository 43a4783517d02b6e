"""A PyTorch training loop whose parameters, buffer, gradients and Adam moments are real torch
tensors in stand-in device memory (STANDIN_HOST_BACKED=1 makes it readable; torch.frombuffer
wraps it), all but the re-made gradients created before the first forward. Run under `vramtap
run` by check_identity.py.

    identity_workload.py VARIANT EXPECT_JSON

VARIANT: flat (a flat gradient buffer with per-parameter views, plus a tail the program uses
for nothing), none (zero_grad(set_to_none=True): gradients are made again after each backward,
between phases; activation checkpointing), accum (the flat buffer, two micro-batches per step,
bfloat16 autocast), main_grad (Megatron-style: the flat buffer's views are each parameter's
`main_grad`, into which the program adds the host `.grad` after backward), native (run with
`--mode native`: parameters, gradient buffer and moments are carved out of one allocation, as
a caching allocator's segment holds tensors; the labels split it and the rest is unattributed).

By timing alone, everything made in setup would be parameters and the re-made gradients
activations: only the identity evidence the hooks give makes the bill right. The script writes
what the bill must be to EXPECT_JSON, byte for byte, with the evidence that decides each byte,
and the run record the hooks must have kept.
"""

import ctypes
import json
import os
import sys
import weakref

import torch
import torch.utils.checkpoint

VARIANT, EXPECT = sys.argv[1], sys.argv[2]
STEPS = 3
MICRO = 2 if VARIANT == "accum" else 1
TAIL = 65536  # bytes of the flat gradient allocation that hold no tensor
PEAK = 64 << 20

rt = ctypes.CDLL(os.path.join(os.environ["VT_STANDIN_DIR"], "libcudart.so.13"))
rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
rt.cudaFree.argtypes = [ctypes.c_void_p]


def device_alloc(size):
    p = ctypes.c_void_p()
    if rt.cudaMalloc(ctypes.byref(p), size) != 0:
        sys.exit("cudaMalloc(%d) failed" % size)
    return p.value


SEGMENT = 1 << 20  # native: the one allocation every tensor made up front is carved from
segment = {"base": device_alloc(SEGMENT), "used": 0} if VARIANT == "native" else None


def device_tensor(like, extra=0):
    """A copy of `like` in stand-in device memory, freed when the last tensor on it dies; in
    the native variant a piece of the segment (512-byte aligned), which stays."""
    nbytes = like.numel() * like.element_size()
    if segment:
        ptr = segment["base"] + segment["used"]
        segment["used"] += (nbytes + extra + 511) // 512 * 512
        if segment["used"] > SEGMENT:
            sys.exit("the segment is too small")
    else:
        ptr = device_alloc(nbytes + extra)
    buf = (ctypes.c_char * nbytes).from_address(ptr)
    if not segment:
        weakref.finalize(buf, rt.cudaFree, ctypes.c_void_p(ptr))
    t = torch.frombuffer(buf, dtype=like.dtype).view(like.shape)
    t.copy_(like)
    return t


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(16, 32)
        self.l2 = torch.nn.Linear(32, 4)
        self.frozen = torch.nn.Parameter(torch.ones(8), requires_grad=False)
        self.register_buffer("scale", torch.ones(4))

    def forward(self, x):
        h = torch.relu(self.l1(x))
        if VARIANT == "none":
            h = torch.utils.checkpoint.checkpoint(self.l2, h)
        else:
            h = self.l2(h)
        return h * self.scale + self.frozen.sum()


torch.manual_seed(0)
net = Net()
for module in net.modules():
    for name, p in list(module.named_parameters(recurse=False)):
        p.data = device_tensor(p.data)
net.scale = device_tensor(net.scale)
trainable = [p for p in net.parameters() if p.requires_grad]
param_bytes = sum(p.numel() * 4 for p in net.parameters()) + net.scale.numel() * 4
grad_bytes = sum(p.numel() * 4 for p in trainable)

if VARIANT != "none":
    flat = device_tensor(torch.zeros(grad_bytes // 4), extra=TAIL)
    offset = 0
    for p in trainable:
        view = flat[offset:offset + p.numel()].view_as(p)
        if VARIANT == "main_grad":
            p.main_grad = view
        else:
            p.grad = view
        offset += p.numel()

opt = torch.optim.Adam(trainable, lr=0.01)
for p in trainable:  # moments made eagerly, as fused and ZeRO optimizers do
    opt.state[p] = {"step": torch.tensor(0.0), "exp_avg": device_tensor(torch.zeros_like(p)),
                    "exp_avg_sq": device_tensor(torch.zeros_like(p))}
loss_fn = torch.nn.MSELoss()
x, y = torch.randn(4, 16), torch.randn(4, 4)
views_kept = True

for step in range(STEPS):
    for m in range(MICRO):
        if VARIANT == "accum":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = net(x)
        else:
            out = net(x)
        loss = loss_fn(out.float(), y) / MICRO
        loss.backward()
    if VARIANT == "none":
        for p in trainable:  # gradients re-made in device memory, between phases
            p.grad = device_tensor(p.grad)
    elif VARIANT == "main_grad":
        for p in trainable:  # the host gradient goes into the fp32 buffer, then away
            p.main_grad.add_(p.grad)
            p.grad = p.main_grad.clone()
    else:
        views_kept &= all(p.grad._storage().data_ptr() == flat._storage().data_ptr()
                          for p in trainable)
    if step == STEPS - 1:
        ptr = device_alloc(PEAK)  # the peak: a temporary between phases
        rt.cudaFree(ctypes.c_void_p(ptr))
    opt.step()
    opt.zero_grad(set_to_none=VARIANT in ("none", "main_grad"))
    if VARIANT == "main_grad":
        for p in trainable:
            p.main_grad.zero_()

if not views_kept:
    sys.exit("backward did not accumulate into the flat buffer's views")

tail_bytes = TAIL if VARIANT != "none" else 0
if VARIANT == "native":  # the segment's bytes no label covers, and the peak's temporary
    unattributed = SEGMENT - param_bytes - grad_bytes - 2 * grad_bytes + PEAK
    param_evidence, tail_bytes = param_bytes, 0
else:
    unattributed, param_evidence = 0, param_bytes
settings = ["%s=%s" % (k, opt.defaults[k])
            for k in ("momentum", "amsgrad", "foreach", "fused", "capturable", "centered",
                      "differentiable", "decoupled_weight_decay") if k in opt.defaults]
expect = {
    "categories": {
        "parameters": param_bytes + tail_bytes,
        "gradients": grad_bytes,
        "optimizer_state": 2 * grad_bytes,
        "activations": 0,
        "temporary": 0 if VARIANT == "native" else PEAK,
        "unattributed": unattributed,
    },
    "evidence": {
        "parameters": {"identity": param_evidence, "stack": 0, "timing": tail_bytes},
        "gradients": {"identity": grad_bytes, "stack": 0, "timing": 0},
        "optimizer_state": {"identity": 2 * grad_bytes, "stack": 0, "timing": 0},
        "activations": {"identity": 0, "stack": 0, "timing": 0},
        "temporary": {"identity": 0, "stack": 0, "timing": 0 if VARIANT == "native" else PEAK},
    },
    # the standard rules from the run record beside the bill: the flat buffer's tail is the
    # planted difference, billed as parameters by timing
    "theory": None if VARIANT == "native" else {
        "parameters": {"expected_bytes": param_bytes, "measured_bytes": param_bytes + tail_bytes},
        "gradients": {"expected_bytes": grad_bytes, "measured_bytes": grad_bytes},
        "optimizer_state": {"expected_bytes": 2 * grad_bytes, "measured_bytes": 2 * grad_bytes},
    },
    "record": {
        "framework": "pytorch " + torch.__version__,
        "model": "Net",
        "parameters": sum(p.numel() for p in net.parameters()),
        "trainable_parameters": sum(p.numel() for p in trainable),
        "parameter_bytes": sum(p.numel() * 4 for p in net.parameters()),
        "trainable_parameter_bytes": grad_bytes,
        "buffer_bytes": net.scale.numel() * 4,
        "parameter_dtypes": "float32",
        "optimizer": "Adam (%s)" % ", ".join(settings),
        "input_shape": "4x16",
        "input_dtype": "float32",
        "batch_size": 4,
        "micro_batches": MICRO,
        "amp": "bfloat16" if VARIANT == "accum" else "off",
        "gradient_checkpointing": "yes" if VARIANT == "none" else "no",
    },
}
with open(EXPECT, "w") as f:
    json.dump(expect, f, indent=1)
