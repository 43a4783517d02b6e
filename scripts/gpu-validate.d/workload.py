"""The PyTorch side of scripts/gpu-validate: a small GPT-like model trained with AdamW, run under
`vramtap run` or plainly, that writes what PyTorch itself says about its memory (and where its
tensors live) to a JSON file for validate.py to compare with vramtap's snapshot.

    workload.py --case train|timing|profile|oom --out RESULT.json [options]

Nothing is downloaded: the model is built here with random weights, the batches are random token
ids. Every PyTorch API that is newer than some torch we may meet is reached through a guard, so
that a missing one is reported as "not available" instead of ending the run.

Dry run (--mirror LIBCUDART): there is no GPU, so training runs on the CPU and a "mirror"
allocates, through the CPU stand-in of the CUDA runtime, one device buffer per tensor that a GPU
run would hold (parameters, buffers, gradients, optimizer state, activations, batches, a
temporary or two, and one allocation made outside the allocator, like a library's workspace).
vramtap then sees device memory with the same shape as a real run, and every comparison in
validate.py runs for real against the mirror's own exact account. It checks the script, not
PyTorch.
"""

import argparse
import ctypes
import json
import math
import os
import platform
import statistics
import sys
import time
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F

# Model sizes: "gpu" is small enough to run in seconds on one GPU and large enough that the
# allocator's rounding is a small share of the peak; "tiny" keeps the dry run fast on two cores.
SIZES = {
    "gpu": dict(vocab=8192, d=512, layers=4, heads=8, seq=256, batch=8),
    "tiny": dict(vocab=256, d=32, layers=2, heads=2, seq=16, batch=2),
}


class Block(nn.Module):
    def __init__(self, d, heads, seq):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.proj = nn.Linear(4 * d, d)
        # A buffer, so that "parameters" is checked over parameters and buffers.
        self.register_buffer("blocked", torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.heads))
        att = att.masked_fill(self.blocked[:t, :t], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.out(y)
        return x + self.proj(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, d, layers, heads, seq, **_):
        super().__init__()
        self.vocab = vocab
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads, seq) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx, targets=None):
        # The token embedding comes first: in the out-of-memory case its output is the request
        # that fails, and its size is known exactly (batch x seq x d x 4 bytes).
        x = self.tok(idx)
        x = x + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.view(-1, self.vocab).float(), targets.view(-1))


def nbytes(t):
    return t.numel() * t.element_size()


# ---------------------------------------------------------------------------------------------
# Backends: the real GPU, or the dry run's mirror over the stand-in.


class Cuda:
    """The real thing: figures straight from torch.cuda."""

    dry = False

    def __init__(self):
        self.device = torch.device("cuda", 0)

    def addr(self, key, t):
        return t.data_ptr()

    def setup(self, model):
        model.to(self.device)

    def optimizer(self, params):
        return torch.optim.AdamW(params, lr=1e-3)

    def batch(self, b, t, vocab):
        g = self.device
        return (torch.randint(vocab, (b, t), device=g), torch.randint(vocab, (b, t), device=g))

    def after_backward(self):
        pass

    def drop_batch(self):
        pass

    def upload(self, t, pinned):
        """A host batch to the device as a training loop moves it: from pinned memory
        (DataLoader(pin_memory=True)) without waiting, or from the tensor's own memory."""
        if pinned:
            return t.pin_memory().to(self.device, non_blocking=True)
        return t.to(self.device)

    def item(self, loss):
        return loss.item()

    def sync(self):
        torch.cuda.synchronize()

    def max_allocated(self):
        return torch.cuda.max_memory_allocated(self.device)

    def max_reserved(self):
        return torch.cuda.max_memory_reserved(self.device)

    def allocated(self):
        return torch.cuda.memory_allocated(self.device)

    def total_memory(self):
        return torch.cuda.get_device_properties(self.device).total_memory

    def free_for_tensors(self):
        """What new tensors can still get: the device's free memory and the allocator's cache."""
        free = torch.cuda.mem_get_info(self.device)[0]
        return free + torch.cuda.memory_reserved(self.device) - self.allocated()

    def ballast(self, size):
        return torch.empty(size, dtype=torch.uint8, device=self.device)

    def facts(self):
        f = {}
        f["allocator_backend"] = guard(lambda: torch.cuda.memory.get_allocator_backend())
        f["memory_stats"] = guard(lambda: {k: v for k, v in torch.cuda.memory_stats(self.device)
                                           .items() if not k.startswith(("large_pool",
                                                                         "small_pool"))})
        f["mem_get_info"] = guard(lambda: list(torch.cuda.mem_get_info(self.device)))
        return f

    def segments(self):
        """PyTorch's own segments (native allocator): address ranges of what it reserved."""
        def read():
            return [{"address": s["address"], "size": s["total_size"],
                     "type": s.get("segment_type")} for s in torch.cuda.memory_snapshot()]
        return guard(read)


