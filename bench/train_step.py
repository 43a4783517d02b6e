"""A PyTorch CPU training step, as scripts/bench times it with and without vramtap: a small MLP
(two hidden layers of 128, batch 32) with Adam, small enough that the step's Python and dispatch
dominate (Debian's torch has a generic BLAS). Prints the step's least CPU time (of the process,
which other tenants of a loaded machine do not add to) in microseconds.

usage: train_step.py [STEPS]        (default 200, after 30 steps of warm-up)

The step touches no GPU: what vramtap adds here is what it costs a Python program's calls (the
Python frames, the PyTorch phase hooks), not its allocation hooks.
"""

import sys
import time

import torch

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


steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
for _ in range(30):
    step()
best = float("inf")
for _ in range(steps):
    t = time.process_time()
    step()
    best = min(best, time.process_time() - t)
print("%.1f" % (best * 1e6))
