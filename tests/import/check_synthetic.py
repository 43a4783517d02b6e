"""Small hand-made traces whose every phase, step and instance is worked out by hand below:
a Kineto trace (two threads, two profiler steps, a window that starts after allocations were
made, a second device) and a memory-snapshot pickle (a window that starts mid-run, blocks
alive at the dump, autograd's thread, an optimizer annotation, an out-of-memory entry)."""
import gzip
import json
import os
import pickle

from common import check, done, import_file, peak_set_consistent, tempdir, well_formed

MAIN, BWD = 11, 12  # thread ids


def x(name, ts, dur, tid=MAIN, cat="cpu_op"):
    return {"ph": "X", "cat": cat, "name": name, "pid": 7, "tid": tid, "ts": ts, "dur": dur,
            "args": {}}


def kineto_trace():
    # (ts, tid, device, addr, bytes); totals are filled in below
    mem = [
        (115, MAIN, 0, 0xA0, -1000),   # zero_grad frees last step's gradient (before the window)
        (225, MAIN, 0, 0x100, 4096),   # A1 forward activation
        (230, MAIN, 1, 0x900, 777),    # on the second device
        (240, MAIN, 1, 0x900, -777),
        (300, MAIN, 0, 0x200, 512),    # T1 forward temporary
        (350, MAIN, 0, 0x200, -512),
        (430, MAIN, 0, 0x300, 256),    # L loss: an op outside any module, before backward
        (510, BWD, 0, 0xA0, 1000),     # G1 gradient, reusing G0's address
        (520, BWD, 0, 0x400, 2048),    # BT backward temporary; the peak of device 0
        (580, BWD, 0, 0x400, -2048),
        (590, BWD, 0, 0x100, -4096),   # A1 freed by backward
        (615, BWD, 0, 0x500, 100),     # gradient sum on autograd's thread, outside any node
        (618, BWD, 0, 0x500, -100),
        (712, MAIN, 0, 0x700, -300),   # the optimizer replaces its state from before the window
        (715, MAIN, 0, 0x600, 1000),   # OS new optimizer state
        (1015, MAIN, 0, 0xA0, -1000),  # zero_grad of step 4 frees G1
        (1120, MAIN, 0, 0x300, -256),  # L freed when the next forward rebinds it
        (1150, MAIN, 0, 0x100, 4096),  # A2
        (1600, MAIN, 0, 0x100, -4096), # after the last step: outside phases
        (1700, MAIN, 0, 0x800, 10),    # X: no evidence at all
        (1710, MAIN, 0, 0x800, -10),
    ]
    live = {0: 1000 + 300 + 50000, 1: 0}  # G0, the old state, and 50000 no event reveals
    events = [
        x("train.py(10): <module>", 0, 2000, cat="python_function"),
        x("ProfilerStep#3", 100, 900, cat="user_annotation"),
        x("Optimizer.zero_grad#SGD.zero_grad", 110, 10, cat="user_annotation"),
        x("torch/nn/modules/module.py(1501): _call_impl", 200, 200, cat="python_function"),
        x("aten::linear", 210, 180),
        x("aten::empty", 220, 15),
        x("aten::cross_entropy", 420, 20),
        x("autograd::engine::evaluate_function: MmBackward0", 500, 100, tid=BWD),
        x("MmBackward0", 505, 90, tid=BWD),
        x("aten::add", 610, 10, tid=BWD),
        x("Optimizer.step#SGD.step", 700, 100, cat="user_annotation"),
        x("aten::add_", 710, 10),
        x("ProfilerStep#4", 1000, 500, cat="user_annotation"),
        x("Optimizer.zero_grad#SGD.zero_grad", 1010, 10, cat="user_annotation"),
        x("torch/nn/modules/module.py(1501): _call_impl", 1100, 100, cat="python_function"),
        x("Optimizer.step#SGD.step", 1300, 10, cat="user_annotation"),
        {"ph": "i", "name": "[memory]", "pid": 7, "tid": MAIN, "ts": 130,
         "args": {"Device Type": 0, "Device Id": -1, "Bytes": 64}},  # CPU memory: ignored
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": "stream 7", "ts": 230,
         "dur": 5, "args": {}},
        # one event larger than the reader's buffer, escapes all along (json.dump writes \u00e9)
        {"ph": "X", "cat": "kernel", "name": "big", "pid": 0, "tid": "stream 7", "ts": 240,
         "dur": 1, "args": {"blob": "\u00e9\"\\" * 700000}},
    ]
    for ts, tid, dev, addr, nbytes in mem:
        live[dev] += nbytes
        events.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
                       "pid": 7, "tid": tid, "ts": ts,
                       "args": {"Device Type": 1, "Device Id": dev, "Addr": addr,
                                "Bytes": nbytes, "Total Allocated": live[dev],
                                "Total Reserved": 1 << 20}})
    events.reverse()  # file order is not time order
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Test GPU",
                                                      "totalGlobalMem": 1 << 34}],
            "distributedInfo": {"rank": 3}, "traceEvents": events,
            "traceName": "synthetic"}


