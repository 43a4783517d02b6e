"""Every recording in a folder imports, and its replayed peak equals the trace's own figure,
computed here independently of the importer:
  Kineto with running totals: the largest "Total Allocated" of each device, exactly;
  Kineto without them: the largest running sum of "Bytes" in time order, exactly;
  memory snapshot pickles: live bytes at the dump (the segments' active blocks) replayed
    backwards through the trace, within 0.5%;
  export_memory_timeline raw files: the largest running sum, exactly.
Phases and steps must be present where the trace records them. A Kineto trace recorded with
module scopes (with_modules=True) gives each allocation the path of the "nn.Module: CLASS_N"
events around it on its thread: the bytes live at the peak by path, computed here from the
trace, equal `report --json`'s modules[] own bytes.

    check_traces.py reference   the real recordings (skipped when they are not present)
    check_traces.py fixtures    the small recordings committed in tests/import/fixtures"""
import collections
import gzip
import json
import os
import pickle
import sys

from common import (check, done, fixture, fixture_maker, import_file, peak_set_consistent,
                    reference_traces, run, tempdir, well_formed)


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


class PlainData(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"{module}.{name} refused")


def expect_kineto(doc):
    """({device: expected peak}, has_totals)"""
    mem = [e for e in doc["traceEvents"]
           if e.get("name") == "[memory]" and e.get("args", {}).get("Device Type") in (1, 6)]
    mem.sort(key=lambda e: e["ts"])  # stable: file order breaks ties
    has_totals = all("Total Allocated" in e["args"] for e in mem)
    peaks = {}
    if has_totals:
        for e in mem:
            d = e["args"]["Device Id"]
            peaks[d] = max(peaks.get(d, 0), e["args"]["Total Allocated"])
        return peaks, True
    run = collections.Counter()
    low = collections.Counter()
    for e in mem:
        d = e["args"]["Device Id"]
        run[d] += e["args"]["Bytes"]
        low[d] = min(low[d], run[d])
        peaks[d] = max(peaks.get(d, 0), run[d])
    # a window that frees more than it allocated started with at least that much live
    return {d: p - low[d] for d, p in peaks.items()}, False


def expect_module_bytes(doc):
    """{device: {path: bytes}} live at each device's peak (the first event whose running total
    is the highest), each allocation's path made of the module calls whose span holds its event
    on its thread, outermost first; None for a trace without module calls."""
    calls = collections.defaultdict(list)
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "python_function" and \
                e.get("name", "").startswith("nn.Module: "):
            calls[(e["pid"], str(e["tid"]))].append((e["ts"], e["ts"] + e["dur"], e["name"][11:]))
    if not calls:
        return None
    mem = sorted((e for e in doc["traceEvents"] if e.get("name") == "[memory]" and
                  e.get("args", {}).get("Device Type") in (1, 6)), key=lambda e: e["ts"])
    top = collections.Counter()
    for e in mem:
        top[e["args"]["Device Id"]] = max(top[e["args"]["Device Id"]], e["args"]["Total Allocated"])
    live, out = collections.defaultdict(dict), {}
    for e in mem:
        a = e["args"]
        d = a["Device Id"]
        if a["Bytes"] > 0:
            around = sorted((c for c in calls[(e["pid"], str(e["tid"]))]
                             if c[0] <= e["ts"] <= c[1]), key=lambda c: (c[0], -c[1]))
            live[d][a["Addr"]] = (a["Bytes"], ".".join(c[2] for c in around) or None)
        else:
            live[d].pop(a["Addr"], None)
        if d not in out and a["Total Allocated"] == top[d]:
            out[d] = collections.Counter()
            for size, path in live[d].values():
                if path:
                    out[d][path] += size
    return out


def check_module_bytes(name, doc, snap_path):
    want = expect_module_bytes(doc)
    if want is None:
        return
    p = run(["report", "--json", snap_path])
    if not check(p.returncode == 0, f"{name}: report --json: {p.stderr}"):
        return
    for dev in json.loads(p.stdout)["devices"]:
        got = {m["path"]: m["self_bytes"] for m in dev["modules"] if m["path"] and m["self_bytes"]}
        check(got == dict(want.get(dev["device"], {})),
              f"{name}: device {dev['device']}: own bytes by module path {got}, "
              f"from the trace {dict(want.get(dev['device'], {}))}")