class MirrorOOM(RuntimeError):
    pass


class Mirror:
    """Dry run only (see the module's docstring). `mode` "pool" allocates stream-ordered, as
    PyTorch does in vramtap's tensor mode; "device" allocates with cudaMalloc, as PyTorch's
    native allocator takes its segments."""

    dry = True

    def __init__(self, lib, mode):
        self.device = torch.device("cpu")
        self.mode = mode
        self.lib = lib
        rt = self.rt = ctypes.CDLL(lib)
        vp, sz = ctypes.c_void_p, ctypes.c_size_t
        rt.cudaMallocAsync.argtypes = [ctypes.POINTER(vp), sz, vp]
        rt.cudaFreeAsync.argtypes = [vp, vp]
        rt.cudaMalloc.argtypes = [ctypes.POINTER(vp), sz]
        rt.cudaFree.argtypes = [vp]
        rt.cudaMemGetInfo.argtypes = [ctypes.POINTER(sz), ctypes.POINTER(sz)]
        rt.cudaDeviceGetDefaultMemPool.argtypes = [ctypes.POINTER(vp), ctypes.c_int]
        rt.cudaMemPoolGetAttribute.argtypes = [vp, ctypes.c_int, vp]
        rt.cudaMallocHost.argtypes = [ctypes.POINTER(vp), sz]
        rt.cudaMemcpy.argtypes = [vp, vp, sz, ctypes.c_int]
        rt.cudaMemcpyAsync.argtypes = [vp, vp, sz, ctypes.c_int, vp]
        self.uploads = []       # this step's uploaded batch: keys of device buffers
        self.pinned = {}        # size -> a pinned buffer, reused as PyTorch's host cache does
        self.keys = {}          # key -> (address, size)
        self.live = self.peak = 0
        self.ranges = []        # every range this "allocator" ever held, for segments()
        self.acts = []
        self.batch_keys = []
        self.outside = None
        self.seq = 0

    def alloc(self, size, key=None, outside=False):
        p = ctypes.c_void_p()
        if self.mode == "pool" and not outside:
            rc = self.rt.cudaMallocAsync(ctypes.byref(p), size, None)
        else:
            rc = self.rt.cudaMalloc(ctypes.byref(p), size)
        if rc != 0:
            raise MirrorOOM("out of memory: the stand-in refused %d bytes (error %d)" % (size, rc))
        if key is None:
            self.seq += 1
            key = ("anon", self.seq)
        self.keys[key] = (p.value, size)
        if not outside:
            self.live += size
            self.peak = max(self.peak, self.live)
            self.ranges.append({"address": p.value, "size": size, "type": "mirror"})
        return key

    def free(self, key, outside=False):
        address, size = self.keys.pop(key)
        if self.mode == "pool" and not outside:
            self.rt.cudaFreeAsync(address, None)
        else:
            self.rt.cudaFree(address)
        if not outside:
            self.live -= size

    def addr(self, key, t):
        return self.keys[key][0]

    def setup(self, model):
        for name, t in list(model.named_parameters()) + list(model.named_buffers()):
            self.alloc(nbytes(t), ("param", name))
        self.model = model
        names = {id(p): n for n, p in model.named_parameters()}
        for p in model.parameters():
            p.register_hook(self._grad_hook(names[id(p)], nbytes(p)))
        for m in model.modules():
            if not list(m.children()):
                m.register_forward_hook(self._forward_hook)
        model.register_forward_pre_hook(self._first_forward)

    def _first_forward(self, module, args):
        # A library's own allocation made on first use and kept (a cuBLAS workspace, say):
        # outside the allocator, so not a tensor PyTorch knows about.
        if self.outside is None and torch.is_grad_enabled():
            self.outside = self.alloc(1 << 20, ("outside", 0), outside=True)

    def _forward_hook(self, module, args, out):
        if not torch.is_grad_enabled() or not isinstance(out, torch.Tensor):
            return
        self.acts.append(self.alloc(nbytes(out)))
        self.free(self.alloc(4096))  # the op's workspace: a temporary

    def _grad_hook(self, name, size):
        def hook(grad):
            if ("grad", name) not in self.keys:
                self.alloc(size, ("grad", name))
            self.free(self.alloc(2048))
        return hook

    def optimizer(self, params):
        mirror = self

        class MirroredAdamW(torch.optim.AdamW):
            def step(self, closure=None):
                out = super().step(closure)
                biggest = 0
                for p, state in self.state.items():
                    for k, v in state.items():
                        key = ("state", id(p), k)
                        if isinstance(v, torch.Tensor) and key not in mirror.keys:
                            mirror.alloc(nbytes(v), key)
                        biggest = max(biggest, nbytes(p))
                mirror.free(mirror.alloc(biggest))  # the update's temporary
                return out

        self.state_key = lambda p, k: ("state", id(p), k)
        return MirroredAdamW(params, lr=1e-3)

    def batch(self, b, t, vocab):
        self.drop_batch()
        x, y = torch.randint(vocab, (b, t)), torch.randint(vocab, (b, t))
        self.batch_keys = [self.alloc(nbytes(x), ("batch", 0)), self.alloc(nbytes(y), ("batch", 1))]
        return x, y

    def drop_batch(self):
        for key in self.batch_keys:
            self.free(key)
        self.batch_keys = []

    def upload(self, t, pinned):
        """What .to(device) does on a GPU: a device buffer and a copy into it, from the
        tensor's own (pageable) memory, or from a pinned buffer the batch was first copied to
        (pin_memory()) without waiting. The previous step's uploads die first."""
        if len(self.uploads) >= 2:
            for key in self.uploads:
                self.free(key)
            self.uploads = []
        n = nbytes(t)
        key = self.alloc(n)
        self.uploads.append(key)
        dev, src = self.keys[key][0], t.data_ptr()
        if pinned:
            if n not in self.pinned:
                p = ctypes.c_void_p()
                if self.rt.cudaMallocHost(ctypes.byref(p), n) != 0:
                    raise RuntimeError("mirror: cudaMallocHost failed")
                self.pinned[n] = p.value
            ctypes.memmove(self.pinned[n], src, n)
            rc = self.rt.cudaMemcpyAsync(dev, self.pinned[n], n, 1, None)
        else:
            rc = self.rt.cudaMemcpy(dev, src, n, 1)
        if rc != 0:
            raise RuntimeError("mirror: upload failed (%d)" % rc)
        return t

    def item(self, loss):
        """loss.item() on a GPU: a synchronous download of one value into pageable memory."""
        value = ctypes.c_float()
        if self.rt.cudaMemcpy(ctypes.addressof(value), self.keys[self.uploads[0]][0], 4, 2) != 0:
            raise RuntimeError("mirror: download failed")
        return loss.item()

    def after_backward(self):
        for key in self.acts:
            self.free(key)
        self.acts = []

    def sync(self):
        pass

    def _pool_attr(self, attr):
        pool, v = ctypes.c_void_p(), ctypes.c_uint64()
        if self.rt.cudaDeviceGetDefaultMemPool(ctypes.byref(pool), 0) != 0:
            return None
        if self.rt.cudaMemPoolGetAttribute(pool, attr, ctypes.byref(v)) != 0:
            return None
        return v.value

    # PyTorch's async backend reports the pool's UsedMemHigh and ReservedMemHigh as its maxima;
    # the mirror reads the same attributes of the stand-in's pool. Its native mode reports its
    # own high-water mark, as the caching allocator reports its segments.
    def max_allocated(self):
        return self._pool_attr(8) if self.mode == "pool" else self.peak

    def max_reserved(self):
        return self._pool_attr(6) if self.mode == "pool" else self.peak

    def allocated(self):
        return self._pool_attr(7) if self.mode == "pool" else self.live

    def _mem_get_info(self):
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        self.rt.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total))
        return free.value, total.value

    def total_memory(self):
        return self._mem_get_info()[1]

    def free_for_tensors(self):
        return self._mem_get_info()[0] + (self._pool_attr(5) or 0) - (self._pool_attr(7) or 0)

    def ballast(self, size):
        self.alloc(size, ("ballast", 0))
        return None

    def facts(self):
        return {"allocator_backend": "stand-in mirror (%s)" % self.mode, "memory_stats": None,
                "mem_get_info": None}

    def segments(self):
        return self.ranges