def moment(a, which):
    m = a[which]
    return None if m is None else (m["phase"], m["step"], m["instance"])


def by_address(snap, dev=0):
    return {a["address"]: a for a in snap["allocations"] if a["device"] == dev}


def check_kineto(snap):
    name = "kineto"
    well_formed(snap, name)
    peak_set_consistent(snap)
    devs = {d["device"]: d for d in snap["devices"]}
    check(devs[0]["peak_bytes"] == 51300 - 1000 + 4096 + 512 - 512 + 256 + 1000 + 2048,
          f"{name}: device 0 peak {devs[0]['peak_bytes']}")
    check((devs[0]["peak_phase"], devs[0]["peak_step"]) == ("backward", 3),
          f"{name}: device 0 peak moment")
    check(devs[0]["name"] == "Test GPU" and devs[0]["total_bytes"] == 1 << 34,
          f"{name}: device properties")
    check(devs[1]["peak_bytes"] == 777 and devs[1]["peak_phase"] == "forward",
          f"{name}: device 1 {devs[1]}")
    check(snap["rank"]["rank"] == 3 and snap["pid"] == 7, f"{name}: rank/pid")
    tl = [(t["instance"], t["phase"], t["step"]) for t in snap["timeline"]]
    check(tl == [(1, "forward", 3), (2, "backward", 3), (3, "optimizer", 3), (4, "forward", 4),
                 (5, "optimizer", 4)], f"{name}: timeline {tl}")
    check(snap["steps"] == 5, f"{name}: steps {snap['steps']}")
    live = by_address(snap)
    want = {
        "0x100": (("forward", 3, 1), ("backward", 3, 2)),
        "0x300": (("forward", 3, 1), ("forward", 4, 4)),
        "0xa0": (("backward", 3, 2), ("other", 4, 3)),
        "0x400": (("backward", 3, 2), ("backward", 3, 2)),
        "0x700": (("optimizer", 3, 0), ("optimizer", 3, 3)),
        None: (("setup", 3, 0), None),
    }
    check(set(live) == set(want), f"{name}: live at the peak {sorted(map(str, live))}")
    for addr, (birth, death) in want.items():
        if addr in live:
            a = live[addr]
            check((moment(a, "birth"), moment(a, "death")) == (birth, death),
                  f"{name}: {addr}: {moment(a, 'birth')} {moment(a, 'death')}")
    check(live.get(None, {}).get("size") == 50000 and live[None]["before_window"],
          f"{name}: the unseen bytes")
    check(live.get("0x700", {}).get("birth_phase_from") == "freeing_phase",
          f"{name}: 0x700 inferred from the optimizer that freed it")
    frames = snap["sites"][live["0x100"]["site"]]["frames"]
    check(frames == [{"type": "op", "name": "aten::empty"}, {"type": "op", "name": "aten::linear"},
                     {"type": "python", "file": "torch/nn/modules/module.py",
                      "function": "_call_impl", "line": 1501},
                     {"type": "python", "file": "train.py", "function": "<module>", "line": 10}],
          f"{name}: stack of A1 {frames}")
    imp = snap["import"]["devices"][0]
    check(imp["unseen_bytes"] == 50000 and imp["before_window_bytes"] == 51300
          and imp["frees_from_before_window"] == 2 and imp["running_total_mismatches"] == 0,
          f"{name}: import figures {imp}")
    check(imp["allocations_without_phase_evidence"] == 1 and imp["of_those_outside_phases"] == 1,
          f"{name}: phase evidence {imp}")
    check(snap["import"]["lacks"] == [], f"{name}: lacks {snap['import']['lacks']}")


