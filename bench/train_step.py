"""A PyTorch CPU training step, as scripts/bench times it with and without vramtap: a small MLP
(two hidden layers of 128, batch 32) with Adam, small enough that the step's Python and dispatch
dominate (Debian's torch has a generic BLAS). The step touches no GPU: what vramtap adds here is
what it costs a Python program's calls (the PyTorch hooks: phases and module paths; the identity
refresh waits for device memory, bench/identity_refresh.py measures it), not its allocation
hooks.

usage: train_step.py [STEPS]          after 30 steps of warm-up, prints the least and the median
                                      CPU time of a step (of the process, which other tenants of
                                      a loaded machine do not add to), in microseconds
       train_step.py --paired [PAIRS] under vramtap: blocks of 10 steps with the hooks and of 10
                                      with the functions they wrap, alternately (default 200
                                      pairs); prints the lower quartile of the hooked steps and
                                      its difference to that of the others, in microseconds:
                                      the hooks' own cost, both sets taken under the same load

Under torch 2.x the optimizer's hooks are global step hooks, not a wrapper: the paired steps
without hooks set torch's table of them aside (a private name; without it the optimizer's hooks
run in both steps of a pair, and the line says so).
"""

import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paired import paired, timed_steps  # noqa: E402

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(128, 128), torch.nn.ReLU(),
                            torch.nn.Linear(128, 128), torch.nn.ReLU(),
                            torch.nn.Linear(128, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randn(32, 128)
y = torch.randint(0, 10, (32,))


def step():
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()


def _optimizer_switch():
    """Under torch 1.x, a function that turns vramtap's wrapper of the optimizer's step() on or
    off, None when there is none (torch 2.x: global step hooks). torch 1.x wraps a class's step()
    in its own profiling wrapper (a record_function) when the first optimizer of the class is
    made, around vramtap's if vramtap came first: only vramtap's is turned, in place, and
    torch's stays in both steps of a pair, as it is in a plain run. functools.wraps copies the
    attributes of the wrapped function to its wrapper, so vramtap's is known by its code."""
    def is_vramtaps(f):
        return getattr(getattr(f, "__code__", None), "co_filename", "").endswith("vramtap_torch.py")

    outer, f = None, type(opt).step
    while not is_vramtaps(f):
        outer, f = f, getattr(f, "__wrapped__", None)
        if f is None:
            return None
    if outer is None:
        return lambda on: setattr(type(opt), "step", f if on else f.__wrapped__)
    cells = [c for c in outer.__closure__ or () if c.cell_contents is f]
    if not cells:  # a wrapper that does not hold it in a closure: left on, and the line says so
        return None
    return lambda on: setattr(cells[0], "cell_contents", f if on else f.__wrapped__)


def hooks_switch():
    """A function that turns the hooks on (True) or off (False); and whether the optimizer's
    hooks are among those it turns."""
    import torch.autograd
    import torch.optim.optimizer as optimizer

    if not getattr(sys.modules.get("vramtap_torch"), "_installed", False):
        sys.exit("--paired: run it under vramtap")
    places = [(torch.nn.Module, "__call__"), (torch.autograd, "backward"),
              (torch.autograd, "grad")]
    hooked = [getattr(o, name) for o, name in places]
    raw = [f.__wrapped__ for f in hooked]
    optimizer_use = _optimizer_switch()
    tables = [getattr(optimizer, name, None) for name in ("_global_optimizer_pre_hooks",
                                                          "_global_optimizer_post_hooks")]
    tables = [t for t in tables if t]
    saved = [dict(t) for t in tables]

    def use(on):
        for (o, name), f in zip(places, hooked if on else raw):
            setattr(o, name, f)
        if optimizer_use:
            optimizer_use(on)
        for t, s in zip(tables, saved):
            t.clear()
            if on:
                t.update(s)

    return use, bool(tables) or optimizer_use is not None


def print_paired(pairs):
    use, optimizer_too = hooks_switch()
    hooked, without = paired(step, use, pairs)
    print("%.1f %.1f%s" % (hooked * 1e6, (hooked - without) * 1e6,
                           "" if optimizer_too else " (the optimizer's hooks in both)"))


for _ in range(30):
    step()
if sys.argv[1:2] == ["--paired"]:
    print_paired(int(sys.argv[2]) if len(sys.argv) > 2 else 200)
    sys.exit(0)
times = timed_steps(step, int(sys.argv[1]) if len(sys.argv) > 1 else 200)
print("%.1f %.1f" % (min(times) * 1e6, statistics.median(times) * 1e6))
