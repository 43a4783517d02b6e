"""vramtap's PyTorch phase hooks and its small Python API.

Under vramtap (``vramtap run`` or ``LD_PRELOAD=libvramtap.so``) the bootstrap ``sitecustomize``
calls ``install()`` as soon as ``torch`` has been imported, so an unmodified training script gets
its ``forward``, ``backward`` and ``optimizer`` phases and its steps (docs/python.md). A script can
also mark phases itself::

    import vramtap_torch
    with vramtap_torch.phase("forward"):
        ...
    vramtap_torch.step()

Every function here does nothing when libvramtap.so is not loaded in the process.
"""

import contextlib
import ctypes
import functools
import importlib
import os
import re
import sys
import threading
import types

import vramtap_identity
import vramtap_lib
import vramtap_modules

__all__ = ["loaded", "phase", "step", "install"]


def _load_api():
    lib = vramtap_lib.library()
    if lib is None:
        return None
    try:
        is_loaded = lib.vramtap_is_loaded
        begin = lib.vramtap_phase_begin
        end = lib.vramtap_phase_end
        mark = lib.vramtap_step_mark
    except (OSError, AttributeError):
        return None
    # An older library has no vramtap_note_oom: out-of-memory errors then go unrecorded here.
    note_oom = getattr(lib, "vramtap_note_oom", None)
    for fn, args in ((is_loaded, []), (begin, [ctypes.c_char_p]), (end, [ctypes.c_char_p]),
                     (mark, []), (note_oom, [ctypes.c_ulonglong, ctypes.c_int])):
        if fn is not None:
            fn.argtypes = args
            fn.restype = ctypes.c_int
    if not is_loaded():
        return None
    # The same three as builtins of the library, which cost a tenth of a ctypes call. Tests
    # withhold them (VRAMTAP_TEST_NO_BUILTINS) to run the hooks as with an older library.
    try:
        if os.environ.get("VRAMTAP_TEST_NO_BUILTINS", "0") != "0":
            raise AttributeError("withheld")
        make = vramtap_lib.library(ctypes.PyDLL).vramtap_python_calls
        make.argtypes = []
        make.restype = ctypes.py_object
        calls = make()
        begin, end, mark = (calls[name] for name in ("vramtap_phase_begin", "vramtap_phase_end",
                                                      "vramtap_step_mark"))
        enter, leave, nested = (calls.get(name) for name in ("vramtap_forward_enter",
                                                              "vramtap_forward_exit",
                                                              "vramtap_module_nested"))
        backward = tuple(calls.get(name) for name in ("vramtap_backward_enter",
                                                      "vramtap_backward_exit",
                                                      "vramtap_backward_running",
                                                      "vramtap_backwards_taken"))
    except (AttributeError, ValueError, KeyError, TypeError):  # an older library, no CPython API
        enter = leave = nested = None
        backward = (None,) * 4
    # All or none: they keep a thread-local and counts between them, and a library without the
    # backward ones is older than these hooks (its forward_enter takes no path id).
    if None in (enter, leave, nested) + backward:
        enter = leave = nested = None
        backward = (None,) * 4
    return (begin, end, mark, note_oom, enter, leave, nested) + backward


_api = _load_api()
_EUNKNOWN = -1

_lock = threading.Lock()
# Outermost module calls running now, all threads together, where the library has no builtins
# that count them: a call made while another thread's outermost call runs (DataParallel
# replicas) is part of that one.
_outer_calls = 0
# While False, each outermost module call ends a step (inference has no optimizer to count).
# Constructing an optimizer or calling step() hands the counting over.
_steps_counted_elsewhere = False
# Optimizer phases opened by torch's global step pre-hook and not yet closed by the post-hook:
# (thread id, code of the frame that ran the hook). A step() that raises never runs the
# post-hook, so the next phase to begin checks whether that frame is still on its thread. Read
# and changed without a lock: a list's copy, append and remove are each atomic (under the GIL, or
# the list's own lock in a free-threaded build), and a lock taken twice a step cost more than
# the hooks' other work inside a training step.
_open_steps = []
_installed = False
# The current nn.Module path (vramtap_modules.Paths), None when off.
_paths = None
# The module-call wrapper and the backward wrapper, once installed.
_wrappers = [None, None]


