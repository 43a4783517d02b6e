"""What PyTorch's memory is, as the hooks in vramtap_torch.py see it: identity evidence and the
run record (docs/python.md).

Identity: the storage ranges of the parameters and buffers of every root module that ran a
forward, of every ``.grad`` and ``main_grad``, and of every tensor in an optimizer's ``state``
(nested containers included) are handed to the library with ``vramtap_label_ranges``, one call
per category. Ranges are taken at storage level, so views into a flat buffer give the buffer.
The library matches them against the allocations it saw and ignores the rest (host memory), so
nothing is filtered by device here.

Refreshes run at the first forward of each root module and after each optimizer step. What usually
stays is not looked at again while it lives (a weak reference tells): parameters, buffers and
optimizer state, whose containers are walked again when the optimizer's state grows, and in a look
spread over the refreshes (a slice each) begun every FULL_EVERY refreshes: until then a replaced
state tensor keeps the category the timing rules give memory born in the optimizer step and kept
(optimizer state), and a parameter made later its timing category. Gradients are made again at
every step by default (``zero_grad(set_to_none=True)``), so every one is sent at every refresh,
without a weak reference each: the library knows the ranges it has and ignores them again.

The run record: the root module's class, parameter counts, bytes (all, trainable, buffers) and
dtypes, the optimizers and the settings that change their memory, the first input's shape, AMP,
activation checkpointing and micro-batches per optimizer step, set with
``vramtap_record_text`` / ``vramtap_record_int`` when they change.
"""

import array
import ctypes
import gc
import functools
import itertools
import operator
import sys
import threading
import weakref

import vramtap_lib

_CATEGORIES = (b"parameters", b"gradients", b"optimizer_state")
_PARAMETERS, _GRADIENTS, _STATE = range(3)
_grad = operator.attrgetter("grad")


def _main_grad(p):
    return p.__dict__.get("main_grad")


# Optimizer settings that change how much memory its state takes.
_MEMORY_SETTINGS = ("momentum", "amsgrad", "foreach", "fused", "capturable", "centered",
                    "differentiable", "decoupled_weight_decay")


_SIGNATURES = (
    ("vramtap_label_ranges", [ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_ulonglong,
                              ctypes.c_char_p]),
    ("vramtap_record_text", [ctypes.c_char_p, ctypes.c_char_p]),
    ("vramtap_record_int", [ctypes.c_char_p, ctypes.c_longlong]),
)


def _load():
    """(label_ranges, record_text, record_int), or None with an older library or none."""
    lib = vramtap_lib.library()
    try:
        fns = [getattr(lib, name) for name, _ in _SIGNATURES]
    except AttributeError:  # an older library, or none
        return None
    for fn, (_, argtypes) in zip(fns, _SIGNATURES):
        fn.argtypes = argtypes
        fn.restype = ctypes.c_int
    return tuple(fns)


_api = _load()


def _allocations_counter():
    """The library's count of the device allocations it recorded (a ctypes view), or None with
    an older library or none."""
    try:
        return ctypes.c_uint32.in_dll(vramtap_lib.library(), "vramtap_module_allocs")
    except (ValueError, TypeError, AttributeError):
        return None