# ---------------------------------------------------------------------------------------------


def guard(fn):
    """fn(), or {"not_available": why} when this torch cannot do it."""
    try:
        return fn()
    except Exception as e:  # any failure of an optional API is a finding, not the end
        return {"not_available": "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:300]
                                             if str(e) else "")}


def driver_ids(libcuda):
    """Device 0's UUID and PCI bus id as the driver gives them (cuDeviceGetUuid_v2,
    cuDeviceGetPCIBusId), read through ctypes: the same driver and ordinal PyTorch uses."""
    cu = ctypes.CDLL(libcuda)
    dev, uuid, bus = ctypes.c_int(), ctypes.create_string_buffer(16), ctypes.create_string_buffer(64)
    for call in (lambda: cu.cuInit(0), lambda: cu.cuDeviceGet(ctypes.byref(dev), 0),
                 lambda: cu.cuDeviceGetUuid_v2(uuid, dev),
                 lambda: cu.cuDeviceGetPCIBusId(bus, 64, dev)):
        rc = call()
        if rc:
            raise RuntimeError("driver call failed with %d" % rc)
    h = uuid.raw.hex()
    return {"uuid": "GPU-%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:]),
            "pci_bus_id": bus.value.decode()}


def driver_version(libcuda):
    """cuDriverGetVersion in PyTorch's own process, through ctypes (PyTorch 2 has no call for
    it)."""
    v = ctypes.c_int()
    rc = ctypes.CDLL(libcuda).cuDriverGetVersion(ctypes.byref(v))
    if rc:
        raise RuntimeError("cuDriverGetVersion failed with %d" % rc)
    return v.value


