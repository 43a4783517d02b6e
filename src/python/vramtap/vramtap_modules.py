"""The nn.Module path current at each allocation, for vramtap's bill by module (docs/modules.md).

vramtap_torch's wrapper of ``nn.Module.__call__`` hands the path id ``root`` gives for an outermost
module call to the library, which makes it current in ``cell`` and puts the previous value back
when the call returns. ``cell`` is the library's ``vramtap_module_current``: writing it is cheaper
than a call into the library, and an allocation made where no module call runs on its thread
carries the value it holds then. Paths are
those of ``named_modules()`` of the outermost module (the root), computed once per root; a root
itself is named by its class. Each module named is bound to its path id in the library, by the
module object's address, until it dies.

Calls nested in the root's: where the library reads the allocating thread's Python frames
(``frames``), it takes the module of an allocation from the innermost frame running the wrapper
(its first local, ``self``), and names a module it was not given (kept in a plain list, or made
during the forward) by its class under the module that called it: nested calls pay nothing for
their path. Elsewhere (frames followed call by call: an unknown CPython layout, or Python frames
switched off) the wrapper calls ``enter`` for every nested call, which makes its module current in
``cell`` by the same rules.

Backward: each output that requires grad of a module call that made device memory gets a tensor
hook that makes the module current when its gradient arrives, that is when autograd starts on
that module's part of the graph (a full backward hook would wrap the outputs in a new autograd
node, which changes the graph the program sees). The hook goes in as Tensor.register_hook puts
it, without the removable handle that function makes, which cost more than the rest of the
hook's work (scripts/bench measures a step whose every module output is device memory). A call
that made no device memory (CPU work) gets none. A forward that runs while a backward is
running is a recomputation (activation checkpointing): its ids carry RECOMPUTED.
"""

import ctypes
import os
import weakref

import vramtap_lib

RECOMPUTED = 0x80000000
# The key of our hook in a tensor's hooks: Tensor.register_hook keys the program's by
# RemovableHandle ids, which count up from 0.
_KEY = -1


class _Hooks(dict):
    """A tensor's hooks: a dict that RemovableHandle can refer to weakly, as it does to the
    OrderedDict Tensor.register_hook makes (which costs twice as much to make)."""

    __slots__ = ("__weakref__",)


