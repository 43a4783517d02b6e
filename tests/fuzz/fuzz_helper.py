"""Mutation fuzzing of the pickle helper (src/python/vramtap/import_pickle.py), which libFuzzer
cannot reach: for SECONDS, takes a seed pickle, changes its data (a value swapped for an odd
one, an element dropped or doubled) or its bytes, and runs the helper's read() on it.
Refusing the file (BadFile) is right; any other exception is a failure the helper's main would
only turn into a vague message. Prints the line scripts/fuzz prints for every target and
writes each failing input to ARTIFACTS/helper-N.pickle.

    fuzz_helper.py SECONDS ARTIFACTS SEED_FOLDER..."""
import copy
import gzip
import io
import os
import pickle
import random
import resource
import signal
import sys
import tempfile
import time
import traceback
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "src", "python", "vramtap"))
import import_pickle as helper  # noqa: E402

ODD = [None, 0, -1, 1 << 70, -(1 << 70), 1e308, float("nan"), float("inf"), "", "x", "alloc",
       "free_completed", "oom", "segment_alloc", [], {}, [[]], {"a": 1}, (1, 2), True, b"\0"]
HANG_S = 30


def seeds(folders):
    out = []
    for folder in folders:
        for root, _, files in os.walk(folder):
            for name in sorted(files):
                with open(os.path.join(root, name), "rb") as f:
                    data = f.read()
                if data[:2] == b"\x1f\x8b":
                    try:
                        data = gzip.decompress(data)
                    except (OSError, EOFError, zlib.error):
                        continue
                if data[:1] == b"\x80" and len(data) < 1 << 20:
                    out.append(data)
    return out


def mutate(rnd, o):
    """Changes one value somewhere in o, in place."""
    while True:
        if isinstance(o, dict) and o:
            key = rnd.choice(list(o))
        elif isinstance(o, list) and o:
            key = rnd.randrange(len(o))
        else:
            return
        r = rnd.random()
        if r < 0.3:
            o[key] = rnd.choice(ODD)
            return
        if r < 0.4:
            del o[key]
            return
        if r < 0.45 and isinstance(o, list):
            o.append(copy.deepcopy(o[key]))
            return
        o = o[key]


def hang(signum, frame):
    raise TimeoutError(f"one input ran {HANG_S} s")


def main():
    seconds, artifacts, folders = float(sys.argv[1]), sys.argv[2], sys.argv[3:]
    # A memo index in a tiny file makes CPython's unpickler size its memo table to it (about
    # 1 GiB for LONG_BINPUT 76288000): a known limit of the helper (docs/validation/fuzzing.md),
    # held here to 512 MiB so that it ends in MemoryError, a refusal, within the time limit.
    resource.setrlimit(resource.RLIMIT_AS, (512 << 20, resource.getrlimit(resource.RLIMIT_AS)[1]))
    rnd = random.Random(os.getpid())
    data = seeds(folders)
    objs = []
    for d in data:
        try:
            # never pickle.loads: a seed may be a pickle that runs code (tests/import has one)
            objs.append(copy.deepcopy(helper.PlainDataUnpickler(io.BytesIO(d)).load()))
        except Exception:  # noqa: BLE001  a broken or deeply nested seed: bytes mutations only
            pass
    runs = crashes = hangs = 0
    signal.signal(signal.SIGALRM, hang)
    end = time.time() + seconds
    failed = 0
    with tempfile.TemporaryDirectory(prefix="vt-fuzz-helper-") as tmp:
        path = os.path.join(tmp, "input.pickle")
        while time.time() < end and data:
            if objs and rnd.random() < 0.6:
                o = copy.deepcopy(rnd.choice(objs))
                for _ in range(rnd.randint(1, 4)):
                    mutate(rnd, o)
                blob = pickle.dumps(o, protocol=rnd.choice([2, 4, 5]))
            else:
                b = bytearray(rnd.choice(data))
                for _ in range(rnd.randint(1, 8)):
                    b[rnd.randrange(len(b))] = rnd.randrange(256)
                blob = bytes(b)
            with open(path, "wb") as f:
                f.write(blob)
            runs += 1
            signal.alarm(HANG_S)
            try:
                helper.read(path, helper.check_int64)
            except helper.BadFile:
                pass
            except TimeoutError:
                hangs += 1
            except Exception:  # noqa: BLE001  what the fuzzing is for
                crashes += 1
                traceback.print_exc(file=sys.stdout)
            finally:
                signal.alarm(0)
            if crashes + hangs == failed:
                continue
            failed = crashes + hangs
            os.makedirs(artifacts, exist_ok=True)
            kept = os.path.join(artifacts, f"helper-{crashes + hangs}.pickle")
            with open(kept, "wb") as f:
                f.write(blob)
            print(f"vt-fuzz: failing input written to {kept}", file=sys.stderr)
    print(f"helper: runs {runs} ({runs / seconds:.0f}/s), coverage - edges, - features, "
          f"corpus {len(data)} inputs, crashes {crashes}, hangs {hangs}")
    sys.exit(1 if crashes or hangs or not data else 0)


if __name__ == "__main__":
    main()