def frames_of(*fns):
    return [{"filename": f, "name": n, "line": line} for f, n, line in fns]


NATIVE = [{"filename": "??", "name": "torch::unwind::unwind()", "line": 0},
          {"filename": "engine.cpp", "name": "torch::autograd::Engine::thread_main(...)",
           "line": 0}]
FWD = frames_of(("model.py", "forward", 5), ("torch/nn/modules/module.py", "_call_impl", 1),
                ("train.py", "<module>", 9))
OPT = frames_of(("torch/optim/adamw.py", "step", 80), ("torch/optim/optimizer.py", "wrapper", 2),
                ("train.py", "<module>", 12))


def pickle_snapshot():
    def ev(action, addr, size, t, frames):
        return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t,
                "frames": frames}

    trace = [
        ev("free_completed", 0x4000, 2000, 1010,
           frames_of(("torch/optim/optimizer.py", "zero_grad", 7), ("train.py", "<module>", 8))),
        ev("alloc", 0x5000, 8000, 1020, FWD),
        ev("alloc", 0x6000, 100, 1025, frames_of(("train.py", "<module>", 4))),  # the batch
        ev("alloc", 0x7000, 3000, 1030, NATIVE),  # a gradient, on autograd's thread
        ev("free_requested", 0x5000, 8000, 1035, NATIVE),
        ev("free_completed", 0x5000, 8000, 1036, NATIVE),
        ev("alloc", 0x2000, 1000, 1040, OPT),
        ev("free_completed", 0x8000, 1000, 1041, OPT),  # state from before the window
        ev("segment_alloc", 0x10000, 1 << 20, 1042, OPT),
        {"action": "oom", "addr": 0, "size": 1 << 30, "stream": 0, "time_us": 1047,
         "device_free": 0, "frames": OPT},
        ev("free_completed", 0x6000, 100, 1050, frames_of(("train.py", "<module>", 4))),
    ]

    def block(addr, size, requested, state="active_allocated", frames=()):
        return {"address": addr, "size": size, "requested_size": requested, "state": state,
                "frames": list(frames)}

    segments = [
        {"device": 0, "address": 0x1000, "total_size": 1 << 20, "stream": 0,
         "segment_type": "large", "blocks": [
             block(0x1000, 4096, 4000),  # a parameter, allocated before recording began
             block(0x2000, 1024, 1000, frames=OPT),
             block(0x3000, 512, 512, "inactive"),
             block(0x7000, 3072, 3000, frames=NATIVE)]},
        {"device": 0, "address": 0x10000, "total_size": 1 << 20, "stream": 0,
         "segment_type": "large", "blocks": [block(0x10000, 1 << 20, 0, "inactive")]},
    ]
    return {"segments": segments, "device_traces": [trace],
            "allocator_settings": {},
            "external_annotations": [
                {"stage": "START", "name": "Optimizer.step#AdamW.step", "device": 0,
                 "time_us": 1039},
                {"stage": "END", "name": "Optimizer.step#AdamW.step", "device": 0,
                 "time_us": 1045}]}


