"""Scenarios of the Python frames tests; check.py runs one per process under LD_PRELOAD.

usage: cases.py CASE   (VRAMTAP_OUT, VT_STANDIN_DIR and PYSTACK_HELPER in the environment)

Each scenario allocates through the stand-in runtime with ctypes, as a Python program would, one
size per allocation, and writes expect.json to VRAMTAP_OUT: for each size the Python frames the
snapshot must show, innermost first, as [function, line] in this file ([] for none), and whether
that list is the whole stack or its innermost part. Lines are found by their `# @mark`.
"""

import ctypes
import json
import os
import sys
import threading

HERE = os.path.abspath(__file__)
cudart = ctypes.CDLL(os.path.join(os.environ["VT_STANDIN_DIR"], "libcudart.so.13"))
expect = {"allocs": {}, "errors": []}


def line_of(mark):
    with open(HERE) as f:
        for n, text in enumerate(f, 1):
            if text.rstrip().endswith("# @" + mark):
                return n
    raise KeyError(mark)


def frames(*spec):
    """(function, mark) pairs, innermost first."""
    return [[fn, line_of(mark)] for fn, mark in spec]


def want(size, expected, whole=True):
    expect["allocs"][str(size)] = {"frames": expected, "whole": whole}


def install():
    return ctypes.PyDLL(None).vramtap_python_install()


def allocate(size):
    ptr = ctypes.c_void_p()
    rc = len("a C call one line above the allocation")
    rc = cudart.cudaMalloc(ctypes.byref(ptr), size)  # @allocate
    if rc != 0:
        raise SystemExit("cudaMalloc(%d) failed: %d" % (size, rc))


def inner(size):
    allocate(size)  # @inner


def middle(size):
    len("a C call one line above the next Python call")
    inner(size)  # @middle


def outer(size):
    middle(size)  # @outer


CHAIN = (("allocate", "allocate"), ("inner", "inner"), ("middle", "middle"), ("outer", "outer"))
MAIN = (("main", "main"), ("<module>", "module"))


def raiser(depth):
    if depth:
        raiser(depth - 1)
    raise ValueError("unwinds four frames")


def producer(size):
    yield allocate(size)  # @producer


def producer_many(size, n):
    for k in range(n):
        yield allocate(size + k)  # @producer_many


def method(cls, name):
    return "%s.%s" % (cls, name) if sys.version_info >= (3, 11) else name


class Holder:
    @property
    def buffer(self):
        allocate(1003)  # @property

    def __enter__(self):
        allocate(1005)  # @enter
        return self

    def __exit__(self, *exc):
        return False


def key(size):
    allocate(size)  # @key
    return size


def case_nested():
    outer(1000)  # @nested_a
    want(1000, frames(*CHAIN, ("case_nested", "nested_a"), *MAIN))
    try:
        raiser(3)
    except ValueError:
        allocate(1001)  # @nested_b
    want(1001, frames(("allocate", "allocate"), ("case_nested", "nested_b"), *MAIN))
    for _ in producer(1002):  # @nested_c
        pass
    want(1002, frames(("allocate", "allocate"), ("producer", "producer"),
                      ("case_nested", "nested_c"), *MAIN))
    # Callees that start without a call on their caller's line, after the caller moved on.
    holder = Holder()
    len("a C call one line above the property")
    holder.buffer  # @nested_d
    want(1003, frames(("allocate", "allocate"), (method("Holder", "buffer"), "property"),
                      ("case_nested", "nested_d"), *MAIN))
    spread = (1004,)
    len("a C call one line above f(*args)")
    inner(*spread)  # @nested_e
    want(1004, frames(("allocate", "allocate"), ("inner", "inner"), ("case_nested", "nested_e"),
                      *MAIN))
    len("a C call one line above the with statement")
    with holder:  # @nested_f
        pass
    want(1005, frames(("allocate", "allocate"), (method("Holder", "__enter__"), "enter"),
                      ("case_nested", "nested_f"), *MAIN))
    sorted([1006, 1007], key=key)  # @nested_g
    for size in (1006, 1007):
        want(size, frames(("allocate", "allocate"), ("key", "key"), ("case_nested", "nested_g"),
                          *MAIN))
    for _ in producer_many(1010, 2):  # @nested_h
        len("a C call in the loop body, below the for")
    for size in (1010, 1011):
        want(size, frames(("allocate", "allocate"), ("producer_many", "producer_many"),
                          ("case_nested", "nested_h"), *MAIN))


def thread_body(size):
    outer(size)  # @thread_body


def case_thread():
    t = threading.Thread(target=thread_body, args=(2000,))
    t.start()
    t.join()
    # Below thread_body come threading's own frames, which differ between versions.
    want(2000, frames(*CHAIN, ("thread_body", "thread_body")), whole=False)


def waiting_body(go, size):
    go.wait()
    outer(size)  # @waiting_body


EARLY = {}