_allocations = _allocations_counter()
# Until the library has recorded a device allocation there is nothing to label: refreshes wait
# (a program on the CPU alone pays none).
_device_memory = _allocations is None
_lock = threading.Lock()
_roots = weakref.WeakKeyDictionary()  # root modules, in the order of their first forward
_root_ids = {}  # id(root module) -> its weak reference: asked at every forward, makes none
_autocast = None  # () -> the dtype autocast runs in now, or None (_autocast_probe)
_optimizers = weakref.WeakSet()
# id(tensor) -> weak reference of a tensor whose storage the library already has
_seen = {}
_record = {}
_storage = None  # Tensor -> its untyped storage: untyped_storage (2.x) or _storage (1.13)
_storage_ptr = _storage_bytes = None  # the untyped storage's data_ptr and nbytes
_backwards_since_step = 0
_backward_depth = 0
# Parameters, buffers and optimizer state are looked for in full this often (in refreshes), or
# at once when stale; a look runs in slices of this many modules or optimizer-state entries.
FULL_EVERY = 16
LOOK_MODULES, LOOK_STATES = 64, 256
_module_tensors, _params, _main_grad_params, _stale, _refreshes = [], [], [], True, 0
_looking = None  # the look under way (_look), one slice per refresh
_new_optimizer = False  # one not described in the run record yet
_steps = 0  # optimizer steps
_described = None  # the settings _record_optimizers described last
_DONE = object()
# The tensors a refresh found, by category, for the library; empty between refreshes.
_found = ([], [], [])
_state_sizes = weakref.WeakKeyDictionary()  # optimizer -> len(state) at its latest walk


def _give_up(e):
    """A failure here must not reach the program: say so once and stop labelling."""
    global _api
    _api = None
    sys.stderr.write("vramtap: identity evidence and the run record stop here (%s: %s); "
                     "the bill falls back to timing\n" % (type(e).__name__, e))


def _guarded(fn):
    """fn, its failures given up on (_give_up). Those that run at every step guard themselves,
    inside: a wrapper's call costs more there than the rest of their work."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _api is None:
            return None
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            _give_up(e)
            return None

    return wrapper


def _autocast_probe(torch):
    """A function that gives the dtype autocast runs in now, or None when it is off: looked up
    once, as it runs at every forward."""
    if hasattr(torch, "get_autocast_dtype"):  # 2.4 and later: per device type
        enabled, dtype = torch.is_autocast_enabled, torch.get_autocast_dtype

        def probe():
            for device in ("cuda", "cpu"):
                if enabled(device):
                    return dtype(device)
            return None

        return probe
    gpu, cpu = torch.is_autocast_enabled, torch.is_autocast_cpu_enabled
    gpu_dtype, cpu_dtype = torch.get_autocast_gpu_dtype, torch.get_autocast_cpu_dtype

    def probe():
        if gpu():
            return gpu_dtype()
        if cpu():
            return cpu_dtype()
        return None

    return probe


def _storage_of(torch):
    """The functions that give a tensor's untyped storage, its address and its bytes."""
    Storage = torch._C.StorageBase  # of torch.UntypedStorage, in 1.13 as in 2.x
    get = getattr(torch.Tensor, "untyped_storage", None) or torch.Tensor._storage
    return get, Storage.data_ptr, Storage.nbytes


class _Ref(weakref.ref):
    """A weak reference that knows its tensor's id: one object per tensor seen (a partial
    callback would make two, and more for the garbage collector to walk)."""
    __slots__ = ("key",)


def _forget(ref):
    if _seen.get(ref.key) is ref:
        del _seen[ref.key]


def _unseen(tensors):
    """Those of `tensors` whose storage the library does not have yet. An id in _seen is a
    tensor still alive: its weak reference's callback drops the id before the id can be
    reused."""
    seen = _seen
    return [t for t in tensors if id(t) not in seen]


def _ranges(tensors, remember=True):
    """Storage ranges of tensors as a flat [address, bytes, ...] list; remembered as seen unless
    told otherwise."""
    try:
        # Unbound C methods mapped over the batch: a loop calling them costs half as much again
        # (a step hands over a thousand gradients).
        storages = list(map(_storage, tensors))
        out = [0] * (2 * len(storages))
        out[0::2] = map(_storage_ptr, storages)
        out[1::2] = map(_storage_bytes, storages)
    except (RuntimeError, TypeError, NotImplementedError):  # meta, sparse, no storage
        out = _ranges_one_by_one(tensors)
    if remember:
        for t in tensors:
            ref = _Ref(t, _forget)
            ref.key = id(t)
            _seen[ref.key] = ref
    return out


