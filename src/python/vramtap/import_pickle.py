"""Reads a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot, optionally gzipped) and
writes the records `vramtap import` replays, one JSON object per line on stdout:

  {"type": "site", "id": K, "frames": [["p", file, function, line] | ["n", symbol], ...]}
  {"type": "ev", "d": device, "t": time_us, "b": +size | -size, "a": address, "s": site,
   "py": whether the entry had Python frames}
  {"type": "block", "d": device, "a": address, "b": size, "s": site}   live at the dump
  {"type": "span", "kind": "optimizer" | "zero_grad", "start": time_us, "end": time_us}
  {"type": "oom", "d": device, "t": time_us, "b": size, "s": site}
  {"type": "device", "d": device, "reserved_peak": bytes, "reserved_end": bytes}
  {"type": "meta", "python_stacks": bool, "times_recorded": bool, "misses_memory": bool,
   "lacks": [...], "notes": [...]}
  {"type": "end"}

The pickle is loaded by an Unpickler that refuses every class and function, so nothing in the
file can run: memory snapshots hold only dicts, lists, tuples, strings and numbers. Standard
library only; a bad file gets one line on stderr and exit status 2.
"""

import gzip
import json
import math
import os
import pickle
import resource
import sys
import zlib

MAX_PY_FRAMES = 64
MAX_NATIVE_FRAMES = 16
# C++ frames kept in front of the Python ones of a mixed stack: the innermost say which library
# asked (at::cuda::getNewWorkspace for cuBLAS's workspace), the rest repeat the interpreter.
MIXED_NATIVE_FRAMES = 4
# Line numbers beyond this are not lines (CPython 3.13 reports 2**64 - 1 for some frames).
MAX_LINE = (1 << 31) - 1
# The recorder's own frames, the same on every entry: the stack starts after them.
RECORDER_PREFIXES = (
    "torch::unwind::",
    "torch::CapturedTraceback::",
    "torch::cuda::(anonymous namespace)::gather",
    "c10::cuda::CUDACachingAllocator::",
)
LIVE_STATES = ("active_allocated", "active_pending_free")
# What reading a snapshot may take on top of the interpreter itself: a fixed allowance, plus so
# many times the file's size (a pickle's objects take about 10x its bytes; gzip shrinks a
# snapshot about 8x). A few bytes of a damaged or hostile pickle can otherwise make CPython size
# a table to gigabytes (a memo index). VRAMTAP_IMPORT_MEMORY_MB replaces the whole budget.
MEMORY_ALLOWANCE = 256 << 20
MEMORY_PER_BYTE = 64
MEMORY_PER_GZIP_BYTE = 512


class BadFile(Exception):
    pass


class PlainDataUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        raise BadFile(
            f"refusing to load: the pickle names {module}.{name} (a memory snapshot holds only "
            "plain data; this file could run code)"
        )

    def persistent_load(self, pid):
        raise BadFile("refusing to load: the pickle refers to external objects")


def load(path):
    """The snapshot, streamed: a dump can be larger than what memory allows twice."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise BadFile(f"cannot read: {e.strerror}") from None
    with f:
        gz = f.peek(2)[:2] == b"\x1f\x8b"
        stream = gzip.GzipFile(fileobj=f) if gz else f
        try:
            if stream.peek(1)[:1] != b"\x80":
                raise BadFile("not a pickle (a PyTorch memory snapshot is a pickle, protocol 2 "
                              "or later)")
            return PlainDataUnpickler(stream).load()
        except BadFile:
            raise
        except (OSError, EOFError, zlib.error) as e:
            if gz:
                raise BadFile(f"damaged gzip data: {e}") from None
            raise BadFile(f"damaged pickle: {e}") from None
        except (pickle.UnpicklingError, ValueError, TypeError, IndexError, KeyError,
                AttributeError, MemoryError, OverflowError, RecursionError) as e:
            if isinstance(e, MemoryError):
                raise BadFile("damaged pickle: reading it would take more memory than "
                              f"{BUDGET_MB[0]} MiB, far out of proportion to its size "
                              "(VRAMTAP_IMPORT_MEMORY_MB raises the limit)") from None
            raise BadFile(f"damaged pickle: {str(e) or type(e).__name__}") from None


BUDGET_MB = [0]


def limit_memory(path):
    """Caps this process's address space at what reading path should take."""
    try:
        with open("/proc/self/statm") as f:
            now = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            per = MEMORY_PER_GZIP_BYTE if f.read(2) == b"\x1f\x8b" else MEMORY_PER_BYTE
    except (OSError, ValueError):
        return  # load() says what is wrong with the file
    mb = os.environ.get("VRAMTAP_IMPORT_MEMORY_MB", "")
    budget = int(mb) << 20 if mb.isdigit() and int(mb) > 0 else MEMORY_ALLOWANCE + per * size
    BUDGET_MB[0] = budget >> 20
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    limit = now + budget
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def is_python(frame):
    fn = frame.get("filename")
    return isinstance(fn, str) and (fn.endswith(".py") or fn.startswith("<"))