def torch_ids():
    """Device 0's UUID and PCI address as PyTorch reports them (torch 2.x properties)."""
    props = torch.cuda.get_device_properties(0)
    return {"uuid": str(props.uuid),
            "pci_bus_id": "%04x:%02x:%02x.0" % (props.pci_domain_id, props.pci_bus_id,
                                                props.pci_device_id)}


def environment(backend):
    env = {"torch": torch.__version__, "python": platform.python_version(),
           "torch_cuda": getattr(torch.version, "cuda", None)}
    # The dry run's driver is the stand-in, next to the mirror's runtime.
    env["driver_ids"] = guard(lambda: driver_ids(
        os.path.join(os.path.dirname(backend.lib), "libcuda.so.1") if backend.dry
        else "libcuda.so.1"))
    if not backend.dry:
        env["torch_ids"] = guard(torch_ids)
        props = torch.cuda.get_device_properties(0)
        env.update(gpu=props.name, gpu_total_bytes=props.total_memory,
                   capability="%d.%d" % (props.major, props.minor),
                   cudnn=guard(lambda: torch.backends.cudnn.version()),
                   driver=guard(lambda: driver_version("libcuda.so.1")),
                   nccl=guard(lambda: ".".join(map(str, torch.cuda.nccl.version()))))
    return env


def build(args, backend):
    torch.manual_seed(0)
    cfg = dict(SIZES[args.size])
    model = GPT(**cfg)
    backend.setup(model)
    opt = backend.optimizer(model.parameters())
    return cfg, model, opt