class _Local(threading.local):
    inside_module_call = False
    root_prev = None  # the path an outermost call's put back, where the library has no builtins


_tls = _Local()


def _begin(name):
    if _open_steps:
        _close_abandoned_steps()
    return _api[0](name)


def _end(name):
    return _api[1](name)


# "Tried to allocate 2.00 GiB ... GPU 1" after a failed CUDA call; "Allocation on device 0 would
# exceed allowed memory ... Requested : 1024.00 MiB" where PyTorch 2.x refuses a request against
# its per-process memory fraction.
_OOM_SIZE = re.compile(r"(?:Tried to allocate|Requested\s*:)\s*([0-9.]+) (bytes|B|KiB|MiB|GiB|TiB)")
_OOM_DEVICE = re.compile(r"GPU (\d+)|on device (\d+)")
_UNITS = {"bytes": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def _note_oom(error):
    """PyTorch can raise OutOfMemoryError with no failed CUDA call (its per-process memory
    fraction is checked against its own count): tell the library, which writes the post-mortem
    it would write for a failed call, and skips it when it saw the failure itself. The message
    gives the size asked and the device (_OOM_SIZE, _OOM_DEVICE)."""
    torch = sys.modules.get("torch")
    oom_type = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)
    if _api[3] is None or oom_type is None or not isinstance(error, oom_type):
        return
    if getattr(error, "_vramtap_noted", False):
        return
    try:
        error._vramtap_noted = True
    except AttributeError:  # cannot mark it: every enclosing wrapper would record it again
        return
    text = str(error)
    size = _OOM_SIZE.search(text)
    device = _OOM_DEVICE.search(text)
    if size is None:
        return
    nbytes = int(float(size.group(1)) * _UNITS[size.group(2)])
    if device is not None:
        index = int(device.group(1) or device.group(2))
    else:
        try:
            index = torch.cuda.current_device()
        except Exception:  # no CUDA in this build: the device of the message is all there is
            index = 0
    _api[3](nbytes, index)


def _close_abandoned_steps():
    frames = sys._current_frames()
    for entry in reversed(_open_steps[:]):
        thread, code = entry
        frame = frames.get(thread)
        while frame is not None and frame.f_code is not code:
            frame = frame.f_back
        if frame is None:
            try:
                _open_steps.remove(entry)
            except ValueError:  # another thread closed it meanwhile
                continue
            _end(b"optimizer")


def loaded():
    """True when libvramtap.so is loaded and recording."""
    return _api is not None


@contextlib.contextmanager
def phase(name):
    """Mark a phase: ``with phase("forward"): ...`` (also usable as a decorator).

    ``name`` is ``forward``, ``backward``, ``optimizer`` or an alias from ``VRAMTAP_PHASES``.
    Leaving an ``optimizer`` phase completes a step. A phase begun inside another one belongs
    to the outer one.
    """
    if _api is None:
        yield
        return
    encoded = str(name).encode()
    if _begin(encoded) == _EUNKNOWN:
        sys.stderr.write("vramtap: unknown phase %r (expected forward, backward, optimizer or a "
                         "VRAMTAP_PHASES alias); not marked\n" % (name,))
        yield
        return
    try:
        yield
    finally:
        _end(encoded)


def step():
    """Advance the step counter by one, for loops without an optimizer. From the first call on,
    the hooks no longer count a step per top-level module call."""
    global _steps_counted_elsewhere
    _steps_counted_elsewhere = True
    if _api is not None:
        _api[2]()


