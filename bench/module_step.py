"""The PyTorch training step on the CPU, for the cost of vramtap's PyTorch hooks (run by
scripts/bench plainly and under `vramtap run`, with and without module paths): a transformer-
shaped model of nested modules (6 layers of attention-sized and MLP blocks, about 60 module
calls per step) trained with Adam, small enough that Python and the dispatcher, not arithmetic,
take most of a step (the hooks' share is then at its largest). Prints the best of 7 rounds of 20
steps, in milliseconds of the process's CPU time per step (other tenants of a loaded machine do
not add to it, as they add to wall time).

    module_step.py
"""

import time

import torch

torch.manual_seed(0)
torch.set_num_threads(1)  # one core: the figure should not depend on what else the machine runs
D = 32


class Attn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(D, 3 * D)
        self.out = torch.nn.Linear(D, D)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        a = torch.softmax(q @ k.transpose(-1, -2) / D ** 0.5, dim=-1)
        return x + self.out(a @ v)


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(D, 4 * D)
        self.act = torch.nn.GELU()
        self.down = torch.nn.Linear(4 * D, D)

    def forward(self, x):
        return x + self.down(self.act(self.up(x)))


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(D)
        self.attn = Attn()
        self.mlp = Mlp()

    def forward(self, x):
        return self.mlp(self.attn(self.norm(x)))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([Layer() for _ in range(6)])
        self.head = torch.nn.Linear(D, 10)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x).mean(dim=1)


net = Net()
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
x, y = torch.randn(4, 8, D), torch.randint(0, 10, (4,))
loss_fn = torch.nn.CrossEntropyLoss()


def step():
    opt.zero_grad()
    loss_fn(net(x), y).backward()
    opt.step()


for _ in range(5):
    step()
best = None
for _ in range(7):
    t = time.process_time()
    for _ in range(20):
        step()
    ms = (time.process_time() - t) * 1000 / 20
    best = ms if best is None else min(best, ms)
print("%.3f" % best)
