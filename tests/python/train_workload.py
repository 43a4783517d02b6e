"""A small PyTorch training (or inference) loop that also allocates device memory through the
stand-in runtime from inside a module's forward, a custom autograd Function's backward and a
custom optimizer's step. Run under `vramtap run` by check_train.py.

    train_workload.py VARIANT EXPECT_JSON

VARIANT: train (one forward/backward per step), accum (two micro-batches per step), infer (no
optimizer, forwards under no_grad), torch2 (train, with torch >= 2.0's global optimizer step hooks
emulated on an older torch; run with python -S so that the bootstrap does not install first).
Suffixes: -threads (each forward of the model also runs its inner module on a second thread: a
module call nested in another thread's outermost call, part of that forward, no step of its own),
-fallback (run with VRAMTAP_TEST_NO_BUILTINS=1: the hooks call the library through ctypes and
count outermost calls and tell nested ones in Python, as with a library without builtins).

The script knows where each of its allocations happens and writes that to EXPECT_JSON: for each
allocation live at the peak, its size, the birth and death (phase, step) the snapshot must show
and, for those made in a forward, backward or step, the Python frame its stack must name; plus
the phase instances the timeline must hold. Every allocation made before the peak is
kept alive up to it; the peak is one big allocation after the loop; a last iteration after the
peak frees chosen allocations inside each phase.
"""

import collections
import ctypes
import functools
import importlib
import json
import os
import sys
import threading

import torch

VARIANT, EXPECT = sys.argv[1].split("-"), sys.argv[2]
BASE, THREADS, FALLBACK = VARIANT[0], "threads" in VARIANT, "fallback" in VARIANT
STEPS = 3
MICRO = 2 if BASE == "accum" else 1
RAISING_STEP = 1  # this step's optimizer raises once, after allocating