def _version(torch):
    match = re.match(r"(\d+)\.(\d+)", torch.__version__)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def _compiling_probe(torch):
    """A function telling whether torch.compile is tracing, or None where there is none."""
    # Code that torch.compile traces must not call into ctypes: it would break the graph. Only
    # these probes are cheap flags that the compiler folds; torch.compiler.is_compiling before
    # 2.3 imports torch._dynamo on its first call.
    if _version(torch) >= (2, 3):
        return torch.compiler.is_compiling
    return getattr(getattr(torch, "_utils", None), "is_compiling", None)


def _install_forward(torch, compiling):
    # A wrapper rather than global module hooks: its finally runs on any exception (hooks'
    # always_call covers only Exception, and only from torch 2.1), it keeps PyTorch's fast path
    # for hook-free modules, and torch.compile(module) warns about global hooks.
    is_grad_enabled = torch.is_grad_enabled
    call = torch.nn.Module.__call__
    enter = _api[4] or _outermost_begin
    leave = _api[5] or _outermost_end
    # nested(): None outside an outermost module call on this thread, else the library's count
    # of device allocations, which tells whether a call made device memory
    nested = _api[6] or _nested
    paths = _paths
    cell = paths.cell if paths else None

    @functools.wraps(call)
    def __call__(self, *args, **kwargs):
        # The compiler must not trace the call into the library: ask it first.
        if compiling and compiling():
            return call(self, *args, **kwargs)
        made = nested()
        if made is not None:
            if paths is None:
                return call(self, *args, **kwargs)
            if paths.frames:
                # the library reads the module of an allocation from this frame's `self`
                out = call(self, *args, **kwargs)
                if nested() != made and is_grad_enabled():
                    paths.hook_module_outputs(self, out)
                return out
            prev, pid = paths.enter(self)
            try:
                out = call(self, *args, **kwargs)
            finally:
                cell.value = prev
            if nested() != made and is_grad_enabled():
                paths.hook_outputs(out, pid)
            return out
        grad = is_grad_enabled()
        if _open_steps:
            _close_abandoned_steps()
        # the library makes the root's path current, and puts back the one before at leave()
        opened = enter(grad, paths.root(self) if paths else None)
        if opened:
            vramtap_identity.note_forward(self, args, kwargs)
        made = nested() if paths else 0
        try:
            out = call(self, *args, **kwargs)
            if paths and grad and nested() != made:
                paths.hook_outputs(out, cell.value)
            return out
        except BaseException as e:
            _note_oom(e)
            raise
        finally:
            leave(opened)
            if opened is not None and not _steps_counted_elsewhere:
                _api[2]()

    torch.nn.Module.__call__ = __call__
    _wrappers[0] = __call__


def _nested():
    """The library's vramtap_module_nested, in Python."""
    if not _tls.inside_module_call:
        return None
    return _paths.allocs.value if _paths else 0


def _outermost_begin(grad_enabled, pid):
    """The library's vramtap_forward_enter, in Python: None for a call nested in another
    thread's, else whether it opened a forward. Makes path pid current (None: paths off)."""
    global _outer_calls
    _tls.inside_module_call = True
    if pid is not None:
        _tls.root_prev = _paths.make_current(pid)
    with _lock:
        _outer_calls += 1
        first = _outer_calls == 1
    if not first:
        return None
    # Under no_grad or inference_mode a module call builds nothing for backward: evaluation,
    # not a training forward.
    return grad_enabled and _begin(b"forward") != _EUNKNOWN


def _outermost_end(opened):
    """The library's vramtap_forward_exit, in Python."""
    global _outer_calls
    _tls.inside_module_call = False
    prev = _tls.root_prev
    if prev is not None:
        _tls.root_prev = None
        _paths.cell.value = prev
    with _lock:
        _outer_calls -= 1
    if opened:
        _end(b"forward")