def case_thread_before_install():
    """A thread already running Python when vramtap installs (check.py runs it with -S so that
    no bootstrap installs first)."""
    thread, go = EARLY["thread"]
    go.set()
    thread.join()
    want(2100, frames(*CHAIN, ("waiting_body", "waiting_body")), whole=False)


def case_native_thread():
    helper = ctypes.CDLL(os.environ["PYSTACK_HELPER"])
    helper.pystack_alloc_on_native_thread.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    rc = helper.pystack_alloc_on_native_thread(ctypes.cast(cudart.cudaMalloc, ctypes.c_void_p),
                                               3000)
    if rc != 0:
        expect["errors"].append("cudaMalloc on the native thread failed: %d" % rc)
    want(3000, [])
    outer(3001)  # @native_after
    want(3001, frames(*CHAIN, ("case_native_thread", "native_after"), *MAIN))


def displace_profile():
    sys.setprofile(lambda frame, event, arg: None)


def case_setprofile(mech):
    """Frames read from the interpreter (mechanism 3) do not depend on the profile function."""
    displace_profile()
    outer(4000)  # @setprofile_a
    sys.setprofile(None)
    outer(4001)  # @setprofile_b
    # sys.monitoring keeps its events beside a profile function; a displaced profile function
    # must give no frames rather than the stale ones of displace_profile.
    for size, mark in ((4000, "setprofile_a"), (4001, "setprofile_b")):
        want(size, frames(*CHAIN, ("case_setprofile", mark), *MAIN) if mech in (1, 3) else [])
    if install() != mech:
        expect["errors"].append("a second install changed the mechanism")
    outer(4002)  # @setprofile_c
    want(4002, frames(*CHAIN, ("case_setprofile", "setprofile_c"), *MAIN))


def start_profiler(prof):
    prof.enable()


def case_cprofile(mech):
    import cProfile
    prof = cProfile.Profile()
    start_profiler(prof)
    outer(5000)  # @cprofile_a
    prof.disable()
    outer(5001)  # @cprofile_b
    for size, mark in ((5000, "cprofile_a"), (5001, "cprofile_b")):
        want(size, frames(*CHAIN, ("case_cprofile", mark), *MAIN) if mech in (1, 3) else [])


def case_monitoring_taken(mech):
    """Run with every sys.monitoring tool id vramtap could use already taken (3.12+)."""
    if hasattr(sys, "monitoring") and mech == 1:
        expect["errors"].append("with no tool id free the mechanism is sys.monitoring")
    outer(6000)  # @taken_a
    want(6000, frames(*CHAIN, ("case_monitoring_taken", "taken_a"), *MAIN))
    t = threading.Thread(target=thread_body, args=(6001,))
    t.start()
    t.join()
    want(6001, frames(*CHAIN, ("thread_body", "thread_body")), whole=False)


def case_monitoring_displaced(mech):
    """Another tool switching vramtap's sys.monitoring events off (3.12+)."""
    outer(7000)  # @displaced_a
    want(7000, frames(*CHAIN, ("case_monitoring_displaced", "displaced_a"), *MAIN))
    if mech == 1:
        tool = [i for i in range(6) if sys.monitoring.get_tool(i) == "vramtap"]
        sys.monitoring.set_events(tool[0], 0)
        outer(7001)
        want(7001, [])


def recurse(n, size):
    if n == 0:
        allocate(size)
        return
    recurse(n - 1, size)  # @recurse


def case_deep():
    recurse(400, 8000)  # @deep
    # 405 frames deep: the outermost 256 are kept.
    want(8000, frames(*(("recurse", "recurse"),) * 253, ("case_deep", "deep"), *MAIN))
    outer(8001)  # @deep_after
    want(8001, frames(*CHAIN, ("case_deep", "deep_after"), *MAIN))


def case_off():
    mech = install()
    if mech != 0:
        expect["errors"].append("install answered %d with VRAMTAP_PYTHON_STACKS=0" % mech)
    outer(9000)
    want(9000, [])


def main():
    case = sys.argv[1]
    if case == "monitoring_taken" and hasattr(sys, "monitoring"):
        for i in (3, 4, 5):
            if sys.monitoring.get_tool(i) is None:
                sys.monitoring.use_tool_id(i, "test")
    if case == "thread_before_install":
        go = threading.Event()
        EARLY["thread"] = (threading.Thread(target=waiting_body, args=(go, 2100)), go)
        EARLY["thread"][0].start()
    fn = globals()["case_" + case]
    args = ()
    if case != "off":
        mech = expect["mechanism"] = install()
        if mech not in (1, 2, 3):
            expect["errors"].append("install answered %d" % mech)
        if fn.__code__.co_argcount:
            args = (mech,)
    fn(*args)  # @main
    with open(os.path.join(os.environ["VRAMTAP_OUT"], "expect.json"), "w") as f:
        json.dump(expect, f)


main()  # @module
