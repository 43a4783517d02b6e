"""The small recordings committed in tests/import/fixtures (made by make.py there), each with
its phases, steps and instances worked out by hand: a Kineto trace (two threads, two profiler
steps, a window that starts after allocations were made, a second device; plain, and gzipped
with one event larger than the reader's buffer), a memory-snapshot pickle (a window that starts
mid-run, blocks alive at the dump, autograd's thread, an optimizer annotation, an out-of-memory
entry; plain and gzipped), a 2021-format Kineto trace, an inference trace with Python function
events, a forward/backward pickle on two devices with expandable segments, and a training step
recorded with module scopes (with_modules=True)."""
import json
import os

from common import (check, done, fixture, import_file, peak_set_consistent, run, tempdir,
                    well_formed)


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


def check_kineto_2021(snap):
    name = "kineto_2021"
    well_formed(snap, name)
    dev = snap["devices"][0]
    # zero_grad frees 2048 bytes made before the window; then 8192 + 8192 + 512 + 2048 + 1024
    check((dev["peak_bytes"], dev["peak_phase"], dev["peak_step"]) == (19968, "backward", 5),
          f"{name}: peak {dev['peak_bytes']} {dev['peak_phase']} {dev['peak_step']}")
    check(dev["name"] == "Tesla V100-DGXS-32GB", f"{name}: device name {dev['name']}")
    sizes = sorted(a["size"] for a in snap["allocations"])
    check(sizes == [512, 1024, 2048, 8192, 8192], f"{name}: sizes live at the peak {sizes}")
    fwd = [a for a in snap["allocations"] if a["birth"]["phase"] == "forward"]
    check(len(fwd) == 3 and all(a["birth"]["step"] == 5 for a in fwd),
          f"{name}: forward allocations {[(a['size'], a['birth']) for a in fwd]}")
    site = snap["sites"][max(fwd, key=lambda a: a["size"])["site"]]["frames"]
    check({"type": "python", "file": "resnet.py", "function": "<module>", "line": 54} in site,
          f"{name}: the op's Call stack reaches the user's line: {site}")
    imp = snap["import"]["devices"][0]
    check(imp["frees_from_before_window"] == 1, f"{name}: frees from before the window {imp}")


def check_inference(snap):
    name = "inference"
    well_formed(snap, name)
    dev = snap["devices"][0]
    check((dev["peak_bytes"], dev["peak_phase"], dev["peak_step"]) == ((3 << 20) + 65536 + 16384,
                                                                        "forward", 6),
          f"{name}: peak {dev}")
    check(dev["name"] == "Test MI300X" and dev["total_bytes"] == 1 << 36,
          f"{name}: device properties")
    imp = snap["import"]["devices"][0]
    check(imp["before_window_bytes"] == 3 << 20, f"{name}: weights from before the window {imp}")
    check([(t["phase"], t["step"]) for t in snap["timeline"]] == [("forward", 6)],
          f"{name}: timeline {snap['timeline']}")
    check(snap["steps"] == 6, f"{name}: steps {snap['steps']}")
    live = by_address(snap)
    check(set(live) == {None, "0x7000", "0x8000"}, f"{name}: live {sorted(map(str, live))}")
    check(live["0x8000"]["birth_time_s"] == live["0x7000"]["birth_time_s"] + 169.75e-6,
          f"{name}: fractional microseconds kept: {live['0x7000']['birth_time_s']} "
          f"{live['0x8000']['birth_time_s']}")


