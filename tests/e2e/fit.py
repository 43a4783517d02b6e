#!/usr/bin/python3
"""`vramtap fit` over the simulated training job: its activations grow linearly with the batch,
and it prints the bill and each phase's peak it knows it made, so every prediction is checked
against a run at that batch size, and the largest batch that fits against the stand-in's
out-of-memory at an exact capacity.

    fit.py linear      fitted from batches 2 and 4, the bill at 16 equals the run at 16
    fit.py capacity    the largest batch that fits runs; one more fails for lack of memory
    fit.py moved       the peak moves from the optimizer step to backward as the batch grows
    fit.py warnings    runs that disagree with the model; X from the run record; bad usage
    fit.py report      `vramtap report`: each phase's peak, as the job counted it
"""
import json
import math
import os
import subprocess
import sys

import e2e
from e2e import CLI, expect, failures, report_json, run_sim

MiB = 1 << 20
CATS = ["parameters", "gradients", "optimizer_state", "activations", "temporary"]


def sim(batch, *extra, env=None, want_exit=0):
    """(the job's own account, its snapshot) at one batch size."""
    want, snap, _ = run_sim(["--batch", str(batch), *extra], env, want_exit=want_exit)
    if want_exit == 0 and not snap:
        failures.append("batch %d: no snapshot written" % batch)
    return want, snap


def fit(*args, want_exit=0):
    p = subprocess.run([CLI, "fit", *args], capture_output=True, text=True, timeout=300)
    expect(p.returncode, want_exit, "vramtap fit %s: exit status (stderr %r)" % (args, p.stderr))
    return p


def fit_json(*args):
    try:
        return json.loads(fit("--json", *args).stdout)["devices"][0]
    except (json.JSONDecodeError, KeyError, IndexError) as e:
        failures.append("vramtap fit --json %s: %s" % (args, e))
        return {}


def bill_of(want):
    return {c: want.get(c, 0) for c in CATS}