class Sites:
    def __init__(self, out):
        self.out = out
        self.ids = {}
        self.any_python = False

    def site(self, frames):
        """The site id of an entry's frames (innermost first), and whether it had Python ones."""
        if not isinstance(frames, list):
            return -1, False
        frames = [f for f in frames if isinstance(f, dict)]
        start = 0
        while start < len(frames) and str(frames[start].get("name", "")).startswith(
            RECORDER_PREFIXES
        ):
            start += 1
        frames = frames[start:]
        py = [f for f in frames if is_python(f)]
        if py:
            self.any_python = True
            head = []
            for f in frames[:MIXED_NATIVE_FRAMES]:
                if is_python(f):
                    break
                head.append(("n", str(f.get("name"))))
            key = tuple(head) + tuple(
                ("p", str(f.get("filename")), str(f.get("name")), line_of(f))
                for f in py[:MAX_PY_FRAMES]
            )
        else:
            key = tuple(("n", str(f.get("name"))) for f in frames[:MAX_NATIVE_FRAMES])
        if not key:
            return -1, bool(py)
        sid = self.ids.get(key)
        if sid is None:
            sid = self.ids[key] = len(self.ids)
            self.out({"type": "site", "id": sid, "frames": [list(k) for k in key]})
        return sid, bool(py)


def line_of(frame):
    """A frame's line, -1 (unknown) when it is missing or out of range."""
    line = int_or(frame.get("line"), -1)
    return line if 0 <= line <= MAX_LINE else -1