class Trainer:
    """One training step, phase by phase, reading PyTorch's high-water mark after each phase so
    that the phase in which PyTorch's own peak happened can be named."""

    def __init__(self, args, backend, cfg, model, opt):
        self.args, self.backend, self.cfg, self.model, self.opt = args, backend, cfg, model, opt
        self.samples = []
        self.step_no = 0
        self.batch = None
        dev = backend.device.type
        if args.precision == "bf16":
            self.autocast = lambda: torch.autocast(device_type=dev, dtype=torch.bfloat16)
        else:
            self.autocast = None

    def sample(self, phase):
        if self.args.case == "train":
            self.samples.append({"phase": phase, "step": self.step_no,
                                 "max_allocated": self.backend.max_allocated()})

    def step(self):
        c = self.cfg
        self.batch = None  # the last batch dies when the next one is made, as in a data loader
        x, y = self.batch = self.backend.batch(c["batch"], c["seq"], c["vocab"])
        if self.autocast:
            with self.autocast():
                loss = self.model(x, y)
        else:
            loss = self.model(x, y)
        self.sample("forward")
        loss.backward()
        del loss
        self.backend.after_backward()
        self.sample("backward")
        self.opt.step()
        self.sample("optimizer")
        # Gradients kept between steps (set_to_none=False): then every gradient exists at the
        # peak and the gradient check is over all of them; the default (None) would free them
        # here and make the gradient bytes at the peak depend on how far backward had got.
        self.opt.zero_grad(set_to_none=False)
        self.step_no += 1


def tensors_record(backend, model, opt):
    """Where each parameter, buffer, gradient and optimizer state tensor lives, and its size."""
    params, grads, state = [], [], []
    for name, p in model.named_parameters():
        params.append({"name": name, "address": backend.addr(("param", name), p),
                       "size": nbytes(p), "buffer": False, "requires_grad": p.requires_grad})
        if p.grad is not None:
            grads.append({"name": name, "address": backend.addr(("grad", name), p.grad),
                          "size": nbytes(p.grad)})
    for name, b in model.named_buffers():
        params.append({"name": name, "address": backend.addr(("param", name), b),
                       "size": nbytes(b), "buffer": True, "requires_grad": False})
    names = {id(p): n for n, p in model.named_parameters()}
    for p, st in opt.state.items():
        for k, v in st.items():
            if isinstance(v, torch.Tensor):
                on_device = v.device.type == backend.device.type
                state.append({"name": "%s.%s" % (names.get(id(p), "?"), k), "size": nbytes(v),
                              "device": str(v.device), "on_device": on_device,
                              "address": backend.addr(("state", id(p), k), v)
                              if on_device else None})
    return params, grads, state


def case_train(args, backend, result):
    cfg, model, opt = build(args, backend)
    trainer = Trainer(args, backend, cfg, model, opt)
    for _ in range(args.steps):
        trainer.step()
    backend.sync()
    # Read PyTorch's figures before anything else can allocate.
    result["max_allocated"] = backend.max_allocated()
    result["max_reserved"] = backend.max_reserved()
    result["allocated_at_end"] = backend.allocated()
    params, grads, state = tensors_record(backend, model, opt)
    result.update(config=cfg, steps=args.steps, precision=args.precision, params=params,
                  grads=grads, state=state, phase_samples=trainer.samples)
    result["expected"] = {
        "parameters_and_buffers": sum(p["size"] for p in params),
        "parameters": sum(p["size"] for p in params if not p["buffer"]),
        "buffers": sum(p["size"] for p in params if p["buffer"]),
        "gradients": sum(p["size"] for p in params if p["requires_grad"]),
        "grad_tensors": sum(g["size"] for g in grads),
        "optimizer_state_device": sum(s["size"] for s in state if s["on_device"]),
        "optimizer_state_elsewhere": sum(s["size"] for s in state if not s["on_device"]),
    }
    result["batch"] = [{"address": backend.addr(("batch", i), t), "size": nbytes(t)}
                       for i, t in enumerate(trainer.batch)]
    result["facts"] = backend.facts()
    result["segments"] = backend.segments()