def _ranges_one_by_one(tensors):
    """Those of the tensors' ranges that can be had: a tensor without storage is left out."""
    out = []
    for t in tensors:
        try:
            storage = _storage(t)
            out += (_storage_ptr(storage), _storage_bytes(storage))
        except (RuntimeError, TypeError, NotImplementedError):
            continue
    return out


def _tensors_in(value, torch, out, depth=0):
    if isinstance(value, torch.Tensor):
        out.append(value)
    elif depth < 4 and isinstance(value, dict):
        for v in value.values():
            _tensors_in(v, torch, out, depth + 1)
    elif depth < 4 and isinstance(value, (list, tuple)):
        for v in value:
            _tensors_in(v, torch, out, depth + 1)
    return out


def _new_state_tensors(values, torch, out):
    """The tensors not seen yet among the values of an optimizer's state (parameter -> dict of
    name -> tensor or number, the usual shape, or anything nested)."""
    seen = _seen
    values = [v for per_param in values
              for v in (per_param.values() if type(per_param) is dict else (per_param,))
              if id(v) not in seen]
    Tensor = torch.Tensor
    for v in values:
        if isinstance(v, Tensor):
            out.append(v)
        elif isinstance(v, (dict, list, tuple)):
            out.extend(_unseen(_tensors_in(v, torch, [], 2)))


def _look(torch):
    """The look at everything: the parameters and buffers of the root modules and the
    optimizers' parameters (which parameters have a ``main_grad``), then every optimizer's state,
    the new tensors found going to _found. A generator that does a slice of the work each time it
    is advanced, so that no step pays for all of it. Between slices it holds the modules still to
    walk (their tensors are in _module_tensors anyway) and weak references to the optimizers.
    Modules are walked through their own dictionaries: Module.modules() names every one on the
    way, which costs more than the rest of the look."""
    params, buffers, stack = {}, {}, list(_roots)
    while stack:
        _walk_modules(stack, params, buffers)
        yield
    _optimizers_params(params)
    yield
    _take_modules(params, buffers)
    del params, buffers
    for opt in [weakref.ref(o) for o in _optimizers]:
        start = 0
        yield
        while _walk_state(opt, start, torch):
            start += LOOK_STATES
            yield


def _walk_modules(stack, params, buffers):
    for _ in range(LOOK_MODULES):
        if not stack:
            return
        module = stack.pop()
        # plain loops: a module holds a few of each, and a generator per dictionary cost twice
        for p in module._parameters.values():
            if p is not None:
                params[id(p)] = p
        for b in module._buffers.values():
            if b is not None:
                buffers[id(b)] = b
        for m in module._modules.values():
            if m is not None:
                stack.append(m)


def _optimizers_params(params):
    for opt in list(_optimizers):
        for group in opt.param_groups:
            params.update((id(p), p) for p in group["params"])


def _take_modules(params, buffers):
    global _module_tensors, _params, _main_grad_params
    params = list(params.values())
    # Megatron-style fp32 gradient buffers are set up with the model, before its first forward
    _main_grad_params = [p for p in params if "main_grad" in p.__dict__]
    _module_tensors, _params = list(buffers.values()) + params, params
    _found[_PARAMETERS].extend(_unseen(_module_tensors))


def _walk_state(opt_ref, start, torch):
    """Looks at LOOK_STATES entries of an optimizer's state from `start`; False when none are
    left after them (or the optimizer is gone)."""
    opt = opt_ref()
    if opt is None:
        return False
    if not start:
        _state_sizes[opt] = len(opt.state)
    values = list(itertools.islice(opt.state.values(), start, start + LOOK_STATES))
    _new_state_tensors(values, torch, _found[_STATE])
    return start + LOOK_STATES < len(opt.state)