def _install_backward(torch, compiling):
    # Tensor.backward looks torch.autograd.backward up at each call, so it is covered too.
    autograd = torch.autograd
    # The library's builtins count backward calls with atomics; the Python fallback counts them
    # under a lock, which inside a training step cost more than the rest of the call's work.
    enter, leave = _api[7], _api[8]
    if enter is None:
        enter, leave = _backward_enter, _backward_exit
    else:
        vramtap_identity.count_backwards(_api[9], _api[10])
    on = _paths is not None

    def wrap(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if compiling and compiling():
                return fn(*args, **kwargs)
            if _open_steps:
                _close_abandoned_steps()
            # backward calls nest (the backward of a checkpointed segment): each wrapper's frame
            # keeps the module path it puts back
            prev = enter(on)
            try:
                return fn(*args, **kwargs)
            except BaseException as e:
                _note_oom(e)
                raise
            finally:
                leave(on, prev)

        return wrapper

    autograd.backward = wrap(autograd.backward)
    _wrappers[1] = autograd.backward
    autograd.grad = wrap(autograd.grad)


def _backward_enter(paths_on):
    """The library's vramtap_backward_enter, in Python."""
    vramtap_identity.note_backward(1)
    prev = _paths.backward_begins() if paths_on else 0
    _begin(b"backward")
    return prev


def _backward_exit(paths_on, prev):
    """The library's vramtap_backward_exit, in Python."""
    _end(b"backward")
    vramtap_identity.note_backward(-1)
    if paths_on:
        _paths.backward_ends(prev)


def _install_checkpoint(torch, compiling):
    # Only to tell the run record that activation checkpointing is used.
    checkpoint = importlib.import_module("torch.utils.checkpoint")
    for name in ("checkpoint", "checkpoint_sequential"):
        fn = getattr(checkpoint, name, None)
        if fn is None:
            continue

        def wrapper(*args, _fn=fn, **kwargs):
            if not (compiling and compiling()):
                vramtap_identity.note_checkpoint()
            return _fn(*args, **kwargs)

        setattr(checkpoint, name, functools.wraps(fn)(wrapper))


def _install_optimizer(torch, compiling):
    # torch.optim deletes its submodule names from its namespace.
    optim = importlib.import_module("torch.optim.optimizer")
    Optimizer = optim.Optimizer
    init = Optimizer.__init__

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        global _steps_counted_elsewhere
        _steps_counted_elsewhere = True
        init(self, *args, **kwargs)
        vramtap_identity.note_optimizer(self)

    Optimizer.__init__ = __init__
    if hasattr(optim, "register_optimizer_step_pre_hook"):
        optim.register_optimizer_step_pre_hook(functools.partial(_step_pre_hook, compiling))
        optim.register_optimizer_step_post_hook(functools.partial(_step_post_hook, compiling))
    else:
        _wrap_optimizer_classes(Optimizer)


def _step_pre_hook(compiling, optimizer, args, kwargs):
    if compiling and compiling():
        return
    _begin(b"optimizer")
    # The caller is torch's step wrapper, on the stack for as long as the step runs.
    _open_steps.append((threading.get_ident(), sys._getframe(1).f_code))


def _step_post_hook(compiling, optimizer, args, kwargs):
    if compiling and compiling():
        return
    thread = threading.get_ident()
    for entry in reversed(_open_steps[:]):
        if entry[0] == thread:
            try:
                _open_steps.remove(entry)  # an equal entry, if any, is this thread's too
            except ValueError:  # gone meanwhile: the phase is ended below all the same
                pass
            break
    _end(b"optimizer")
    vramtap_identity.note_optimizer(optimizer)  # one made before the hooks were installed
    vramtap_identity.note_step()


def _wrap_optimizer_classes(Optimizer):
    # Before torch 2.0 there is no global step hook: wrap the step() of every Optimizer class,
    # those that exist now and, through __init_subclass__, those defined later.
    def wrap(cls):
        step = cls.__dict__.get("step")
        if not isinstance(step, types.FunctionType) or getattr(step, "_vramtap", False):
            return

        @functools.wraps(step)
        def wrapped(*args, **kwargs):
            _begin(b"optimizer")
            try:
                out = step(*args, **kwargs)
            except BaseException as e:
                _note_oom(e)
                raise
            finally:
                _end(b"optimizer")
            vramtap_identity.note_step()
            return out

        wrapped._vramtap = True
        cls.step = wrapped

    pending = [Optimizer]
    while pending:
        cls = pending.pop()
        wrap(cls)
        pending.extend(cls.__subclasses__())

    previous = Optimizer.__dict__.get("__init_subclass__")

    def __init_subclass__(cls, **kwargs):
        if previous is not None:
            previous.__get__(None, cls)(**kwargs)
        else:
            super(Optimizer, cls).__init_subclass__(**kwargs)
        wrap(cls)

    Optimizer.__init_subclass__ = classmethod(__init_subclass__)


def _check_allocator_settings(torch, env_at_start):
    # PyTorch reads these while `import torch` loads its CUDA allocator. vramtap chose the mode
    # (and recorded it) before the program ran: a program that set them itself before importing
    # torch has overridden that choice.
    changed = [("%s=%s" % (name, os.environ[name]) if name in os.environ else "unset " + name)
               + " (was %s)" % env_at_start.get(name, "unset")
               for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
               if os.environ.get(name) != env_at_start.get(name)]
    if not changed:
        return
    try:
        backend = torch.cuda.get_allocator_backend()
    except Exception:  # before torch 2.0, or a build without CUDA: cannot tell
        backend = None
    outcome = {
        "native": ": PyTorch keeps its caching allocator, so vramtap sees its segments, not "
                  "tensors",
        "cudaMallocAsync": ": PyTorch allocates per tensor (tensor mode)",
    }.get(backend, "")
    if backend is None:
        conf = os.environ.get("PYTORCH_ALLOC_CONF", os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""))
        backend = "cudaMallocAsync" if "backend:cudaMallocAsync" in conf else "native"
    sys.stderr.write("vramtap: the program set %s before importing torch%s; the snapshot "
                     "records that (modes.pytorch: program-setting)\n"
                     % (", ".join(changed), outcome))
    try:
        note = vramtap_lib.library().vramtap_note_mode
        note.argtypes = [ctypes.c_char_p] * 3
        note.restype = ctypes.c_int
        note(b"pytorch", b"tensor" if backend == "cudaMallocAsync" else b"native",
             b"program-setting")
    except (OSError, AttributeError):  # an older libvramtap.so: the line above must do
        pass