def check_pickle(snap):
    name = "pickle"
    well_formed(snap, name)
    peak_set_consistent(snap)
    dev = snap["devices"][0]
    check(dev["peak_bytes"] == 16100 and dev["peak_phase"] == "backward" and dev["peak_step"] == 0,
          f"{name}: peak {dev}")
    check(dev["reserved"] == {"source": "segments", "peak_bytes": 2 << 20,
                              "current_bytes": 2 << 20}, f"{name}: reserved {dev['reserved']}")
    tl = [(t["instance"], t["phase"], t["step"]) for t in snap["timeline"]]
    check(tl == [(1, "forward", 0), (2, "backward", 0), (3, "optimizer", 0)],
          f"{name}: timeline {tl}")
    check(snap["steps"] == 1, f"{name}: steps {snap['steps']}")
    live = by_address(snap)
    want = {
        "0x1000": (("setup", 0, 0), None, 4000, None),
        "0x8000": (("optimizer", 0, 0), ("optimizer", 0, 3), 1000, "freeing_phase"),
        "0x5000": (("forward", 0, 1), ("backward", 0, 2), 8000, None),
        "0x6000": (("other", 0, 1), ("other", 1, 3), 100, None),
        "0x7000": (("backward", 0, 2), None, 3000, None),
    }
    check(set(live) == set(want), f"{name}: live at the peak {sorted(live)}")
    for addr, (birth, death, size, inferred) in want.items():
        a = live.get(addr)
        if a is None:
            continue
        check((moment(a, "birth"), moment(a, "death"), a["size"]) == (birth, death, size),
              f"{name}: {addr}: {moment(a, 'birth')} {moment(a, 'death')} {a['size']}")
        check(a.get("birth_phase_from") == inferred, f"{name}: {addr} birth_phase_from")
    frames = snap["sites"][live["0x7000"]["site"]]["frames"]
    check(frames == [{"type": "native", "module": None, "offset": None,
                      "symbol": "torch::autograd::Engine::thread_main(...)"}],
          f"{name}: the recorder's own frames are dropped: {frames}")
    imp = snap["import"]["devices"][0]
    check(imp["allocations_without_phase_evidence"] == 1 and imp["of_those_outside_phases"] == 1,
          f"{name}: phase evidence {imp}")
    check(imp["frees_from_before_window"] == 2 and imp["before_window_bytes"] == 7000,
          f"{name}: before the window {imp}")
    oom = snap["oom_events"]
    check(len(oom) == 1 and oom[0]["size"] == 1 << 30 and oom[0]["phase"] == "optimizer"
          and not oom[0]["retry_succeeded"], f"{name}: oom {oom}")


def main():
    with tempdir() as tmp:
        doc = kineto_trace()
        plain = os.path.join(tmp, "synthetic.pt.trace.json")
        with open(plain, "w") as f:
            json.dump(doc, f, indent=1)
        packed = os.path.join(tmp, "synthetic_gz.pt.trace.json.gz")
        with gzip.open(packed, "wt") as f:
            json.dump(doc, f)
        for path in (plain, packed):
            snap, p = import_file(path, tmp)
            if check(p.returncode == 0, f"kineto import exit {p.returncode}: {p.stderr}"):
                check_kineto(snap)
        a, _ = import_file(plain, tmp)
        b, _ = import_file(packed, tmp)
        if a and b:
            check([s["signature"] for s in a["sites"]] == [s["signature"] for s in b["sites"]],
                  "the same trace gives the same site signatures")
        pk = os.path.join(tmp, "synthetic.pickle")
        with open(pk, "wb") as f:
            pickle.dump(pickle_snapshot(), f)
        with open(pk, "rb") as f, gzip.open(pk + ".gz", "wb") as g:
            g.write(f.read())
        for path in (pk, pk + ".gz"):
            snap, p = import_file(path, tmp)
            if check(p.returncode == 0, f"pickle import exit {p.returncode}: {p.stderr}"):
                check_pickle(snap)
    done()


main()