class Paths:
    def __init__(self, lib, tensor_type):
        self.cell = ctypes.c_uint32.in_dll(lib, "vramtap_module_current")
        self.allocs = ctypes.c_uint32.in_dll(lib, "vramtap_module_allocs")
        self._intern = lib.vramtap_module_path
        self._intern.argtypes = [ctypes.c_char_p]
        self._intern.restype = ctypes.c_uint
        self._backward_cell = ctypes.c_uint32.in_dll(lib, "vramtap_module_backward")
        self._bind = lib.vramtap_module_bind
        self._bind.argtypes = [ctypes.c_void_p, ctypes.c_uint]
        self._bind.restype = ctypes.c_int
        self._unbind = lib.vramtap_module_unbind
        self._unbind.argtypes = [ctypes.c_void_p]
        self._unbind.restype = None
        self._here = lib.vramtap_module_here
        self._here.argtypes = []
        self._here.restype = ctypes.c_uint
        self._watch = lib.vramtap_module_watch
        self._watch.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self._watch.restype = ctypes.c_int
        self.frames = False  # the library reads the module of an allocation from its frames
        try:
            self._make_hook = vramtap_lib.library(ctypes.PyDLL).vramtap_python_module_hook
            self._make_hook.argtypes = [ctypes.c_uint]
            self._make_hook.restype = ctypes.py_object
        except (AttributeError, OSError):
            self._make_hook = None
        self._tensor = tensor_type
        # id(module) -> path id, for as long as the module lives: the weak reference (by the same
        # id) takes its entry out when it dies, before another object can have its address
        self._pids = {}
        self._refs = {}
        self._names = {0: ""}  # path id -> path
        self._enter_backward = {}  # path id -> the hook that makes it current
        self._backwards = 0  # backward calls running, where the library's builtins do not count

    def _path_id(self, path):
        pid = self._intern(path.encode())
        if pid:
            self._names[pid] = path
        return pid

    def watch(self, module_call, backward_call):
        """Gives the library the code of the module-call wrapper and of the backward wrapper;
        from then on, where it reads Python frames, nested calls need not enter."""
        self.frames = self._watch(*(None if code is None else id(code)
                                    for code in (module_call, backward_call))) == 1

    def _keep(self, module, pid):
        key = id(module)
        self._refs[key] = weakref.ref(module, lambda _, key=key: self._forget(key))
        self._pids[key] = pid
        self._bind(key, pid)
        return pid

    def _forget(self, key):
        self._pids.pop(key, None)
        self._refs.pop(key, None)
        self._unbind(key)

    def root(self, module):
        """The path id of an outermost call's module, which the module-call wrapper hands to
        the library's forward_enter to make current (the path of a root is its class)."""
        pid = self._pids.get(id(module))
        if pid is None:
            # The root names every module under it, also those another root named before: the
            # bigger model gives the longer, more telling paths.
            root_name = type(module).__name__
            for name, m in module.named_modules():
                pid_m = self._path_id(name or root_name)
                self._keep(m, pid_m)
            pid = self._pids.get(id(module), 0)
        return pid

    def enter(self, module):
        """The same for a call nested in another module's; returns the value to put back and
        the id made current. Every module call runs it: _make_current is written out here."""
        pid = self._pids.get(id(module))
        if pid is None:
            # Not registered under the root (a module kept in a plain list, or made during the
            # forward): named by its class under the module that called it.
            parent = self._names.get(self.cell.value & ~RECOMPUTED, "")
            name = type(module).__name__
            pid = self._keep(module, self._path_id(parent + "." + name if parent else name))
        if pid and self._backward_cell.value:
            pid |= RECOMPUTED
        cell = self.cell
        prev = cell.value
        cell.value = pid
        return prev, pid

    def make_current(self, pid):
        """Makes path pid current; returns the value to put back. Where the library has no
        builtins: theirs does it for an outermost call."""
        if pid and self._backward_cell.value:
            pid |= RECOMPUTED
        prev = self.cell.value
        self.cell.value = pid
        return prev

    def hook_outputs(self, out, pid):
        """Gives the outputs of a training forward's module call (pid: its path id) the hook
        that makes the module current when its backward starts. An output a nested module
        returned already has its hook: the innermost module is the one that made it. A
        recomputed forward gets them too: the backward of its graph follows at once."""
        pid &= ~RECOMPUTED
        if not pid:
            return
        hook = self._enter_backward.get(pid) or self._backward_hook(pid)
        if isinstance(out, self._tensor):
            _hook(out, hook)
            return
        if isinstance(out, dict):
            out = out.values()
        elif not isinstance(out, (tuple, list)):
            return
        for t in out:
            if isinstance(t, self._tensor):
                _hook(t, hook)

    def hook_module_outputs(self, module, out):
        """hook_outputs for a nested call whose module the library reads from its frame."""
        pid = self._pids.get(id(module))
        self.hook_outputs(out, self._here() if pid is None else pid)

    def _backward_hook(self, pid):
        """The tensor hook that makes path pid current: a builtin of the library (it costs no
        frame), or a Python function with an older library."""
        try:
            hook = self._make_hook(pid)
        except (TypeError, ValueError):  # an older library, or no CPython API
            cell = self.cell

            def hook(_grads):
                cell.value = pid

        self._enter_backward[pid] = hook
        return hook

    def backward_begins(self):
        """Where the library's builtins do not: counts a backward call for the recomputations
        under it, and makes no module current; returns the value to put back."""
        self._backwards += 1
        self._backward_cell.value = self._backwards
        prev = self.cell.value
        self.cell.value = 0
        return prev

    def backward_ends(self, prev):
        self._backwards -= 1
        self._backward_cell.value = self._backwards
        self.cell.value = prev


def _hook(t, hook):
    """What Tensor.register_hook does, without the handle it makes (a third of a module call's
    cost here); register_hook where PyTorch's internals differ. A tensor with hooks already has
    ours (or the program's: its backward then keeps the path before)."""
    if t._backward_hooks is not None:
        return
    node = t.grad_fn  # None: no backward (no grad, or a leaf)
    if node is None:
        return
    try:
        hooks = _Hooks()
        hooks[_KEY] = hook
        t._backward_hooks = hooks
        node._register_hook_dict(t)
    except (AttributeError, TypeError, RuntimeError):
        try:
            t._backward_hooks = None
            t.register_hook(hook)
        except (AttributeError, TypeError, RuntimeError):  # takes no hook
            pass


def make(lib, torch):
    """A Paths for this process, or None: switched off (VRAMTAP_MODULES=0), or a library
    without module paths."""
    if lib is None or os.environ.get("VRAMTAP_MODULES", "1") == "0":
        return None
    try:
        return Paths(lib, torch.Tensor)
    except (ValueError, AttributeError):  # in_dll raises ValueError for a missing symbol
        return None
