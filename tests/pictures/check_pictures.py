#!/usr/bin/python3
"""`vramtap view` and `vramtap export --perfetto` on the simulated training run, its
post-mortem, and imports of the committed Kineto and pickle fixtures; and a history of a million
events. Every figure is checked exactly against an independent replay of the snapshot's history
and against `vramtap report --json`.

    check_pictures.py sim | postmortem | imports | sparkline | modules | big"""
import json
import os
import random
import sys

from common import (CATS, check, cli, expect, finish, imported, load, page_data, replay,
                    report, report_categories, simulated, tmpdir, untimed_pickle)

MAX_POINTS = 3000
ALLOWED_PH = {"M", "C", "X", "i"}


def check_view(snap_path, html):
    snap, data, rep = load(snap_path), page_data(html), report(snap_path)
    where = os.path.basename(snap_path)
    replays = replay(snap)
    expect([d["device"] for d in data["devices"]], [d["device"] for d in snap["devices"]],
           where + ": devices drawn")
    for dev in data["devices"]:
        d = dev["device"]
        sdev = next(x for x in snap["devices"] if x["device"] == d)
        rdev = next(x for x in rep["devices"] if x["device"] == d)
        expect(dev["bill"], report_categories(rdev), "%s cuda:%d: the page's bill" % (where, d))
        expect(sum(dev["bill"]), rdev["live_bytes"], "%s cuda:%d: bill total" % (where, d))
        expect(dev["flame"]["value"], rdev["live_bytes"], "%s cuda:%d: flame root" % (where, d))
        expect(dev["flame"]["cats"], dev["bill"], "%s cuda:%d: flame root by category" % (where, d))
        for k, w in enumerate(dev["windows"]):
            states = replays[k].get(d)
            check(len(w["t"]) <= MAX_POINTS and all(len(c) == len(w["t"]) for c in w["cats"]),
                  "%s cuda:%d window %d: %d points" % (where, d, k, len(w["t"])))
            if not w["exact"]:
                check(states is None, "%s cuda:%d: a window that knows the device is inexact"
                      % (where, d))
                continue
            totals = [sum(c[i] for c in w["cats"]) for i in range(len(w["t"]))]
            known = set(states)
            bad = [(t, v) for t, v in zip(w["t"], totals) if (t, v) not in known]
            expect(bad[:3], [], "%s cuda:%d window %d: points that are no real moment"
                   % (where, d, k))
            live = [v for _, v in states]
            expect((min(totals), max(totals)), (min(live), max(live)),
                   "%s cuda:%d window %d: lowest and highest" % (where, d, k))
            expect(w["events"], len(states) - 1, "%s cuda:%d window %d: events" % (where, d, k))
            if w["start_s"] <= sdev["peak_time_s"] <= w["end_s"] and snap["kind"] != "oom":
                i = totals.index(max(totals))
                expect((w["t"][i], totals[i]), (sdev["peak_time_s"], sdev["peak_bytes"]),
                       "%s cuda:%d: the drawn peak" % (where, d))
                expect([c[i] for c in w["cats"]], dev["bill"],
                       "%s cuda:%d: categories at the drawn peak" % (where, d))
    return snap, data


