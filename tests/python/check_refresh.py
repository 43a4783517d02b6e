"""The identity refresh of the PyTorch hooks (vramtap_identity.py) driven directly, without the
library: its calls into the library are caught and compared, refresh by refresh, with the
storage ranges of the tensors a test model and its optimizer hold.

- The first forward hands over every parameter and buffer, at storage level (a view into a flat
  buffer gives the buffer); a new optimizer's step, every gradient and state tensor at once.
- Steady steps hand over the gradients only; re-made gradients are handed over again.
- The periodic look is spread over the refreshes: a parameter added after the first forward
  and a state tensor replaced in place are handed over exactly at the refresh whose slice
  reaches them, and not before; meanwhile no refresh holds a gradient.
- A tensor without storage (sparse) in the optimizer's state leaves the others labelled.
"""

import io
import math
import sys
import weakref

from vtpy import BOOTSTRAP, check, finish

sys.path.insert(0, BOOTSTRAP)
import torch  # noqa: E402

import vramtap_identity as vi  # noqa: E402

calls = []  # per refresh: category -> [(address, bytes)] (a storage once per tensor on it)
records = {}


def label_ranges(buf, n, category):
    calls[-1].setdefault(category.decode(), []).extend(zip(buf[0:2 * n:2], buf[1:2 * n:2]))
    return 0


vi._api = (label_ranges, lambda k, v: records.__setitem__(k, v) or 0,
           lambda k, v: records.__setitem__(k, v) or 0)
vi.install(torch)
storage = getattr(torch.Tensor, "untyped_storage", None) or torch.Tensor._storage


def rng(t):
    s = storage(t)
    return (s.data_ptr(), s.nbytes())


def refresh(fn, *args):
    calls.append({})
    fn(*args)
    return {k: sorted(set(v)) for k, v in calls[-1].items()}


def want(*tensors):
    return sorted({rng(t) for t in tensors})


BLOCKS = 150  # 303 modules and 302 state entries: the look takes several slices of each
flat = torch.zeros(BLOCKS * 20)


class Block(torch.nn.Module):
    def __init__(self, i):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        # the weight is a view into a flat buffer: its range is the buffer's
        self.lin.weight = torch.nn.Parameter(flat[i * 20:i * 20 + 16].view(4, 4))
        self.lin.bias = torch.nn.Parameter(flat[i * 20 + 16:i * 20 + 20])


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block(i) for i in range(BLOCKS))
        self.norm = torch.nn.LayerNorm(4)
        self.register_buffer("scale", torch.ones(3))

    def forward(self, x):
        return x


model = Model()
params = list(model.parameters())
modules = len(list(model.modules()))
first = refresh(vi.note_forward, model, (torch.zeros(1),), {})
check(first == {"parameters": want(flat, model.norm.weight, model.norm.bias, model.scale)},
      "first forward: every parameter and buffer at storage level", first)

opt = torch.optim.Adam(params)
vi.note_optimizer(opt)
for p in params:
    p.grad = torch.ones_like(p)
    opt.state[p] = {"step": torch.zeros(()), "exp_avg": torch.zeros_like(p),
                    "exp_avg_sq": torch.zeros_like(p)}
sparse = torch.sparse_coo_tensor([[0]], [1.0], (4,))
opt.state[params[0]]["sparse"] = sparse
states = [t for s in opt.state.values() for t in s.values() if t is not sparse]
step = refresh(vi.note_step)
check(step == {"gradients": want(*(p.grad for p in params)), "optimizer_state": want(*states)},
      "a new optimizer's step: every gradient and state tensor (the sparse one left out)",
      {k: len(v) for k, v in step.items()})

steady = refresh(vi.note_step)
check(steady == {"gradients": want(*(p.grad for p in params))}, "a steady step: gradients only",
      {k: len(v) for k, v in steady.items()})
for p in params:
    p.grad = torch.ones_like(p)
regrad = refresh(vi.note_step)
check(regrad == {"gradients": want(*(p.grad for p in params))}, "re-made gradients, again",
      {k: len(v) for k, v in regrad.items()})

# Before the next look: a parameter added to a module, a state tensor replaced in place
extra = torch.nn.Parameter(torch.zeros(7))
model.blocks[BLOCKS // 2].extra = extra
last = params[-1]
replaced = opt.state[last]["exp_avg"] = torch.zeros_like(last)
until_look = (-vi._refreshes) % vi.FULL_EVERY or vi.FULL_EVERY
for i in range(until_look - 1):
    r = refresh(vi.note_step)
    check(set(r) == {"gradients"}, "refresh %d before the look: gradients only" % i, sorted(r))
module_slices = math.ceil(modules / vi.LOOK_MODULES)
state_slice = (len(opt.state) - 1) // vi.LOOK_STATES  # the replaced tensor's parameter is last
seen_at = {}
gone = []
for i in range(module_slices + 2 + state_slice + 2):
    old = weakref.ref(params[1].grad)
    params[1].grad = torch.ones_like(params[1])
    r = refresh(vi.note_step)
    gone.append(old() is None)
    for cat, ranges in r.items():
        for x in ranges:
            seen_at.setdefault((cat, x), []).append(i)
# after the module slices, one for the optimizers' parameters, one that hands over the new
# parameters, then the state slices
check(seen_at.get(("parameters", rng(extra))) == [module_slices + 1],
      "the added parameter: two slices after the last of %d modules" % modules,
      seen_at.get(("parameters", rng(extra))))
check(seen_at.get(("optimizer_state", rng(replaced))) == [module_slices + 2 + state_slice],
      "the replaced state tensor: at its state slice",
      seen_at.get(("optimizer_state", rng(replaced))))
check(all(gone), "no gradient outlives its step in the look", gone)
check(vi._looking is None, "the look ends")
check(vi._api is not None, "no refresh failed")

# A failure inside the calls made at every step stays inside: said once, labelling stops.
def fails(*_):
    raise RuntimeError("broken")


class Broken:
    __contains__ = fails


said = io.StringIO()
sys.stderr, stderr = said, sys.stderr
api = vi._api
for name, broken, call in (("_backwards_taken", fails, lambda: vi.note_step()),
                           ("_autocast", fails,
                            lambda: vi.note_forward(model, (torch.zeros(1),), {})),
                           ("_optimizers", Broken(), lambda: vi.note_optimizer(opt))):
    vi._api, kept = api, getattr(vi, name)
    setattr(vi, name, broken)
    try:
        call()
        call()  # given up: does nothing
        raised = None
    except Exception as e:
        raised = e
    setattr(vi, name, kept)
    check(raised is None and vi._api is None, name + " failing: the program runs on, labels stop",
          raised)
sys.stderr = stderr
lines = said.getvalue().splitlines()
check(len(lines) == 3 and all("identity evidence and the run record stop here (RuntimeError: "
                              "broken)" in line for line in lines),
      "each failure said once", lines)
finish()