def install(env_at_start=None):
    """Install the PyTorch hooks (the bootstrap does it once torch is imported; later calls
    and calls without vramtap do nothing). `env_at_start`, the environment as the interpreter
    started, lets it tell whether the program changed PyTorch's allocator settings itself."""
    global _installed
    if _installed or _api is None:
        return
    _installed = True
    import torch

    if env_at_start is not None:
        _check_allocator_settings(torch, env_at_start)
    compiling = _compiling_probe(torch)
    global _paths
    _paths = vramtap_modules.make(vramtap_lib.library(), torch)
    failed = []
    vramtap_identity.install(torch)
    for what, fn in (("forward", _install_forward), ("backward", _install_backward),
                     ("optimizer", _install_optimizer), ("checkpoint", _install_checkpoint)):
        try:
            fn(torch, compiling)
        except Exception as e:  # any failure: say so once, the program runs on
            failed.append("%s (%s: %s)" % (what, type(e).__name__, e))
    if failed:
        sys.stderr.write("vramtap: could not hook PyTorch %s for: %s; those phases come only "
                         "from NVTX and the C API\n" % (torch.__version__, ", ".join(failed)))
    frames_started()


def frames_started():
    """Once the library reads Python frames (at start, or in a child once CUDA starts), it
    finds the module of each allocation from the wrapper's frames: nested calls stop entering."""
    forward, backward = _wrappers
    if _paths is not None and forward is not None:
        _paths.watch(forward.__code__, backward.__code__ if backward else None)
