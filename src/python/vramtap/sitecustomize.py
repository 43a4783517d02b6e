"""vramtap's Python bootstrap.

libvramtap.so (and ``vramtap run``) put this file's folder first on PYTHONPATH, so Python imports
it at start-up in place of any other ``sitecustomize``. It runs the one it shadows, and, when
vramtap is loaded, has the library start keeping Python frames and installs the PyTorch phase
hooks (vramtap_torch.py) once ``torch`` has been imported. Without vramtap in the process it does
nothing else.
"""

import os
import sys


def _start_python_frames():
    # PyDLL keeps the GIL across the call: the library installs its interpreter callbacks
    # there, and says itself on stderr why when it cannot.
    import ctypes

    import vramtap_lib

    try:
        install = vramtap_lib.library(ctypes.PyDLL).vramtap_python_install
    except AttributeError:  # not loaded, or a library without Python frames
        return
    install.argtypes = []
    install.restype = ctypes.c_int
    install()


def _frames_when_cuda_starts(torch):
    """Start Python frames at the first torch.cuda._lazy_init, which PyTorch's C++ side looks
    up by name whenever a tensor first reaches the GPU. The frames already on the stack are
    picked up then."""
    cuda = getattr(torch, "cuda", None)
    lazy_init = getattr(cuda, "_lazy_init", None)
    if lazy_init is None:
        return

    def _lazy_init():
        cuda._lazy_init = lazy_init
        _start_python_frames()
        vramtap_torch = sys.modules.get("vramtap_torch")
        if vramtap_torch is not None:
            vramtap_torch.frames_started()
        return lazy_init()

    cuda._lazy_init = _lazy_init


def _install_hooks():
    try:
        import vramtap_torch

        if _frames_deferred:
            _frames_when_cuda_starts(sys.modules["torch"])
        vramtap_torch.install(_env_at_start)
    except Exception as e:  # the program must run on without the hooks
        sys.stderr.write("vramtap: could not install the PyTorch hooks (%s: %s); phases come "
                         "only from NVTX and the C API\n" % (type(e).__name__, e))


class _TorchWatcher:
    """A meta path finder that lets ``torch`` import as usual and then installs the hooks."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        run = getattr(loader, "exec_module", None)
        if run is None:
            return None

        def exec_module(module):
            # Only torch's own run goes through here: a loader may serve other modules too.
            del loader.exec_module
            run(module)
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            _install_hooks()

        try:
            loader.exec_module = exec_module
        except AttributeError:
            sys.stderr.write("vramtap: cannot watch the import of torch (%s); no PyTorch phase "
                             "hooks\n" % type(loader).__name__)
            return None
        return spec


def _run_shadowed():
    """Run the ``sitecustomize`` that Python would have imported without vramtap."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.realpath(__file__))

    # Another copy of this bootstrap on the path (another vramtap install's, or an older
    # build's) is skipped too: it would set the hooks up again, then look for the one it
    # shadows and find this one, and so on without end.
    def bootstrap(p):
        folder = os.path.realpath(p or os.curdir)
        return folder == here or os.path.exists(os.path.join(folder, "vramtap_torch.py"))

    path = [p for p in sys.path if isinstance(p, str) and not bootstrap(p)]
    spec = importlib.machinery.PathFinder.find_spec(__name__, path)
    if spec is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules[__name__] = module
    spec.loader.exec_module(module)


def _attach():
    """Attached through CUPTI, the CUDA driver would load vramtap only at cuInit: load it now,
    before torch is imported, so that its start-up (tensor mode, NVTX) is done as under
    LD_PRELOAD. It is loaded privately: its wrappers must not take calls CUPTI reports."""
    import ctypes

    import vramtap_lib

    path = vramtap_lib.attached_path()
    try:
        return path is not None and ctypes.CDLL(path) is not None
    except OSError as e:
        sys.stderr.write("vramtap: cannot load %s (%s)\n" % (path, e))
        return False


# The environment tells without loading ctypes whether vramtap can be in the process;
# vramtap_torch then asks the library itself.
if "vramtap" in os.environ.get("LD_PRELOAD", "") or (
        "vramtap" in os.environ.get("CUDA_INJECTION64_PATH", "") and _attach()):
    _env_at_start = dict(os.environ)
    # Python frames followed call by call (where they cannot be read from the interpreter) cost
    # every Python call of the process. Children of a Python process that vramtap already
    # follows (torch.compile's compile workers, spawned data-loader workers, torchrun's workers)
    # start them only once they put a tensor on the GPU: a compile worker never does, and runs
    # at full speed.
    _frames_deferred = os.environ.get("VRAMTAP_PY_PARENT") not in (None, str(os.getpid()))
    if not _frames_deferred:
        os.environ["VRAMTAP_PY_PARENT"] = str(os.getpid())
        _start_python_frames()
    if "torch" in sys.modules:
        _install_hooks()
    else:
        sys.meta_path.insert(0, _TorchWatcher())
_run_shadowed()
