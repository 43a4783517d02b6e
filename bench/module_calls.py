"""Module calls for callgrind, under `vramtap run` (bench/instructions.sh): after 200 calls of
warm-up, N calls of one nn.Identity (an outermost call) or of an nn.Sequential of 10 of them (one
outermost call and 10 nested), with vramtap's module-call wrapper or with the function it wraps.
Two runs of different N give the instructions of a call, and with and without the wrapper, what
the wrapper adds.

    module_calls.py N on|off outer|nested
"""

import sys

import torch

n, on, kind = int(sys.argv[1]), sys.argv[2] == "on", sys.argv[3]
hooked = torch.nn.Module.__call__
if not hasattr(hooked, "__wrapped__"):
    sys.exit("module_calls.py: vramtap's module-call wrapper is not installed")
if not on:
    torch.nn.Module.__call__ = hooked.__wrapped__
if kind == "outer":
    module = torch.nn.Identity()
else:
    module = torch.nn.Sequential(*[torch.nn.Identity() for _ in range(10)])
x = torch.zeros(1)
for _ in range(200):
    module(x)
for _ in range(n):
    module(x)