def check_perfetto(snap_path, path):
    snap, rep = load(snap_path), report(snap_path)
    where = os.path.basename(path)
    doc = load(path)
    events = doc["traceEvents"]
    check(isinstance(events, list) and events, where + ": traceEvents")
    timed = (snap.get("import") or {}).get("times_recorded", True)
    expect((doc["otherData"]["times_recorded"], "no timestamps" in events[0]["args"]["name"]),
           (timed, not timed), where + ": whether the times are the recording's")
    for e in events:
        ok = (isinstance(e.get("name"), str) and e.get("ph") in ALLOWED_PH and
              isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int))
        if e.get("ph") != "M":
            ok = ok and isinstance(e.get("ts"), (int, float)) and e["ts"] >= 0
        if e.get("ph") == "X":
            ok = ok and isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0
        if e.get("ph") == "C":
            ok = ok and isinstance(e.get("args"), dict) and all(
                isinstance(v, int) and v >= 0 for v in e["args"].values())
        if e.get("ph") == "i":
            ok = ok and e.get("s") in ("g", "p", "t")
        if not ok:
            failures_add = "%s: not a valid trace event: %r" % (where, e)
            check(False, failures_add)
            break
    # an import that cannot say whether its device was a GPU calls it "device N", never "cuda:N"
    word = ("device " if snap.get("import", {}).get("device_named") is False else "cuda:")
    check(not any(e.get("name", "").startswith("cuda:") for e in events) or word == "cuda:",
          "%s: an unnamed device is called cuda:" % where)
    for sdev in snap["devices"]:
        d = sdev["device"]
        rdev = next(x for x in rep["devices"] if x["device"] == d)
        at = (snap["oom"]["time_s"] if snap["kind"] == "oom" else sdev["peak_time_s"]) * 1e6
        # the trace's own timestamp of that moment (its decimal form may differ in the last bit)
        near = [e["ts"] for e in events if e["ph"] == "C" and abs(e["ts"] - at) <= 1e-6 * at]
        at = near[-1] if near else at
        counters = [e for e in events if e["ph"] == "C" and e["name"] == "%s%d live bytes" % (word, d)
                    and e["ts"] == at]
        check(counters, "%s cuda:%d: no counter at the peak's timestamp" % (where, d))
        if counters:
            args = counters[-1]["args"]
            want = report_categories(rdev)
            expect(sum(args.values()), rdev["live_bytes"],
                   "%s cuda:%d: counters at the peak add up to" % (where, d))
            if snap["kind"] != "oom":
                expect(sum(args.values()), sdev["peak_bytes"],
                       "%s cuda:%d: counters at the peak = peak bytes" % (where, d))
            if rdev["view"] == "tensors":
                expect([args.get(k, 0) for k in CATS], want,
                       "%s cuda:%d: counters at the peak by category" % (where, d))
        peaks = [e for e in events if e["ph"] == "i" and e["name"] == "%s%d peak" % (word, d)]
        if snap["kind"] != "oom":
            expect([(e["ts"], e["args"]["peak_bytes"]) for e in peaks], [(at, sdev["peak_bytes"])],
                   "%s cuda:%d: the peak's instant event, at the counters' timestamp" % (where, d))
    check_slices(where, events, snap["timeline"])
    ooms = [e for e in events if e["ph"] == "i" and e["name"].endswith("out of memory")]
    want_ooms = len(snap["oom_events"]) or (1 if snap["kind"] == "oom" else 0)
    expect(len(ooms), want_ooms, where + ": out-of-memory instants")


def near_us(ts, seconds):
    """A trace timestamp (microseconds) is the snapshot's time in seconds, to the last bit."""
    return abs(ts - seconds * 1e6) <= 1e-9 * max(1.0, seconds * 1e6)


def check_slices(where, events, timeline):
    """One slice per phase instance on the phases track, one per step on the steps track, each
    where the snapshot's timeline puts it."""
    by_ts = lambda e: e["ts"]
    phases = sorted([e for e in events if e["ph"] == "X" and e["tid"] == 1], key=by_ts)
    expect([(e["name"], e["args"]["step"], e["args"]["instance"]) for e in phases],
           [(s["phase"], s["step"], s["instance"]) for s in timeline],
           where + ": one slice per phase instance")
    steps = []  # [step, start_s, end_s] of each run of instances with the same step
    for s in timeline:
        if steps and steps[-1][0] == s["step"]:
            steps[-1][2] = s["end_s"]
        else:
            steps.append([s["step"], s["start_s"], s["end_s"]])
    got = sorted([e for e in events if e["ph"] == "X" and e["tid"] == 2], key=by_ts)
    expect([(e["name"], e["args"]["step"]) for e in got],
           [("step %d" % k, k) for k, _, _ in steps], where + ": one slice per step")
    spans = [(s["start_s"], s["end_s"]) for s in timeline] + [(a, b) for _, a, b in steps]
    bad = [(e["name"], e["ts"], e["dur"], a, b) for e, (a, b) in zip(phases + got, spans)
           if not near_us(e["ts"], a) or (b is not None and not near_us(e["ts"] + e["dur"], b))]
    expect(bad[:3], [], where + ": slices where the timeline puts them")


