"""Out-of-memory errors as PyTorch raises them, under `vramtap run` over the stand-in:

1. raised by PyTorch with no failed CUDA call (its per-process memory fraction): the hooks
   tell the library, which writes a post-mortem for the request the message names;
2. as 1, in the words PyTorch 2.x uses for its fraction (taken from PyTorch 2.11 on an H200);
3. raised after a CUDA allocation failed: the library saw the failure itself, and the same
   error reaching the hooks is not recorded a second time.
"""
import ctypes
import os

import torch

rt = ctypes.CDLL(os.path.join(os.environ["VT_STANDIN_DIR"], "libcudart.so.13"))
rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
kept = ctypes.c_void_p()
assert rt.cudaMalloc(ctypes.byref(kept), 1 << 20) == 0


class FractionLimited(torch.nn.Module):
    def forward(self, x):
        raise torch.cuda.OutOfMemoryError(
            "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of "
            "16.00 GiB of which 15.00 GiB is free. Of the allocated memory 1.00 MiB is "
            "allocated by PyTorch")


class DriverLimited(torch.nn.Module):
    def forward(self, x):
        p = ctypes.c_void_p()
        if rt.cudaMalloc(ctypes.byref(p), 1 << 40) != 0:
            raise torch.cuda.OutOfMemoryError(
                "CUDA out of memory. Tried to allocate 1024.00 GiB. GPU 0 has a total capacity "
                "of 16.00 GiB")
        return x


class FractionLimited2(torch.nn.Module):
    def forward(self, x):
        raise torch.cuda.OutOfMemoryError(
            "Allocation on device 0 would exceed allowed memory. (out of memory)\n"
            "Currently allocated     : 391.67 MiB\n"
            "Requested               : 1024.00 MiB\n"
            "Device limit            : 139.80 GiB\n"
            "Free (according to CUDA): 138.28 GiB\n"
            "PyTorch limit (set by user-supplied memory fraction)\n"
            "                        : 643.00 MiB")


for model in (FractionLimited(), FractionLimited2(), DriverLimited()):
    try:
        model(torch.zeros(2, requires_grad=True))
    except torch.cuda.OutOfMemoryError:
        pass