def case_copies(args, backend, result):
    """A loop fed from the host as a DataLoader feeds one: each step a batch made on the CPU is
    uploaded, pinned first with --pin-memory, and the loss is read once (.item()). What it
    uploads a step is known exactly: the two token tensors."""
    cfg, model, opt = build(args, backend)
    c = cfg
    for _ in range(args.steps):
        x = backend.upload(torch.randint(c["vocab"], (c["batch"], c["seq"])), args.pin_memory)
        y = backend.upload(torch.randint(c["vocab"], (c["batch"], c["seq"])), args.pin_memory)
        loss = model(x, y)
        loss.backward()
        backend.item(loss)
        del loss
        backend.after_backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
    backend.sync()
    result.update(config=cfg, steps=args.steps, pinned=args.pin_memory,
                  upload_bytes_per_step=2 * c["batch"] * c["seq"] * 8,
                  uploads_per_step=2, items_per_step=1)


def timed_steps(trainer, backend, warmup, n):
    for _ in range(warmup):
        trainer.step()
    backend.sync()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        trainer.step()
        backend.sync()
        times.append(time.perf_counter() - t0)
    return {"median_s": statistics.median(times), "mean_s": statistics.fmean(times),
            "min_s": min(times), "steps": n}


def case_timing(args, backend, result):
    cfg, model, opt = build(args, backend)
    trainer = Trainer(args, backend, cfg, model, opt)
    result["config"] = cfg
    result["timings"] = {"this_process": timed_steps(trainer, backend, args.warmup, args.timed)}
    if not args.history:
        return
    # PyTorch's own recorder, in the same process right after the plain measurement: its cost is
    # then measured under the same conditions (clocks, caches, allocator state).
    record = getattr(getattr(torch.cuda, "memory", None), "_record_memory_history", None)
    for stacks in ("python", "all"):
        label = "record_memory_history_" + stacks
        if backend.dry or record is None:
            result["timings"][label] = {"not_available": "skipped (dry run): needs CUDA"
                                        if backend.dry else "no _record_memory_history"}
            continue
        try:
            record(enabled="all", context="all", stacks=stacks, max_entries=1000000)
        except Exception as e:  # older signature: report, do not guess another
            result["timings"][label] = {"not_available": "%s: %s" % (type(e).__name__, e)}
            continue
        try:
            result["timings"][label] = timed_steps(trainer, backend, 2, args.timed)
        finally:
            record(enabled=None)


def case_profile(args, backend, result):
    cfg, model, opt = build(args, backend)
    trainer = Trainer(args, backend, cfg, model, opt)
    result["config"] = cfg
    try:
        from torch.profiler import ProfilerActivity, profile
    except ImportError as e:
        result["profile"] = {"not_available": str(e)}
        return
    activities = [ProfilerActivity.CPU] + ([] if backend.dry else [ProfilerActivity.CUDA])
    t0 = time.perf_counter()
    with profile(activities=activities, profile_memory=True, record_shapes=True,
                 with_stack=True) as prof:
        for _ in range(args.steps):
            trainer.step()
        backend.sync()
    prof_info = {"steps": args.steps, "profiled_s": time.perf_counter() - t0,
                 "max_allocated": None if backend.dry else backend.max_allocated(),
                 "max_reserved": None if backend.dry else backend.max_reserved()}
    result["profile"] = prof_info
    if not hasattr(prof, "export_memory_timeline"):
        prof_info["not_available"] = ("torch %s has no export_memory_timeline" % torch.__version__)
        return
    if backend.dry:
        prof_info["not_available"] = "skipped (dry run): the memory timeline is for a CUDA device"
        return
    # The suffix "raw.json.gz" selects the raw event export: (time, action, bytes, category).
    t0 = time.perf_counter()
    try:
        prof.export_memory_timeline(args.timeline, device="cuda:0")
    except Exception as e:
        prof_info["not_available"] = "export_memory_timeline failed: %s: %s" % (type(e).__name__, e)
        return
    prof_info["export_s"] = time.perf_counter() - t0
    prof_info["timeline"] = args.timeline
    # The category of each index, from torch itself where it still says.
    def categories():
        from torch.profiler import _memory_profiler as mp
        inv = {i: (c.name if c is not None else None) for c, i in mp._CATEGORY_TO_INDEX.items()}
        return [inv[i] for i in range(len(inv))]
    prof_info["category_names"] = guard(categories)