def _refresh():
    """Hands the library the storage ranges it does not have yet: every gradient and
    ``main_grad``, and the state of an optimizer whose state grew, at every refresh; a look at
    everything at once after a new root module or optimizer, and one in slices, a slice per
    refresh, begun every FULL_EVERY refreshes."""
    global _device_memory
    if _storage is None:
        return
    if not _device_memory:
        if not _allocations.value:
            return
        _device_memory = True
    # A refresh makes an object per new tensor (a weak reference, a storage): allocations that
    # would start the cyclic collector, whose full passes over a framework's heap cost more than
    # the refresh itself. It runs after the refresh instead, if it was on.
    collecting = gc.isenabled()
    gc.disable()
    try:
        _refresh_unguarded()
    finally:
        for tensors in _found:  # nothing is held until the next refresh
            tensors.clear()
        if collecting:
            gc.enable()


def _refresh_unguarded():
    global _refreshes, _stale, _looking
    torch = sys.modules["torch"]
    _refreshes += 1
    if _stale:
        _stale, _looking = False, None
        for _ in _look(torch):
            pass
    elif _looking is not None or _refreshes % FULL_EVERY == 0:
        if _looking is None:
            _looking = _look(torch)
        if next(_looking, _DONE) is _DONE:
            _looking = None
    grads = _found[_GRADIENTS]
    grads += [g for g in map(_grad, _params) if g is not None]
    grads += [g for g in map(_main_grad, _main_grad_params) if g is not None]
    for opt in list(_optimizers):
        if len(opt.state) != _state_sizes.get(opt):
            _state_sizes[opt] = len(opt.state)
            _new_state_tensors(opt.state.values(), torch, _found[_STATE])
    for cat, tensors, remember in zip(_CATEGORIES, _found, (True, False, True)):
        flat = _ranges(tensors, remember) if tensors else None
        if flat:  # array.array fills a buffer four times faster than ctypes does
            buf = (ctypes.c_ulonglong * len(flat)).from_buffer(array.array("Q", flat))
            _api[0](buf, len(flat) // 2, cat)


def _set(key, value):
    if _record.get(key) == value:
        return
    _record[key] = value
    if isinstance(value, int):
        _api[2](key.encode(), value)
    else:
        _api[1](key.encode(), str(value).encode())


def _dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def _record_model(torch):
    seen, total, trainable, nbytes, tbytes, dtypes, names = set(), 0, 0, 0, 0, [], []
    buffers = {}
    for module in list(_roots):
        params = [p for p in module.parameters() if id(p) not in seen]
        if not params:
            continue
        names.append(type(module).__name__)
        for p in params:
            seen.add(id(p))
            n = p.numel()
            total += n
            nbytes += n * p.element_size()
            if p.requires_grad:
                trainable += n
                tbytes += n * p.element_size()
            name = _dtype_name(p.dtype)
            if name not in dtypes:
                dtypes.append(name)
        for b in module.buffers():
            buffers[id(b)] = b.numel() * b.element_size()
    if names:
        _set("model", ", ".join(names))
        _set("parameters", total)
        _set("trainable_parameters", trainable)
        _set("parameter_bytes", nbytes)
        _set("trainable_parameter_bytes", tbytes)
        _set("buffer_bytes", sum(buffers.values()))
        _set("parameter_dtypes", ", ".join(dtypes))


def _first_tensor(values, torch):
    for v in values:
        if isinstance(v, torch.Tensor):
            return v
        if isinstance(v, (list, tuple)):
            t = _first_tensor(v, torch)
            if t is not None:
                return t
    return None


def note_forward(module, args, kwargs):
    """An outermost module call with gradients enabled."""
    if _api is None:
        return
    try:
        if _backward_running():  # recomputation of a checkpointed segment: not a forward
            return
        amp = _autocast()
        if amp is not None:
            _set("amp", _dtype_name(amp))
        known = _root_ids.get(id(module))
        if known is None or known() is not module:
            _new_root(module, args, kwargs)
    except Exception as e:
        _give_up(e)


def _new_root(module, args, kwargs):
    global _stale
    torch = sys.modules["torch"]
    with _lock:
        _roots[module] = None
        key = id(module)
        _root_ids[key] = weakref.ref(module, lambda _, key=key: _root_ids.pop(key, None))
        _stale = True
    if next(module.parameters(), None) is not None and "input_shape" not in _record:
        x = _first_tensor(list(args) + list(kwargs.values()), torch)
        if x is not None:
            _set("input_shape", "x".join(str(n) for n in x.shape) or "scalar")
            _set("input_dtype", _dtype_name(x.dtype))
            if x.dim():
                _set("batch_size", int(x.shape[0]))
    _record_model(torch)
    _refresh()


def note_backward(delta):
    """A backward call begins (+1) or ends (-1), where the library's builtins do not count them.
    Only outermost calls are micro-batches: the backward of a checkpointed segment runs one
    inside the other's."""
    global _backward_depth, _backwards_since_step
    with _lock:
        _backward_depth += delta
        if delta > 0 and _backward_depth == 1:
            _backwards_since_step += 1


def _backward_running():
    return _backward_depth


def _backwards_taken():
    global _backwards_since_step
    with _lock:
        n, _backwards_since_step = _backwards_since_step, 0
    return n


def count_backwards(running, taken):
    """The library counts backward calls (its builtins): running() is how many run now, taken()
    how many outermost ones began since it was last called."""
    global _backward_running, _backwards_taken
    _backward_running, _backwards_taken = running, taken


@_guarded
def note_checkpoint():
    _set("gradient_checkpointing", "yes")


def note_optimizer(opt):
    """An optimizer made, or stepped (torch 2.x's step hooks: one made before they were
    installed); it runs at every step there."""
    if _api is None:
        return
    try:
        if opt not in _optimizers:
            _new_optimizer_seen(opt)
    except Exception as e:
        _give_up(e)


def _new_optimizer_seen(opt):
    global _stale, _new_optimizer
    with _lock:
        _optimizers.add(opt)
        _stale = _new_optimizer = True


def _record_optimizers():
    """Describes the optimizers' settings that matter for memory, when they changed: comparing
    them costs a tenth of describing them."""
    global _described
    settings_now = [(type(opt), [[group.get(key, _DONE) for key in _MEMORY_SETTINGS]
                                 for group in opt.param_groups]) for opt in list(_optimizers)]
    try:
        if settings_now == _described:
            return
    except Exception:  # a setting that does not compare as a bool (a tensor): describe again
        pass
    _described = settings_now
    described = []
    for cls, groups in settings_now:
        settings = []
        for i, key in enumerate(_MEMORY_SETTINGS):
            values = []
            for group in groups:
                if group[i] is not _DONE and group[i] not in values:
                    values.append(group[i])
            if values:
                settings.append("%s=%s" % (key, "/".join(str(v) for v in values)))
        text = cls.__name__
        described.append(text + (" (%s)" % ", ".join(settings) if settings else ""))
    if described:
        _set("optimizer", "; ".join(sorted(described)))


def note_step():
    """After an optimizer step: the labels, and what the step says about the run."""
    global _new_optimizer, _steps
    if _api is None:
        return
    try:
        backwards = _backwards_taken()
        if backwards:
            _set("micro_batches", backwards)
        _steps += 1
        # The settings seldom change: read with a new optimizer, then every FULL_EVERY steps.
        if _new_optimizer or _steps % FULL_EVERY == 0:
            _new_optimizer = False
            _record_optimizers()
        _refresh()
    except Exception as e:
        _give_up(e)


@_guarded
def refresh():
    _refresh()


@_guarded
def install(torch):
    """Starts the record; the hooks call the note_* functions."""
    global _storage, _storage_ptr, _storage_bytes, _autocast
    _storage, _storage_ptr, _storage_bytes = _storage_of(torch)
    _autocast = _autocast_probe(torch)
    _set("framework", "pytorch " + torch.__version__)
    _set("amp", "off")
    _set("gradient_checkpointing", "no")