def check_forward_backward(snap):
    name = "forward_backward"
    well_formed(snap, name)
    peak_set_consistent(snap)
    devs = {d["device"]: (d["peak_bytes"], d["peak_phase"]) for d in snap["devices"]}
    check(devs == {0: (4096 + 8192 + 1024, "backward"), 1: (512 + 256, "backward")},
          f"{name}: peaks {devs}")
    check(snap["devices"][0]["reserved"]["peak_bytes"] == 2 << 20,
          f"{name}: reserved {snap['devices'][0]['reserved']}")
    live = by_address(snap)
    check(moment(live["0x100000"], "death") is None, f"{name}: a free requested, not completed")
    check(moment(live["0x103000"], "birth") == ("backward", 0, 2), f"{name}: 0x103000")
    check(snap["steps"] == 0 and [t["phase"] for t in snap["timeline"]] == ["forward", "backward"],
          f"{name}: timeline {snap['timeline']}")
    imp = snap["import"]["devices"][0]
    check(imp["before_window_bytes"] == 0, f"{name}: nothing from before the window {imp}")


def check_kineto_modules(snap, tmp):
    """Each allocation's path is the module calls around it, by class and instance counter;
    `report --json` bills them by path at the peak (the gradient's birth, in backward)."""
    name = "modules"
    well_formed(snap, name)
    peak_set_consistent(snap)
    check(snap["devices"][0]["peak_bytes"] == 1000 + 4096 + 2048 + 256 + 8192 + 1024 + 128 + 64
          + 16384 and snap["devices"][0]["peak_phase"] == "backward",
          f"{name}: the peak {snap['devices'][0]}")
    paths = {a["address"]: snap["module_paths"][a["module_path"]] if "module_path" in a else None
             for a in snap["allocations"]}
    check(paths == {"0x10": None, "0x100": "Net_0.Block_0.Linear_0",
                    "0x200": "Net_0.Block_0.Linear_1", "0x220": "Net_0.Block_0",
                    "0x300": "Net_0.Block_1.Linear_2", "0x400": "Net_0.Block_1.Linear_3",
                    "0x500": "Net_0", "0x700": "CrossEntropyLoss_0", "0x600": None},
          f"{name}: paths of the allocations live at the peak {paths}")
    path = os.path.join(tmp, "modules.pt.trace.json.vramtap.json")
    p = run(["report", "--json", path])
    if not check(p.returncode == 0, f"{name}: report --json: {p.stderr}"):
        return
    rows = {m["path"]: (m["bytes"], m["self_bytes"], m["saved_for_backward"])
            for m in json.loads(p.stdout)["devices"][0]["modules"]}
    check(rows == {"Net_0": (6400 + 9216 + 128, 128, 6400 + 9216 + 128),
                   "Net_0.Block_0": (6400, 256, 6400),
                   "Net_0.Block_0.Linear_0": (4096, 4096, 4096),
                   "Net_0.Block_0.Linear_1": (2048, 2048, 2048),
                   "Net_0.Block_1": (9216, 0, 9216),
                   "Net_0.Block_1.Linear_2": (8192, 8192, 8192),
                   "Net_0.Block_1.Linear_3": (1024, 1024, 1024),
                   "CrossEntropyLoss_0": (64, 64, 64),
                   None: (1000 + 16384, 0, 1000)},
          f"{name}: report --json modules[] (bytes, own bytes, saved for backward) {rows}")


def main():
    with tempdir() as tmp:
        def imported(name, expect):
            snap, p = import_file(fixture(name), tmp)
            if check(p.returncode == 0, f"{name}: import exit {p.returncode}: {p.stderr}"):
                expect(snap)
            return snap

        a = imported("synthetic.pt.trace.json", check_kineto)
        b = imported("synthetic_big.pt.trace.json.gz", check_kineto)
        if a and b:
            check([s["signature"] for s in a["sites"]] == [s["signature"] for s in b["sites"]],
                  "the same trace gives the same site signatures")
        imported("synthetic.pickle", check_pickle)
        imported("synthetic.pickle.gz", check_pickle)
        imported("kineto_2021.pt.trace.json", check_kineto_2021)
        imported("inference.pt.trace.json.gz", check_inference)
        imported("forward_backward.pickle.gz", check_forward_backward)
        imported("modules.pt.trace.json", lambda snap: check_kineto_modules(snap, tmp))
    done()


main()