def pictures(snap_path, out):
    base = os.path.join(out, os.path.basename(snap_path))
    cli("view", snap_path, "-o", base + ".html")
    cli("export", "--perfetto", snap_path, "-o", base + ".trace.json")
    check_perfetto(snap_path, base + ".trace.json")
    return check_view(snap_path, base + ".html")


def case_sim():
    out = tmpdir()
    snaps = simulated(out)
    expect(len(snaps), 1, "snapshots of the simulated run")
    for s in snaps:
        snap, data = pictures(s, out)
        windows = snap["history"]["windows"]
        expect([(w["reason"], w["devices"], w["truncated"]) for w in windows],
               [("first_steps", [0], False)], "the run's history: its first three steps")
        check(data["devices"][0]["windows"][0]["exact"], "the first steps are drawn exactly")
    # a snapshot cut down to some of its allocations (as gpu-validate does): the history no
    # longer matches, and is set aside rather than trusted or refused
    cut = load(snaps[0])
    cut["allocations"] = cut["allocations"][1:]
    path = os.path.join(out, "cut.json")
    with open(path, "w") as f:
        json.dump(cut, f)
    cli("report", path)
    cli("view", path, "-o", path + ".html")
    data = page_data(path + ".html")
    check(data["history_unused"] and "is in neither allocations nor history_allocations" in
          data["history_unused"], "a cut-down snapshot's history: %r" % data["history_unused"])
    expect(data["devices"][0]["windows"], [], "no window drawn from it")


def case_postmortem():
    out = tmpdir()
    snaps = simulated(out, ("--batch", "4"), {"STANDIN_CAPACITY": str(40 << 20)}, want_exit=1)
    pm = [s for s in snaps if ".oom" in s]
    expect(len(pm), 1, "post-mortems")
    for s in pm:
        _, data = pictures(s, out)
        expect(data["report"]["oom"]["size"], 4 << 20, "the page's failed request")


def case_imports():
    out = tmpdir()
    for f in ["synthetic.pt.trace.json", "kineto_2021.pt.trace.json", "inference.pt.trace.json.gz",
              "synthetic.pickle", "forward_backward.pickle.gz", "memory_timeline.raw.json"]:
        snap, _ = pictures(imported(f, out), out)
        expect(len(snap["history"]["windows"]), 1, f + ": one history window, the trace")
    snap, _ = pictures(untimed_pickle(out), out)
    expect(snap["import"]["times_recorded"], False, "untimed.pickle: imported without times")