def case_oom(args, backend, result):
    cfg, model, opt = build(args, backend)
    trainer = Trainer(args, backend, cfg, model, opt)
    trainer.step()  # one normal step first: gradients and optimizer state are then live too
    backend.sync()
    trainer.batch = None
    backend.drop_batch()
    bytes_per_seq = cfg["seq"] * cfg["d"] * 4  # the token embedding's fp32 output per sequence
    result.update(config=cfg, oom=args.oom, total_memory=backend.total_memory())
    ballast = None
    if args.oom == "fraction":
        if backend.dry:
            result["skipped"] = "skipped (dry run): set_per_process_memory_fraction needs CUDA"
            return
        headroom = 256 << 20
        limit = backend.allocated() + headroom
        fraction = limit / result["total_memory"]
        torch.cuda.set_per_process_memory_fraction(fraction, 0)
        request = 4 * headroom
        result.update(fraction=fraction, limit_bytes=int(fraction * result["total_memory"]),
                      headroom=headroom)
    else:
        # Take all but a margin of the device with one tensor, then ask for twice the margin: a
        # real refusal by CUDA, for a request far below the device's size (a request beyond the
        # card's capacity might be refused as an invalid value rather than out of memory).
        margin = (4 << 20) if backend.dry else (8 << 30)
        free = backend.free_for_tensors()
        ballast = backend.ballast(free - margin)
        request = 2 * margin
        result.update(margin=margin, free_before_ballast=free,
                      ballast={"address": backend.addr(("ballast", 0), ballast),
                               "size": free - margin})
    big = -(-request // bytes_per_seq)
    result["batch"] = big
    result["expected_request"] = big * bytes_per_seq
    x = torch.randint(cfg["vocab"], (big, cfg["seq"]), device=backend.device)
    x_key = backend.alloc(nbytes(x), ("batch", "big")) if backend.dry else None
    result["input"] = {"address": backend.addr(x_key, x), "size": nbytes(x)}
    try:
        model(x)
        result["outcome"] = "no error"
    except RuntimeError as e:  # torch.OutOfMemoryError is one
        result["outcome"] = type(e).__name__
        result["message"] = str(e)[:2000]
        backend.sync()
        result["allocated_at_failure"] = backend.allocated()
        params, grads, state = tensors_record(backend, model, opt)
        result.update(params=params, grads=grads, state=state)
        result["facts"] = backend.facts()
    del ballast


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", required=True,
                    choices=["train", "timing", "profile", "oom", "copies"])
    ap.add_argument("--pin-memory", action="store_true", help="copies: upload from pinned memory")
    ap.add_argument("--out", required=True)
    ap.add_argument("--size", default="gpu", choices=sorted(SIZES))
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--timed", type=int, default=30)
    ap.add_argument("--history", action="store_true")
    ap.add_argument("--oom", default="device", choices=["device", "fraction"])
    ap.add_argument("--timeline", default=None)
    ap.add_argument("--mirror", default=None, help="dry run: the stand-in libcudart.so.13")
    ap.add_argument("--mirror-mode", default="pool", choices=["pool", "device"])
    args = ap.parse_args()
    result = {"case": args.case, "argv": sys.argv[1:], "pid": os.getpid(),
              "env_alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF")}
    status = 0
    try:
        if args.mirror:
            backend = Mirror(args.mirror, args.mirror_mode)
        elif torch.cuda.is_available():
            backend = Cuda()
        else:
            raise SystemExit("workload: no CUDA device and no --mirror")
        result["dry_run"] = backend.dry
        result["environment"] = environment(backend)
        {"train": case_train, "timing": case_timing, "profile": case_profile,
         "oom": case_oom, "copies": case_copies}[args.case](args, backend, result)
    except Exception:
        result["error"] = traceback.format_exc()[-4000:]
        status = 1
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1, default=str)
    return status


if __name__ == "__main__":
    sys.exit(main())