def linear():
    w2, s2 = sim(2)
    w4, s4 = sim(4)
    w16, s16 = sim(16)
    f = fit_json(s2 + "=2", s4 + "=4", "--predict", "16")
    # the slope is what the job itself says one more sample of the batch costs
    expect(f.get("fit", {}).get("activations", {}).get("per_unit_bytes"),
           (w4["activations"] - w2["activations"]) // 2, "activations per unit of batch")
    expect(f.get("fit", {}).get("activations", {}).get("growth"), "linear", "activations growth")
    for c in ("parameters", "gradients", "optimizer_state", "temporary"):
        expect(f.get("fit", {}).get(c), {"fixed_bytes": w2[c], "per_unit_bytes": 0,
                                         "per_unit2_bytes": 0, "growth": "fixed"}, "fit of " + c)
    p = f.get("predicted", {})
    measured = report_json(s16)["devices"][0]
    expect(p.get("peak_bytes"), w16["peak"], "predicted peak at 16 = the job's own peak at 16")
    expect(p.get("peak_bytes"), measured.get("peak_bytes"), "predicted peak at 16 = measured")
    expect(p.get("phase"), measured.get("peak", {}).get("phase"), "predicted phase at 16")
    expect(p.get("categories"), dict(bill_of(w16), unattributed=0), "predicted bill at 16")
    for phase in ("backward", "optimizer"):
        expect(p.get("phases", {}).get(phase), w16["phase:" + phase],
               "predicted %s peak at 16" % phase)
    expect(f.get("warnings"), [], "warnings on two consistent runs")
    text = fit(s2 + "=2", s4 + "=4", "--predict", "16").stdout
    line = "at X=16: peak %.2f MiB in backward" % (w16["peak"] / MiB)
    expect(line in text, True, "the human output says %r:\n%s" % (line, text))
    # three runs on one line: linear (not quadratic), nothing off it
    f3 = fit_json(s2 + "=2", s4 + "=4", s16 + "=16")
    expect(f3.get("fit", {}).get("activations", {}).get("growth"), "linear",
           "three runs on a line: linear")
    expect(f3.get("phases", {}).get("backward", {}).get("per_unit2_bytes"), 0,
           "three runs on a line: no X^2 term")
    expect(f3.get("warnings"), [], "warnings on three runs on a line")


def check_largest(f, budget, context, label):
    """The largest batch the fit names runs within `budget` bytes of device memory (the
    stand-in fails allocations beyond it, the context taking its share); one more does not."""
    largest = f.get("largest_fitting")
    expect(isinstance(largest, int) and largest > 4, True, label + ": largest_fitting %r" % largest)
    if not isinstance(largest, int):
        return
    env = {"STANDIN_CAPACITY": str(budget), "STANDIN_CONTEXT_BYTES": str(context)}
    want, snap = sim(largest, env=env)
    at = f.get("at_largest_fitting") or {}
    expect(at.get("peak_bytes"), want.get("peak"), label + ": predicted peak at the largest")
    expect(at.get("used_bytes"), want.get("peak", 0) + context,
           label + ": predicted device used at the largest")
    sim(largest + 1, env=env, want_exit=1)


def capacity():
    cap, context = 128 * MiB, 8 * MiB
    env = {"STANDIN_CAPACITY": str(cap), "STANDIN_CONTEXT_BYTES": str(context)}
    _, s2 = sim(2, env=env)
    _, s4 = sim(4, env=env)
    # the default: the device's capacity from the snapshots, 5% kept free
    f = fit_json(s2 + "=2", s4 + "=4")
    budget = cap - math.ceil(cap * 5 / 100)
    expect((f.get("capacity_bytes"), f.get("headroom_pct"), f.get("budget_bytes")),
           (cap, 5.0, budget), "default capacity and headroom")
    expect(f.get("gaps"), {"reserved_ratio": None, "used_extra_bytes": context},
           "device used beyond the tensors: the stand-in's context")
    check_largest(f, budget, context, "default capacity")
    # --capacity and --headroom
    f = fit_json(s2 + "=2", s4 + "=4", "--capacity", "200MiB", "--headroom", "10")
    budget = 200 * MiB - 20 * MiB
    expect((f.get("capacity_bytes"), f.get("budget_bytes")), (200 * MiB, budget),
           "--capacity 200MiB --headroom 10")
    check_largest(f, budget, context, "--capacity 200MiB --headroom 10")


def moved():
    # a 20 MiB optimizer workspace: the optimizer step is the peak at small batches, backward
    # (whose activations grow) at large ones
    ws = ("--opt-workspace", "20")
    runs = {b: sim(b, *ws) for b in (2, 4, 6, 12, 16)}
    phase = {b: report_json(s)["devices"][0].get("peak", {}).get("phase")
             for b, (_, s) in runs.items()}
    expect([phase[b] for b in (2, 4, 6, 12, 16)],
           ["optimizer", "optimizer", "optimizer", "backward", "backward"], "measured peak phases")

    def arg(b):
        return "%s=%d" % (runs[b][1], b)

    # both runs peak in the optimizer step; at 16 the backward peak has overtaken it
    f = fit_json(arg(2), arg(4), "--predict", "16")
    p = f.get("predicted", {})
    expect((p.get("phase"), p.get("peak_bytes")), ("backward", runs[16][0]["peak"]),
           "fitted where the optimizer dominates, predicted at 16")
    expect(p.get("categories"), None, "no categories where no run measured them")
    expect(f.get("fit_phase"), "optimizer", "categories fitted at the optimizer peak")
    # a pair whose peaks fall in different phases: the categories at the backward peak (the
    # largest X's) come from run 16's own peak and from run 4's allocation history, so the
    # bill is predicted where backward dominates, exactly
    for x in (6, 12):
        f = fit_json(arg(4), arg(16), "--predict", str(x))
        p = f.get("predicted", {})
        expect((p.get("phase"), p.get("peak_bytes")), (phase[x], runs[x][0]["peak"]),
               "fitted from 4 and 16, predicted at %d" % x)
        expect(p.get("categories"),
               dict(bill_of(runs[x][0]), unattributed=0) if phase[x] == "backward" else None,
               "the bill predicted at %d" % x)
    expect(f.get("peak_moved"), True, "peak_moved")
    expect(f.get("fit_phase"), "backward", "categories fitted at the backward peak")
    expect(f.get("fit", {}).get("activations", {}).get("growth"), "linear",
           "activations fitted across runs whose peaks differ: %r" % f.get("fit"))
    expect(any("moved between phases: backward at X=16; optimizer at X=4" in a
               for a in f.get("assumptions", [])), True,
           "the assumptions say the peak moved: %r" % f.get("assumptions"))
    expect(any("fitted at the backward peak (X=4 from its allocation history, X=16)" in a
               for a in f.get("assumptions", [])), True,
           "the assumptions say where the categories come from: %r" % f.get("assumptions"))


def with_record(snap, batch, out):
    """A copy of snap whose run record holds the batch size, as the PyTorch hooks write it."""
    doc = json.loads(subprocess.check_output([CLI, "export", "--json", snap]))
    doc["run_record"] = {"batch_size": batch}
    path = os.path.join(out, "rec%d.json" % batch)
    with open(path, "w") as fh:
        json.dump(doc, fh)
    return path


def warnings():
    _, s2 = sim(2)
    _, s4 = sim(4)
    _, s8 = sim(8)
    _, l5 = sim(4, "--layers", "5")
    f = fit_json(s2 + "=2", l5 + "=4")
    for c, label in (("parameters", "parameters"), ("gradients", "gradients"),
                     ("optimizer_state", "optimizer state")):
        expect(any(w.startswith(label + " changed between the runs")
                   for w in f.get("warnings", [])), True,
               "a fifth layer: %s changed (%r)" % (c, f.get("warnings")))
    # the run at batch 8 said to be at 12: off the line (and bending down, so not a parabola)
    f = fit_json(s2 + "=2", s4 + "=4", s8 + "=12")
    expect(f.get("fit", {}).get("activations", {}).get("growth"), "linear",
           "a run off the line: still linear")
    expect(any(w.startswith("activations: the run at X=") and "off the fitted line" in w
               for w in f.get("warnings", [])), True,
           "a run off the line is named (%r)" % f.get("warnings"))
    # X from the run record
    out = e2e.tmpdir("vt-fit-")
    r4, r8 = with_record(s4, 4, out), with_record(s8, 8, out)
    f = fit_json(r4, r8)
    expect([r.get("x") for r in f.get("runs", [])], [4, 8], "X from the run record")
    text = fit(r4, r8).stdout
    expect("X=4 %s (batch size from the run record)" % r4 in text, True,
           "the heading says where X came from:\n" + text)
    # bad usage: exit 2, one line
    for args, fragment in (([s4 + "=4", s8 + "=4"], "every run has X = 4"),
                           ([s4, s8 + "=8"], "no X given"),
                           ([s4 + "=4"], "needs two or more snapshots"),
                           ([s4 + "=4", s8 + "=8", "--capacity", "12XB"], "--capacity"),
                           ([s4 + "=4", s8 + "=x8"], "whole number"),
                           ([s4 + "=4", s8 + "=8", "--device", "3"], "no device 3")):
        p = fit(*args, want_exit=2)
        lines = p.stderr.splitlines()
        expect(len(lines) == 1 and lines[0].startswith("vramtap fit: ") and fragment in lines[0]
               and not p.stdout, True, "%s: one line naming %r, got %r" % (args, fragment, p.stderr))


def report():
    """The report's per-phase peaks are the job's own: the largest live bytes in each phase."""
    for extra, peak_phase in (((), "backward"), (("--opt-workspace", "20"), "optimizer")):
        want, snap = sim(4, *extra)
        got = report_json(snap)["devices"][0].get("phase_peaks", {})
        expect({p: (got.get(p) or {}).get("bytes") for p in ("forward", "backward", "optimizer")},
               {p: want["phase:" + p] for p in ("forward", "backward", "optimizer")},
               "phase peaks %s" % (extra,))
        expect(max(want["phase:" + p] for p in ("forward", "backward", "optimizer")),
               want["peak"], "the largest phase peak is the peak")
        rows = [l.split() for l in e2e.cli(["report", snap]).splitlines()]
        marked = [r[0] for r in rows if r[-3:] == ["<-", "the", "peak"]]
        expect(marked, [peak_phase], "the row marked as the peak %s" % (extra,))
        shown = {r[0]: int(float(r[r.index("MiB") - 1]) * MiB) for r in rows
                 if r[:1] in (["forward"], ["backward"], ["optimizer"]) and "MiB" in r[:4]
                 and r[r.index("MiB") + 1] == "step"}
        expect(shown, {p: want["phase:" + p] for p in ("forward", "backward", "optimizer")},
               "phase peaks in the human report %s" % (extra,))
    _, snap = sim(4, "--no-markers")
    expect(report_json(snap)["devices"][0].get("phase_peaks"),
           {"forward": None, "backward": None, "optimizer": None}, "no markers: no phase peaks")
    expect("by phase" in e2e.cli(["report", snap]), False, "no markers: no phase peaks shown")


def main():
    what = sys.argv[1]
    {"linear": linear, "capacity": capacity, "moved": moved, "warnings": warnings,
     "report": report}[what]()
    e2e.finish("fit " + what)


if __name__ == "__main__":
    main()