def int_or(v, default):
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def finite(v):
    """A time the records can carry: JSON has no NaN or infinity."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def need_int(v, what):
    if not isinstance(v, int) or isinstance(v, bool):
        raise BadFile(f"{what} is not an integer")
    return v


def convert(snap, out):
    if isinstance(snap, list):  # PyTorch before 2.0 dumped the segments alone
        snap = {"segments": snap, "device_traces": []}
    if not isinstance(snap, dict) or not ("segments" in snap or "device_traces" in snap):
        raise BadFile("not a PyTorch memory snapshot (no segments or device_traces)")
    segments = snap.get("segments", [])
    traces = snap.get("device_traces", [])
    if not isinstance(segments, list) or not isinstance(traces, list):
        raise BadFile("not a PyTorch memory snapshot (segments or device_traces not a list)")
    lacks, notes = [], []
    sites = Sites(out)
    have_time = True
    events = 0

    for dev, trace in enumerate(traces):
        if not isinstance(trace, list):
            raise BadFile(f"device_traces[{dev}] is not a list")
        seg_delta = []  # (index, +/-bytes) of segment events, to replay reserved backwards
        for i, e in enumerate(trace):
            if not isinstance(e, dict):
                raise BadFile(f"device_traces[{dev}][{i}] is not a dict")
            action = e.get("action")
            t = e.get("time_us")
            if not finite(t):
                have_time = False
                t = i
            size = int_or(e.get("size"), 0)
            if action in ("alloc", "free_completed", "free"):
                addr = need_int(e.get("addr"), f"device_traces[{dev}][{i}].addr")
                s, py = sites.site(e.get("frames"))
                out({"type": "ev", "d": dev, "t": t, "b": size if action == "alloc" else -size,
                     "a": addr, "s": s, "py": py})
                events += 1
            elif action in ("segment_alloc", "segment_map"):
                seg_delta.append(size)
            elif action in ("segment_free", "segment_unmap"):
                seg_delta.append(-size)
            elif action == "oom":
                s, _ = sites.site(e.get("frames"))
                out({"type": "oom", "d": dev, "t": t, "b": size, "s": s})
        reserved_end = sum(
            int_or(seg.get("total_size"), 0)
            for seg in segments
            if isinstance(seg, dict) and seg.get("device", 0) == dev
        )
        # reserved before the window = at the dump minus what the window's segment events added
        reserved = reserved_end
        peak = reserved
        for delta in reversed(seg_delta):
            reserved -= delta
            peak = max(peak, reserved)
        if segments:
            out({"type": "device", "d": dev, "reserved_peak": peak, "reserved_end": reserved_end})

    for si, seg in enumerate(segments):
        if not isinstance(seg, dict) or not isinstance(seg.get("blocks"), list):
            raise BadFile(f"segments[{si}] has no blocks")
        dev = int_or(seg.get("device"), 0)
        addr = int_or(seg.get("address"), 0)
        for block in seg["blocks"]:
            if not isinstance(block, dict):
                raise BadFile(f"segments[{si}] holds a block that is not a dict")
            size = need_int(block.get("size"), f"segments[{si}] block size")
            baddr = int_or(block.get("address"), addr)  # older dumps: blocks follow each other
            addr = baddr + size
            if block.get("state") in LIVE_STATES:
                s, _ = sites.site(block.get("frames"))
                # the trace records requested sizes; count blocks the same way
                requested = int_or(block.get("requested_size"), 0)
                out({"type": "block", "d": dev, "a": baddr, "b": requested or size, "s": s})

    open_spans = {}
    annotations = snap.get("external_annotations")
    for a in annotations if isinstance(annotations, list) else []:
        if not isinstance(a, dict) or not finite(a.get("time_us")):
            continue
        name = str(a.get("name", ""))
        kind = ("optimizer" if name.startswith("Optimizer.step#")
                else "zero_grad" if name.startswith("Optimizer.zero_grad#") else None)
        if kind is None:
            continue
        if a.get("stage") == "START":
            open_spans.setdefault(name, []).append(a["time_us"])
        elif a.get("stage") == "END" and open_spans.get(name):
            out({"type": "span", "kind": kind, "start": open_spans[name].pop(),
                 "end": a["time_us"]})

    if not traces or not events:
        lacks.append("the allocation trace (record_memory_history was off): only the blocks "
                     "live at the dump are known, so the peak is the dump's live bytes")
    if not segments:
        lacks.append("the dump's segments: allocations from before the recorded window that "
                     "were never freed are invisible")
    if not have_time:
        lacks.append("timestamps: no times are shown (the events are kept in their order)")
    if not sites.any_python:
        lacks.append("Python stacks (record_memory_history(stacks='python' or 'all')): "
                     "phases come only from optimizer annotations")
    out({"type": "meta", "python_stacks": sites.any_python, "times_recorded": have_time,
         "misses_memory": not (traces and events) or not segments, "lacks": lacks,
         "notes": notes})
    out({"type": "end"})


def check_int64(v):
    """The command reads the records' integers as 64-bit ones."""
    if isinstance(v, dict):
        v = list(v.values())
    if isinstance(v, list):
        for x in v:
            check_int64(x)
    elif isinstance(v, int) and not -(1 << 63) <= v < (1 << 63):
        raise BadFile(f"{v} does not fit in 64 bits: not a plausible size, address or time")


def read(path, out):
    """convert(load(path), out); BadFile for anything wrong with the file."""
    try:
        convert(load(path), out)
    except RecursionError:
        raise BadFile("not a PyTorch memory snapshot: values nested too deeply") from None


def main(argv):
    if len(argv) != 2:
        print("usage: import_pickle.py FILE", file=sys.stderr)
        return 2
    path = argv[1]
    write = sys.stdout.write

    def out(record):
        check_int64(record)
        write(json.dumps(record, separators=(",", ":")) + "\n")

    limit_memory(path)
    try:
        read(path, out)
        sys.stdout.flush()
    except BadFile as e:
        print(f"vramtap import: {path}: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 2
    except Exception as e:  # noqa: BLE001  any other shape of data convert() did not foresee
        print(f"vramtap import: {path}: not a PyTorch memory snapshot this reader understands "
              f"({type(e).__name__}: {e})".replace("\n", " "), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
