"""Allocations whose Python frames check.py compares with traceback.extract_stack().

usage: frames.py        (VRAMTAP_OUT and VT_STANDIN_DIR in the environment, under LD_PRELOAD;
                         VT_CUDART, when set, is the CUDA runtime to allocate through instead of
                         the stand-in's: scripts/gpu-validate runs this on a GPU machine's Python)

Every allocation has a size of its own. On the line of the cudaMalloc call itself, alloc()
takes traceback.extract_stack() and the qualified names of the same frames, so the line of every
frame is the line the allocation happened on. expect.json in VRAMTAP_OUT holds, per size, the
frames innermost first as [file, line, name, qualified name], the mechanism
vramtap_python_install answered, how many code objects made by exec were freed and their
address given to a new one, and the interpreter's version.
"""

import asyncio
import ctypes
import functools
import gc
import json
import os
import sys
import threading
import traceback

malloc = ctypes.CDLL(os.environ.get("VT_CUDART") or
                     os.path.join(os.environ["VT_STANDIN_DIR"], "libcudart.so.13")).cudaMalloc
ref = ctypes.byref
out = {"mechanism": ctypes.PyDLL(None).vramtap_python_install(), "allocs": {}, "errors": [],
       "reused": 0, "version": list(sys.version_info[:2])}
sizes = iter(range(20000, 30000))


def qualnames():
    f, names = sys._getframe(1), []
    while f:
        names.append(getattr(f.f_code, "co_qualname", f.f_code.co_name))
        f = f.f_back
    return names


def alloc():
    size, ptr = next(sizes), ctypes.c_void_p()
    stack, names = traceback.extract_stack(), qualnames(); rc = malloc(ref(ptr), size)  # noqa
    if rc != 0:
        out["errors"].append("cudaMalloc(%d) failed: %d" % (size, rc))
    stack.reverse()
    if len(stack) != len(names):
        out["errors"].append("%d: extract_stack has %d frames, sys._getframe %d" %
                             (size, len(stack), len(names)))
    out["allocs"][str(size)] = [[s.filename, s.lineno, s.name, q] for s, q in zip(stack, names)]


def nested_inner():
    alloc()


def nested():
    nested_inner()


def gen():
    yield alloc()
    yield alloc()


async def coro_leaf():
    alloc()


async def coro():
    await coro_leaf()
    await asyncio.sleep(0)
    alloc()


def partial_target(a, b):
    alloc()


class Holder:
    def method(self):
        alloc()

    @staticmethod
    def static():
        alloc()

    @property
    def prop(self):
        alloc()


def closure():
    def inner():
        alloc()
    return inner


def größe():
    alloc()


def 名前():
    alloc()


def 𠀀():
    alloc()


# The same function, compiled and freed again and again under other file names and lines: a
# new code object often lands at a dead one's address.
def exec_and_free(k, seen):
    code = compile("\n" * k + "def made():\n    alloc()\n", "<exec %d>" % k, "exec")
    ns = {"alloc": alloc}
    exec(code, ns)
    made = ns["made"]
    ident = id(made.__code__)
    out["reused"] += ident in seen
    seen.add(ident)
    made()
    del code, ns, made
    gc.collect()


def main():
    nested()
    list(gen())
    g = gen()
    next(g)
    c = coro_leaf()
    try:
        c.send(None)
    except StopIteration:
        pass
    asyncio.run(coro())
    functools.partial(partial_target, 1)(2)
    sorted([2, 1], key=lambda x: (alloc(), x))
    list(map(functools.partial(partial_target, 1), [0]))
    h = Holder()
    h.method()
    Holder.static()
    h.prop
    closure()()
    größe()
    名前()
    𠀀()
    try:
        raise ValueError("an allocation while an exception is handled")
    except ValueError:
        alloc()
    t = threading.Thread(target=nested)
    t.start()
    t.join()
    seen = set()
    for k in range(40):
        exec_and_free(k, seen)

    class Body:
        alloc()

    with open(os.path.join(os.environ["VRAMTAP_OUT"], "expect.json"), "w") as f:
        json.dump(out, f)


main()