def case_sparkline():
    """`vramtap report`'s line of live bytes per phase instance: one cell per instance of the
    timeline, its highest live bytes in eighths of the highest, the peak's instance marked."""
    out = tmpdir()
    snap_path = simulated(out)[0]
    snap = load(snap_path)
    dev = snap["devices"][0]
    tl = snap["timeline"]
    top = max(t["devices"][0]["live_max"] for t in tl)
    levels = [(t["devices"][0]["live_max"] * 8 - 1) // top for t in tl]
    peak = next(i for i, t in enumerate(tl) if t["start_s"] <= dev["peak_time_s"] <= t["end_s"])
    for flag, chars in (([], "▁▂▃▄▅▆▇█"), (["--ascii"], "_.-:=+*#")):
        lines = cli("report", *flag, snap_path).stdout.splitlines()
        i = next((k for k, l in enumerate(lines) if l.startswith("  timeline   ")), None)
        check(i is not None, "no sparkline in the report:\n" + "\n".join(lines))
        if i is None:
            continue
        cells = lines[i][13:13 + len(tl)]
        expect(cells, "".join(chars[v] for v in levels), "sparkline %s" % flag)
        expect(lines[i + 1], " " * (13 + peak) + "^ the peak", "the peak's mark %s" % flag)
    expect(len(tl), 9, "phase instances of three steps")


def group_of(a, groups, paths, listed):
    """The label of the group an allocation is drawn in (docs/modules.md, "The pictures"): the
    deepest group path at or above its module path; a path in none is "other modules"; memory
    the file names no path for is outside modules when listed at the peak, else "(path not
    recorded)" when the page has that group."""
    labels = [g["label"] for g in groups]
    if a.get("module_path") is None:
        unknown = "(path not recorded)"
        return unknown if not listed and unknown in labels else "(outside modules)"
    path, best = paths[a["module_path"]], None
    for g in groups:
        p = g["path"]
        if p is not None and (path == p or path.startswith(p + ".")):
            if best is None or len(p) > len(best["path"]):
                best = g
    return best["label"] if best else "other modules"


def replay_groups(snap, groups, device):
    """Live bytes of each group after each event of each window: [[(time_s, (bytes, ...))]]."""
    listed = {a["id"] for a in snap["allocations"]}
    allocs = {a["id"]: a for a in snap["allocations"] + snap.get("history_allocations", [])}
    labels = [g["label"] for g in groups]
    slot = {i: labels.index(group_of(a, groups, snap["module_paths"], i in listed))
            for i, a in allocs.items() if a["device"] == device}
    out = []
    for w in snap["history"]["windows"]:
        live = [0] * len(groups)
        for i, a in allocs.items():
            if i in slot and a["birth_seq"] < w["start_seq"] and (
                    a["death_seq"] is None or a["death_seq"] >= w["start_seq"]):
                live[slot[i]] += a["size"]
        states = [(w["start_s"], tuple(live))]
        for t, i, b in snap["history_events"][w["first_event"]:w["first_event"] + w["events"]]:
            if i in slot:
                live[slot[i]] += b
                states.append((t, tuple(live)))
        out.append(states)
    return out


def case_modules():
    """The simulated run with module paths (train_sim --modules: net.layers.L, net.head) and the
    import of a Kineto trace recorded with module scopes, drawn by module: the groups, their
    bytes at the peak against `report --json`'s modules[], every point of the chart against an
    independent replay by group, the module flame graph, and the Perfetto counters by group. A
    snapshot without paths refuses --by module."""
    out = tmpdir()
    snaps = simulated(out, ("--batch", "4", "--steps", "3", "--modules"))
    expect(len(snaps), 1, "snapshots of the simulated run with modules")
    groups, rows = by_module(snaps[0], out)
    # five path groups fit: net splits into net.layers and net.head, net.layers into its layers
    layers = sorted((p for p in rows if p and p.startswith("net.layers.")),
                    key=lambda p: (-rows[p]["bytes"], p))
    cut = sorted(layers + ["net.head"], key=lambda p: (-rows[p]["bytes"], p))
    expect([g["label"] for g in groups], cut + ["(outside modules)"], "the module groups")
    # the memory freed before the peak names its module too. train_sim.c, per layer L under
    # net.layers.L: in each of the 3 steps' forward B x 512 KiB of activations and a 1 MiB
    # workspace, in each backward a 2 MiB workspace, in the first backward the 4 MiB gradient;
    # under net.head, each forward's B x 128 KiB output. Every other allocation is made outside.
    snap = load(snaps[0])
    expect(snap["history"].get("module_paths"), True, "the history says its paths are recorded")
    made, outside = {}, set()
    for a in snap["allocations"] + snap["history_allocations"]:
        if a.get("module_path") is None:
            outside.add(a["birth"]["phase"])
            continue
        key = (snap["module_paths"][a["module_path"]], a["birth"]["phase"], a["size"])
        made[key] = made.get(key, 0) + 1
    want = {("net.head", "forward", 4 * 128 * 1024): 3}
    for l in range(4):
        path = "net.layers.%d" % l
        want.update({(path, "forward", 4 * 512 * 1024): 3, (path, "forward", 1024 * 1024): 3,
                     (path, "backward", 2 * 1024 * 1024): 3, (path, "backward", 4 << 20): 1})
    expect(made, want, "allocations live at the peak or in the history, by path, phase and size")
    expect(outside, {"setup", "forward", "optimizer", "other"},
           "the phases of allocations made outside every module (forward: the lazy cache)")
    # a file of an earlier version: its history's allocations carry no paths, and say so not
    del snap["history"]["module_paths"]
    for a in snap["history_allocations"]:
        a.pop("module_path", None)
    older = os.path.join(out, "older.json")
    with open(older, "w") as f:
        json.dump(snap, f)
    groups, _ = by_module(older, out)
    expect([g["label"] for g in groups], cut + ["(path not recorded)", "(outside modules)"],
           "the module groups of a file whose history names no paths")
    # an import names every path: no "(path not recorded)"; Net_0 and Block_0 split with a rest
    groups, _ = by_module(imported("modules.pt.trace.json", out), out)
    expect([g["label"] for g in groups],
           ["Net_0.Block_1.Linear_2", "Net_0.Block_0.Linear_0", "Net_0.Block_0 (rest)",
            "Net_0.Block_1.Linear_3", "Net_0 (rest)", "CrossEntropyLoss_0", "(outside modules)"],
           "the module groups of the import")
    os.makedirs(os.path.join(out, "plain"))
    plain = simulated(os.path.join(out, "plain"))[0]
    p = cli("view", "--by", "module", plain, "-o", os.path.join(out, "plain.html"), want=2)
    check("names no nn.Module paths" in p.stderr, "--by module without paths: %r" % p.stderr)
    check(not os.path.exists(os.path.join(out, "plain.html")), "no page without paths")


def by_module(snap_path, out):
    """Checks the page and trace by module of one snapshot; returns the page's groups and the
    report's rows by path."""
    where = os.path.basename(snap_path)
    snap, rep = load(snap_path), report(snap_path)
    html, trace = os.path.join(out, where + ".html"), os.path.join(out, where + ".trace.json")
    cli("view", "--by", "module", snap_path, "-o", html)
    cli("export", "--perfetto", "--by", "module", snap_path, "-o", trace)
    data = page_data(html)
    expect(data["by"], "module", where + ": the page opens grouped by module")
    dev, rdev = data["devices"][0], rep["devices"][0]
    rows = {m["path"]: m for m in rdev["modules"]}
    groups = dev["module_groups"]
    want = {}
    for g in groups:
        p = g["path"]
        if p is not None:  # a group marked rest leaves out the groups below it
            want[g["label"]] = rows[p]["bytes"] - sum(
                h["peak_bytes"] for h in groups if h["path"] and h["path"].startswith(p + "."))
            expect(g["rest"], any(h["path"] and h["path"].startswith(p + ".") for h in groups),
                   "%s: %s marked rest when groups lie below it" % (where, g["label"]))
    want["(outside modules)"] = rows[None]["bytes"]
    if "(path not recorded)" in [g["label"] for g in groups]:
        want["(path not recorded)"] = 0
    expect({g["label"]: g["peak_bytes"] for g in groups}, want,
           where + ": each group's bytes at the peak = the report's row")
    expect(sum(g["peak_bytes"] for g in groups), rdev["live_bytes"], where + ": the groups add up")
    sdev = snap["devices"][0]
    for k, (w, states) in enumerate(zip(dev["windows"], replay_groups(snap, groups, 0))):
        n = len(w["t"])
        expect([len(c) for c in w["groups"]], [n] * len(groups),
               "%s window %d: a column per group" % (where, k))
        points = [(w["t"][i], tuple(c[i] for c in w["groups"])) for i in range(n)]
        bad = [p for p in points if p not in set(states)]
        expect(bad[:3], [], "%s window %d: points by group that are no real moment" % (where, k))
        expect([sum(v) for _, v in points], [sum(c[i] for c in w["cats"]) for i in range(n)],
               "%s window %d: by group and by category, the same totals" % (where, k))
        if w["start_s"] <= sdev["peak_time_s"] <= w["end_s"]:
            i = w["t"].index(sdev["peak_time_s"])
            expect([c[i] for c in w["groups"]], [g["peak_bytes"] for g in groups],
                   "%s window %d: groups at the drawn peak" % (where, k))
    flame = {}

    def walk(n):
        for c in n["children"]:
            flame[c["path"]] = c["value"]
            walk(c)
    walk(dev["module_flame"])
    expect(dev["module_flame"]["value"], rdev["live_bytes"], where + ": module flame root")
    expect(flame, {p: m["bytes"] for p, m in rows.items() if m["bytes"]},
           where + ": module flame: every path's bytes = the report's")
    events = load(trace)["traceEvents"]
    counters = [e for e in events if e["ph"] == "C"]
    expect({tuple(e["args"]) for e in counters}, {tuple(g["label"] for g in groups)},
           where + ": Perfetto: one counter argument per group")
    peak = [e["args"] for e in counters if near_us(e["ts"], sdev["peak_time_s"])]
    expect(peak[-1:], [{g["label"]: g["peak_bytes"] for g in groups}],
           where + ": Perfetto: the counters at the peak")
    moments = {v for states in replay_groups(snap, groups, 0) for _, v in states}
    bad = [e["args"] for e in counters
           if tuple(e["args"][g["label"]] for g in groups) not in moments]
    expect(bad[:3], [], where + ": Perfetto: counters by group that are no real moment")
    return groups, rows


def case_big(nevents=100000):
    """Many events (a million with --events 1000000; fewer by default to keep the suite
    quick: the page's size depends on the points drawn, not on the events): the page stays
    under 10 MB and draws at most MAX_POINTS points per series, keeping the highest moment
    exactly."""
    out = tmpdir()
    rng = random.Random(13)
    allocs, events, live, t = [], [], {}, 0.0
    nid = 0
    for _ in range(nevents):
        t += 1e-5
        if live and (len(live) > 400 or rng.random() < 0.5):
            i = rng.choice(list(live)) if len(live) < 50 else next(iter(live))
            events.append([round(t, 6), i, -live.pop(i)])
        else:
            size = rng.randrange(1, 1 << 20)
            live[nid] = size
            allocs.append({"id": nid, "device": 0, "size": size, "address": None, "api": "cudaMalloc",
                           "kind": "device", "birth_time_s": round(t, 6), "birth_seq": nid * 2 + 1,
                           "birth": {"phase": "forward", "step": 0, "instance": 1}, "site": None})
            events.append([round(t, 6), nid, size])
            nid += 1
    frees = {e[1]: e for e in events if e[2] < 0}
    for a in allocs:
        f = frees.get(a["id"])
        a["death_seq"] = a["birth_seq"] + 1 if f else None
        a["death_time_s"] = f[0] if f else None
        a["death"] = {"phase": "forward", "step": 0, "instance": 1} if f else None
    running, best, best_t = 0, 0, 0.0
    for e in events:
        running += e[2]
        if running > best:
            best, best_t = running, e[0]
    alive = [a for a in allocs if a["death"] is None]
    snap = {"format": "vramtap-snapshot", "version": 1, "kind": "exit", "prog": "big", "pid": 1,
            "end_time_s": t, "phase_markers": True, "steps": 0, "command": None, "rank": None,
            "counters": {"dropped": 0, "unknown_frees": 0},
            "devices": [{"device": 0, "name": None, "total_bytes": None, "peak_bytes": sum(a["size"] for a in alive),
                         "peak_time_s": t, "peak_phase": "forward", "peak_step": 0,
                         "used_at_peak_bytes": None, "reserved": None}],
            "allocations": alive, "sites": [], "timeline": [], "oom_events": [],
            "history": {"steps": None, "max_events": 1000000, "dropped": 0,
                        "windows": [{"reason": "trace", "devices": [0], "start_s": 0.0, "end_s": t,
                                     "start_seq": 1, "first_event": 0, "events": len(events),
                                     "truncated": False}]},
            "history_allocations": [a for a in allocs if a["death"] is not None],
            "history_events": events}
    path = os.path.join(out, "big.json")
    with open(path, "w") as f:
        json.dump(snap, f)
    html = os.path.join(out, "big.html")
    cli("view", path, "-o", html)
    size = os.path.getsize(html)
    check(size < 10 << 20, "a million-event page is %d bytes" % size)
    data = page_data(html)
    w = data["devices"][0]["windows"][0]
    totals = [sum(c[i] for c in w["cats"]) for i in range(len(w["t"]))]
    check(1000 <= len(totals) <= MAX_POINTS, "%d points drawn" % len(totals))
    expect(max(totals), best, "the highest moment of a million events")
    expect(w["t"][totals.index(max(totals))], best_t, "when it was")
    expect(w["events"], len(events), "events in the window")
    print("big: %d events, page %d bytes, %d points" % (len(events), size, len(totals)))


if __name__ == "__main__":
    if sys.argv[1:3] == ["big", "--events"]:
        case_big(int(sys.argv[3]))
    else:
        globals()["case_" + sys.argv[1]]()
    finish()
