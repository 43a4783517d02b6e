"""The libvramtap.so of this process, as a ctypes library.

Preloaded (``LD_PRELOAD``), the library's functions are in the process's global scope. Attached
through CUPTI (``vramtap run --attach cupti``: ``CUDA_INJECTION64_PATH`` names the library and
nothing is preloaded), the bootstrap loads it by that path at start-up, privately, so that its
interposed symbols stay out of every other library's way; the CUDA driver later loads the same
copy at ``cuInit``. ``library()`` finds whichever it is.
"""

import ctypes
import os


def attached_path():
    """The library CUDA_INJECTION64_PATH names when it is vramtap's, else None."""
    path = os.environ.get("CUDA_INJECTION64_PATH", "")
    return path if os.path.basename(path).startswith("libvramtap") else None


def library(kind=ctypes.CDLL):
    """libvramtap.so loaded in this process (as `kind`: CDLL, or PyDLL to keep the GIL across
    calls), or None."""
    candidates = [None]
    if attached_path():
        candidates.append(attached_path())
    for name in candidates:
        try:
            lib = kind(name)
            lib.vramtap_is_loaded
            return lib
        except (OSError, AttributeError):
            continue
    return None
