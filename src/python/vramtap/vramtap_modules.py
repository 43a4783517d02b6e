"""The nn.Module path current at each allocation, for vramtap's bill by module (docs/modules.md).

vramtap_torch's wrapper of ``nn.Module.__call__`` calls ``enter_root`` for an outermost module
call and ``enter`` for every call nested in one, and puts the returned previous value back in
``cell`` when the call returns. ``cell`` is the library's ``vramtap_module_current``: writing it
is cheaper than a call into the library, and each allocation the library records carries the
value it holds then. Paths are those of ``named_modules()`` of the outermost module (the root),
computed once per root; a root itself is named by its class.

Backward: each output that requires grad of a module call that made device memory gets a tensor
hook that makes the module current when its gradient arrives, that is when autograd starts on
that module's part of the graph (a full backward hook would wrap the outputs in a new autograd
node, which changes the graph the program sees). A call that made no device memory (CPU work)
gets none: a hook costs about what a small tensor operation does. A forward that runs while a backward is running is a recomputation (activation
checkpointing): its ids carry RECOMPUTED.
"""

import ctypes
import os
import weakref

RECOMPUTED = 0x80000000


class Paths:
    def __init__(self, lib, tensor_type):
        self.cell = ctypes.c_uint32.in_dll(lib, "vramtap_module_current")
        self.allocs = ctypes.c_uint32.in_dll(lib, "vramtap_module_allocs")
        self._intern = lib.vramtap_module_path
        self._intern.argtypes = [ctypes.c_char_p]
        self._intern.restype = ctypes.c_uint
        self._tensor = tensor_type
        self._ids = {}  # id(module) -> (weak reference, path id)
        self._names = {0: ""}  # path id -> path
        self._hooked = set()  # id() of the outputs given a hook in the forward running now
        self.backward = 0  # backward calls running, all threads together

    def _path_id(self, path):
        pid = self._intern(path.encode())
        if pid:
            self._names[pid] = path
        return pid

    def _keep(self, module, pid):
        key = id(module)
        self._ids[key] = (weakref.ref(module, lambda _, key=key: self._ids.pop(key, None)), pid)
        return pid

    def _known(self, module):
        entry = self._ids.get(id(module))
        if entry is not None and entry[0]() is module:
            return entry[1]
        return None

    def enter_root(self, module):
        """Makes the outermost call's module current; returns the value to put back."""
        pid = self._known(module)
        if pid is None:
            # The root names every module under it, also those another root named before: the
            # bigger model gives the longer, more telling paths.
            root_name = type(module).__name__
            for name, m in module.named_modules():
                pid_m = self._path_id(name or root_name)
                self._keep(m, pid_m)
            pid = self._known(module) or 0
        return self._make_current(pid)

    def enter(self, module):
        """The same for a call nested in another module's."""
        pid = self._known(module)
        if pid is None:
            # Not registered under the root (a module kept in a plain list, or made during the
            # forward): named by its class under the module that called it.
            parent = self._names.get(self.cell.value & ~RECOMPUTED, "")
            name = type(module).__name__
            pid = self._keep(module, self._path_id(parent + "." + name if parent else name))
        return self._make_current(pid)

    def _make_current(self, pid):
        if self.backward and pid:
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
        if isinstance(out, self._tensor):
            self._hook(out, pid)
        elif isinstance(out, (tuple, list)):
            for t in out:
                if isinstance(t, self._tensor):
                    self._hook(t, pid)
        elif isinstance(out, dict):
            for t in out.values():
                if isinstance(t, self._tensor):
                    self._hook(t, pid)

    def _hook(self, t, pid):
        if not t.requires_grad or id(t) in self._hooked:
            return
        self._hooked.add(id(t))
        cell = self.cell

        def now_in_backward_of(grad):
            cell.value = pid

        try:
            t.register_hook(now_in_backward_of)
        except RuntimeError:  # a tensor that takes no hook: its backward keeps the path before
            pass

    def forward_done(self):
        """The outermost call returned: the ids of its outputs may be reused."""
        self._hooked.clear()

    def backward_begins(self):
        self.backward += 1
        prev = self.cell.value
        self.cell.value = 0
        return prev

    def backward_ends(self, prev):
        self.backward -= 1
        self.cell.value = prev


def make(lib, torch):
    """A Paths for this process, or None: switched off (VRAMTAP_MODULES=0), or a library
    without module paths."""
    if lib is None or os.environ.get("VRAMTAP_MODULES", "1") == "0":
        return None
    try:
        return Paths(lib, torch.Tensor)
    except (ValueError, AttributeError):  # in_dll raises ValueError for a missing symbol
        return None