def emulate_torch2_optimizer_hooks():
    """Give torch 1.13 the global step hooks of torch >= 2.0, called the way 2.x calls them:
    from a wrapper that Optimizer.__init__ puts around the class's step()."""
    optimizer = importlib.import_module("torch.optim.optimizer")
    pre_hooks, post_hooks = collections.OrderedDict(), collections.OrderedDict()

    def registrar(hooks):
        def register(hook):
            handle = torch.utils.hooks.RemovableHandle(hooks)
            hooks[handle.id] = hook
            return handle

        return register

    def profile_hook_step(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            self = args[0]
            for hook in list(pre_hooks.values()):
                hook(self, args, kwargs)
            out = func(*args, **kwargs)
            for hook in list(post_hooks.values()):
                hook(self, args, kwargs)
            return out

        return wrapper

    def patch_step_function(self):
        self._zero_grad_profile_name = "Optimizer.zero_grad#%s.zero_grad" % type(self).__name__
        if not getattr(type(self).step, "hooked", None):
            type(self).step = profile_hook_step(type(self).step)
            type(self).step.hooked = True

    optimizer.register_optimizer_step_pre_hook = registrar(pre_hooks)
    optimizer.register_optimizer_step_post_hook = registrar(post_hooks)
    optimizer.Optimizer._hook_for_profile = patch_step_function


if BASE == "torch2":
    # What the bootstrap would have done at start and after `import torch` (attached through
    # CUPTI, vramtap_lib loads the library CUDA_INJECTION64_PATH names, as the bootstrap does).
    import vramtap_lib

    vramtap_lib.library(ctypes.PyDLL).vramtap_python_install()
    emulate_torch2_optimizer_hooks()
    import vramtap_torch

    vramtap_torch.install()
if FALLBACK != (sys.modules["vramtap_torch"]._api[4] is None):
    sys.exit("the hooks %s the library's builtins" % ("use" if FALLBACK else "lack"))

rt = ctypes.CDLL(os.path.join(os.environ["VT_STANDIN_DIR"], "libcudart.so.13"))
rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
rt.cudaFree.argtypes = [ctypes.c_void_p]

# Where the loop is now, as the snapshot must record it: the phase expected for an allocation
# made in a module's forward, a Function's backward, an optimizer step; the step counter; and a
# name shared by allocations that must fall in the same phase instance.
where = {"forward": "setup", "backward": None, "optimizer": None, "step": 0, "group": None}
expect = {"allocations": [], "timeline": []}
allocating = True
keep = []  # (pointer, expectation) of every allocation kept to the peak
free_in = {"forward": [], "backward": [], "optimizer": []}  # freed at the next such site


def alloc(what, phase, group=None):
    p = ctypes.c_void_p()
    size = (1 << 20) + 4096 * (len(expect["allocations"]) + 1)
    rc = rt.cudaMalloc(ctypes.byref(p), size)
    if rc != 0:
        sys.exit("cudaMalloc(%d) failed: %d" % (size, rc))
    record = {"what": what, "size": size, "birth": {"phase": phase, "step": where["step"]},
              "death": None, "group": group, "frame": None}
    expect["allocations"].append(record)
    return p, record


def free(entry, phase):
    p, record = entry
    if rt.cudaFree(p) != 0:
        sys.exit("cudaFree failed")
    record["death"] = {"phase": phase, "step": where["step"]}


def site(kind, what):
    """An allocation site inside a forward, backward or optimizer step."""
    for entry in free_in[kind]:
        free(entry, where[kind])
    free_in[kind] = []
    if allocating:
        entry = alloc(what, where[kind], where["group"] if kind == "forward" else None)
        # The Python frame that the allocation's stack must name: the method that called site().
        caller = sys._getframe(1)
        code = caller.f_code
        entry[1]["frame"] = {"file": os.path.basename(code.co_filename),
                             "function": getattr(code, "co_qualname", code.co_name),
                             "line": caller.f_lineno}
        keep.append(entry)


def phase_instance(name):
    expect["timeline"].append({"phase": name, "step": where["step"]})


class TapFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        site("backward", "Function.backward")
        return grad


class Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        site("forward", "Inner.forward")
        return torch.relu(self.lin(x))


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()
        self.out = torch.nn.Linear(8, 1)

    def forward(self, x, fail=False):
        site("forward", "Model.forward")
        if THREADS:
            other = threading.Thread(target=self.inner, args=(x,))
            other.start()
            other.join()
        h = TapFunction.apply(self.inner(x))
        if fail:
            raise RuntimeError("forward fails on purpose")
        return self.out(h)


class TapSGD(torch.optim.SGD):
    """Allocates in its step, then runs SGD's own (itself a wrapped step: nested, one step)."""

    raise_once = False

    def step(self, closure=None):
        site("optimizer", "TapSGD.step")
        if self.raise_once:
            self.raise_once = False
            raise RuntimeError("step fails on purpose")
        return super().step(closure)


torch.manual_seed(0)
x, y = torch.randn(4, 8), torch.randn(4, 1)
model = Model()


def train_iteration(opt, sched, loss_fn):
    for m in range(MICRO):
        where.update(forward="forward", backward="backward",
                     group="iteration %d micro-batch %d" % (where["step"], m))
        out = model(x)
        phase_instance("forward")
        loss = loss_fn(out, y) / MICRO  # the loss module is a top-level call of its own
        phase_instance("forward")
        loss.backward()
        phase_instance("backward")
    where.update(optimizer="optimizer")
    phase_instance("optimizer")
    try:
        opt.step()
    except RuntimeError:
        # The failed step still counts: its phase closes when the exception leaves step().
        pass
    else:
        sched.step()
    opt.zero_grad()
    where["step"] += 1


if BASE == "infer":
    model.eval()
    for k in range(STEPS):
        with torch.no_grad():
            model(x)  # no optimizer: each top-level call is a step, and no phase
        where["step"] += 1
    peak_phase = "setup"
else:
    loss_fn = torch.nn.MSELoss()
    opt = TapSGD(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1)
    for s in range(STEPS):
        opt.raise_once = s == RAISING_STEP
        train_iteration(opt, sched, loss_fn)
        where.update(forward="other", group=None)
        with torch.no_grad():
            model(x)  # evaluation between steps: no phase, no step
    # A forward that raises must not leave its phase open.
    where.update(forward="forward", group="failed forward")
    try:
        model(x, fail=True)
    except RuntimeError:
        pass
    phase_instance("forward")
    keep.append(alloc("after the failed forward", "other", "failed forward"))
    peak_phase = "other"

peak = alloc("peak", peak_phase)
free(peak, peak_phase)

# After the peak: free allocations inside the phases of one more iteration.
allocating = False
first = {}
for entry in keep:
    first.setdefault(entry[1]["what"], entry)
if BASE == "infer":
    free_in["forward"] = [first["Model.forward"]]
    with torch.no_grad():
        model(x)
    where["step"] += 1
else:
    free_in["forward"] = [first["Model.forward"]]
    free_in["backward"] = [first["Function.backward"]]
    free_in["optimizer"] = [first["TapSGD.step"]]
    MICRO = 1
    train_iteration(opt, sched, loss_fn)
    free(first["after the failed forward"], "other")

expect["steps"] = where["step"]
expect["phase_markers"] = BASE != "infer"
expect["allocations"].sort(key=lambda r: r["size"])
with open(EXPECT, "w") as f:
    json.dump(expect, f, indent=1)