def expect_pickle(snap):
    peaks = {}
    live_end = collections.Counter()
    for seg in snap["segments"]:
        for b in seg["blocks"]:
            if b["state"] in ("active_allocated", "active_pending_free"):
                # the trace records requested sizes
                live_end[seg["device"]] += b.get("requested_size") or b["size"]
    for dev, trace in enumerate(snap["device_traces"]):
        live = peak = live_end[dev]
        for e in reversed(trace):
            if e["action"] == "alloc":
                live -= e["size"]
            elif e["action"] in ("free_completed", "free"):
                live += e["size"]
            peak = max(peak, live)
        if trace:
            peaks[dev] = peak
    return peaks


def expect_timeline(rows):
    run = peak = 0
    for _, _, nbytes, _ in rows:
        run += nbytes
        peak = max(peak, run)
    return {0: peak}


def recordings(which):
    """[(name, path)] of the recordings to check."""
    if which == "reference":
        folder = reference_traces()
        names = sorted(n for n in os.listdir(folder) if n != "README.md")
        check(len(names) >= 7, f"expected the 7 reference traces, found {len(names)}")
        return [(n, os.path.join(folder, n)) for n in names]
    names = sorted(n for n in fixture_maker().fixtures() if not n.startswith("broken/"))
    return [(n, fixture(n)) for n in names]


def main(which):
    with tempdir() as tmp:
        for name, path in recordings(which):
            data = read(path)
            snap, p = import_file(path, tmp)
            if not check(p.returncode == 0, f"{name}: import exit {p.returncode}: {p.stderr}"):
                continue
            well_formed(snap, name)
            peak_set_consistent(snap)
            got = {d["device"]: d["peak_bytes"] for d in snap["devices"]}
            phases = {a["birth"]["phase"] for a in snap["allocations"]} | \
                     {t["phase"] for t in snap["timeline"]}
            if data[:1] == b"\x80":
                want = expect_pickle(PlainData(__import__("io").BytesIO(data)).load())
                check(set(got) == set(want), f"{name}: devices {sorted(got)} != {sorted(want)}")
                for d, w in want.items():
                    check(abs(got.get(d, 0) - w) <= 0.005 * w,
                          f"{name}: device {d} peak {got.get(d)} not within 0.5% of {w}")
                check({"forward", "backward"} <= phases, f"{name}: phases {sorted(phases)}")
                check(snap["stacks"]["python"], f"{name}: Python stacks expected")
            elif data.lstrip()[:1] == b"{":
                doc = json.loads(data)
                want, totals = expect_kineto(doc)
                check(got == want, f"{name}: peaks {got} != {want}")
                if totals:
                    check_module_bytes(name, doc, os.path.join(
                        tmp, os.path.basename(path) + ".vramtap.json"))
                steps = sorted(int(e["name"].split("#")[1]) for e in doc["traceEvents"]
                               if e.get("name", "").startswith("ProfilerStep#")
                               and not e.get("cat", "").startswith("gpu_"))
                training = any(e.get("name", "").startswith("Optimizer.step#")
                               for e in doc["traceEvents"])
                want_phases = {"forward", "backward", "optimizer"} if training else {"forward"}
                check(want_phases <= phases, f"{name}: phases {sorted(phases)}")
                check(snap["phase_markers"], f"{name}: phase_markers")
                if steps:
                    births = {a["birth"]["step"] for a in snap["allocations"]
                              if not a["before_window"]}
                    check(births and min(births) >= steps[0] and max(births) <= steps[-1] + 1,
                          f"{name}: birth steps {sorted(births)} outside {steps}")
                    check(snap["steps"] == steps[-1] + training,
                          f"{name}: steps {snap['steps']}, profiler steps {steps}")
                lacks = snap["import"]["lacks"]
                if not totals:
                    check(any("running totals" in line for line in lacks),
                          f"{name}: lacks does not mention the totals: {lacks}")
                    check("lacks running totals" in p.stderr,
                          f"{name}: stderr does not say what it lacks: {p.stderr!r}")
                    check(any("addresses" in line for line in lacks),
                          f"{name}: lacks does not mention addresses")
            else:
                rows = json.loads(data)
                want = expect_timeline(rows)
                check(got == want, f"{name}: peaks {got} != {want}")
                check(not snap["phase_markers"], f"{name}: a raw timeline has no phases")
                cats = snap["import"]["devices"][0]["pytorch_categories_at_peak"]
                check(sum(cats.values()) == want[0], f"{name}: PyTorch categories {cats}")
                check(all("pytorch_category" in a for a in snap["allocations"]),
                      f"{name}: pytorch_category per allocation")
            print(f"{name}: peaks {got}, phases {sorted(phases)}, steps {snap['steps']}")
    done()


main(sys.argv[1])
