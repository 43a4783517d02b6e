"""What an imported recording could not tell is said by `vramtap report`, in text and --json, and
counted as a lower bound: memory live before the recording began (the run's peak may have come
earlier), memory the recording may miss (a Kineto trace without running totals, a pickle without
the dump's segments), times the importer had to invent (a pickle without timestamps: no time is
shown), a device the trace does not name (a memory timeline: a GPU or the CPU, never "cuda:0");
the import summary names no phase a trace without phases never ran; several imports in one
report are named by file, not "pid -1"; diff calls their environment unknown, not the same.

    check_gaps.py fixtures     the committed fixtures (and variants made from make.py's)
    check_gaps.py reference    the reference recordings, skipped where they are absent"""
import json
import os
import pickle
import re
import sys

from common import check, done, fixture, fixture_maker, import_file, reference_traces, run, tempdir

WIDE = dict(os.environ, COLUMNS="400")  # one line per sentence: nothing wrapped
BOUND = ": every figure below is a lower bound"
MISSING = ("memory live in the recording may be missing from it (what the trace lacks, above)")


def began(size):
    return (f"the recording began with {size} already live (allocated before it), so the run's "
            "peak may have come before the recording")


def imported(path, tmp):
    snap, p = import_file(path, tmp)
    check(p.returncode == 0, f"import {path}: exit {p.returncode}: {p.stderr}")
    return snap, p, os.path.join(tmp, os.path.basename(path) + ".vramtap.json")


def reports(out):
    text = run(["report", out], env=WIDE)
    js = run(["report", "--json", out])
    check(text.returncode == 0 and js.returncode == 0, f"report {out}: {text.stderr}{js.stderr}")
    return text.stdout, json.loads(js.stdout or "null")


def block(text):
    """The lines between the run line and the first device."""
    lines = text.splitlines()
    return lines[2:lines.index("")] if "" in lines else lines[2:]


def said(name, text, doc, snap, warning):
    """The lacks block and the warning are exactly what the snapshot holds."""
    lacks = snap["import"]["lacks"]
    want = (["  the trace lacks (so vramtap import said)"] if lacks else []) + \
        ["    - " + l for l in lacks] + (["  warning: " + warning + BOUND] if warning else [])
    check(block(text) == want, f"{name}: the lines under the run line\n{block(text)}\nwant\n{want}")
    check(doc["lower_bound"] == bool(warning), f"{name}: lower_bound {doc['lower_bound']}")
    check(doc["import"]["lacks"] == lacks and doc["import"]["source"] == snap["import"]["source"]
          and doc["import"]["format"] == snap["import"]["format"],
          f"{name}: --json import {doc['import']}")


def fixtures():
    mk = fixture_maker()
    with tempdir() as tmp:
        # A 2021 Kineto trace: no running totals, no addresses, a free from before the window.
        snap, _, out = imported(fixture("kineto_2021.pt.trace.json"), tmp)
        text, doc = reports(out)
        said("kineto_2021", text, doc, snap, began("2.00 KiB") + "; and " + MISSING)
        check([l.split(":")[0] for l in snap["import"]["lacks"]] == ["addresses", "running totals"],
              f"kineto_2021 lacks {snap['import']['lacks']}")
        check({k: doc["import"][k] for k in ("times_recorded", "device_named", "misses_memory",
                                             "before_window_bytes")}
              == {"times_recorded": True, "device_named": True, "misses_memory": True,
                  "before_window_bytes": 2048}, f"kineto_2021 --json import {doc['import']}")

        # Running totals that know 3 MiB from before the window; nothing lacking.
        snap, _, out = imported(fixture("inference.pt.trace.json.gz"), tmp)
        text, doc = reports(out)
        said("inference", text, doc, snap, began("3.00 MiB"))
        check(doc["import"]["before_window_bytes"] == 3145728 and not doc["import"]["misses_memory"],
              f"inference --json import {doc['import']}")

        # Everything recorded from the start: no warning, not a lower bound.
        snap, _, out = imported(fixture("forward_backward.pickle.gz"), tmp)
        text, doc = reports(out)
        said("forward_backward", text, doc, snap, None)
        check(doc["import"]["before_window_bytes"] == 0 and doc["duration_s"] is not None
              and doc["devices"][0]["peak"]["time_s"] is not None,
              f"forward_backward: times shown, nothing before the window {doc['import']}")

        # A memory timeline names no device: never shown as cuda:0; no phases, so no "setup".
        snap, p, out = imported(fixture("memory_timeline.raw.json"), tmp)
        summary = p.stdout.splitlines()
        check(summary[1:2] == ["  device 0: peak 144000 bytes (0.1 MiB), step 0 (the trace has no "
                               "phases); 80000 bytes from before the recording"],
              f"timeline import summary {summary}")
        text, doc = reports(out)
        said("memory_timeline", text, doc, snap, began("78.12 KiB"))
        check("\ndevice 0  (a GPU or the CPU: the trace does not say)\n" in text
              and "cuda:" not in text, f"memory_timeline: the device title\n{text}")
        check(doc["import"]["device_named"] is False, f"timeline --json import {doc['import']}")
        check("import a recording that has phases (a Kineto trace with profiler steps, a memory "
              "snapshot with Python stacks) or run the job under 'vramtap run'" in text
              and "NVTX" not in text, f"memory_timeline: markers cannot be added to a trace\n{text}")

        # A pickle without timestamps: the importer puts the events in order; no time is shown.
        base = mk.pickle_snapshot()
        for trace in base["device_traces"]:
            for e in trace:
                e.pop("time_us", None)
        path = os.path.join(tmp, "notime.pickle")
        with open(path, "wb") as f:
            pickle.dump(base, f, protocol=mk.PROTOCOL)
        snap, _, out = imported(path, tmp)
        text, doc = reports(out)
        said("notime", text, doc, snap, began("6.84 KiB"))
        lines = text.splitlines()
        check(lines[1] == "  run       1 step", f"notime: the run line {lines[1]!r}")
        check("  peak        15.72 KiB, backward of step 0" in lines
              and "  #1: 1.00 GiB asked on cuda:0 via pytorch, optimizer of step 0: no retry "
                  "succeeded" in lines and not re.search(r"\d s\b", text),
              f"notime: no time in the report\n{text}")
        check((doc["duration_s"], doc["devices"][0]["peak"]["time_s"],
               [e["time_s"] for e in doc["oom_events"]], doc["import"]["times_recorded"])
              == (None, None, [None], False), f"notime --json: times {doc}")
        # the same recording with its timestamps shows them
        snap, _, out = imported(fixture("synthetic.pickle"), tmp)
        text, doc = reports(out)
        said("synthetic", text, doc, snap, began("6.84 KiB"))
        check(text.splitlines()[1] == "  run       0.00 s, 1 step"
              and doc["devices"][0]["peak"]["time_s"] == 2e-05 and doc["import"]["times_recorded"],
              f"synthetic: times shown\n{text}")

        # A pickle without the dump's segments may miss memory from before the window.
        base = mk.pickle_snapshot()
        base["segments"] = []
        path = os.path.join(tmp, "nosegments.pickle")
        with open(path, "wb") as f:
            pickle.dump(base, f, protocol=mk.PROTOCOL)
        snap, _, out = imported(path, tmp)
        text, doc = reports(out)
        before = doc["import"]["before_window_bytes"]
        check(before == 3000 and doc["import"]["misses_memory"],
              f"nosegments --json import {doc['import']}")
        said("nosegments", text, doc, snap, began("2.93 KiB") + "; and " + MISSING)

        # Several imports in one report: each row ends with its file; none says pid -1.
        outs = [os.path.join(tmp, n + ".vramtap.json") for n in
                ("kineto_2021.pt.trace.json", "synthetic.pickle", "memory_timeline.raw.json")]
        r = run(["report"] + outs, env=WIDE)
        rows = [l for l in r.stdout.splitlines() if l.rstrip().endswith(".vramtap.json")
                and not l.lstrip().startswith("heaviest")]
        check(sorted(l.split()[-1] for l in rows) == sorted(outs)
              and all(l.split()[2] == ("4100" if "kineto" in l else "-") for l in rows),
              f"several imports: rows named by file\n{r.stdout}")
        check(f"  heaviest  {outs[2]}: 140.62 KiB on device 0" in r.stdout.splitlines(),
              f"several imports: the heaviest named by file\n{r.stdout}")
        procs = json.loads(run(["report", "--json"] + outs).stdout)["processes"]
        check(sorted((p["file"], p["pid"]) for p in procs)
              == sorted([(outs[0], 4100), (outs[1], None), (outs[2], None)]),
              f"several imports --json: {[(p['file'], p['pid']) for p in procs]}")
        # Imports record no environment: diff says unknown, never "the same allocator settings".
        r = run(["diff", outs[0], outs[1]])
        check(r.stdout.splitlines()[2:4] == ["  command   unknown (neither snapshot records it)",
                                             "  env       unknown (neither snapshot records it)"],
              f"diff of two imports: command and env\n{r.stdout}")
        check(json.loads(run(["diff", "--json", outs[0], outs[1]]).stdout)["env"] is None,
              "diff --json of two imports: env null")

    # A run's own snapshot is no import.
    _, doc = reports(os.path.join(os.environ["VT_SRC"], "tests", "cli", "data", "minimal.json"))
    check(doc["import"] is None and doc["lower_bound"] is False, f"minimal.json: {doc['import']}")


# before_window_bytes, misses_memory and the phase words of each import summary, measured with
# this importer on the reference recordings
REFERENCE = {
    "hta_df_index_resolver.json.gz": (4096614400, False),
    "kineto_tbplugin_resnet50_nw0.json.gz": (0, True),
    "tracelens_qwen1.5-0.5b_h100_infer.json.gz": (984742400, False),
    "cs336_wedsonlin_medium_ctx512_train.pickle.gz": (5095567360, False),
    "cs336_bcrafton_compiled_train.pickle.gz": (3064418304, False),
    "cs336_magma27_train.pickle.gz": (1373919236, False),
    "hta_resnet50_memory_timeline.raw.json.gz": (332060904, False),
}


def reference():
    folder = reference_traces()
    with tempdir() as tmp:
        for name, (before, misses) in REFERENCE.items():
            path = os.path.join(folder, name)
            if not check(os.path.isfile(path), f"{name} missing from {folder}"):
                continue
            snap, p, out = imported(path, tmp)
            if snap is None:
                continue
            check(" in setup" not in p.stdout and " in other" not in p.stdout,
                  f"{name}: the summary names a phase outside phases\n{p.stdout}")
            text, doc = reports(out)
            got = (doc["import"]["before_window_bytes"], doc["import"]["misses_memory"])
            check(got == (before, misses), f"{name}: before the window, misses memory {got}")
            size = re.search(r"began with (\S+ \S+) already", text)
            warning = ((began(size.group(1)) if before and size else "")
                       + ("; and " if before and misses else "") + (MISSING if misses else "")
                       or None)
            said(name, text, doc, snap, warning)
            timeline = name.endswith(".raw.json.gz")
            check(("cuda:" in text) != timeline and doc["import"]["device_named"] != timeline,
                  f"{name}: the device is named only when the trace names it")
        # magma27's peak is after its last phase instance: said so, not as a phase
        snap, p, _ = imported(os.path.join(folder, "cs336_magma27_train.pickle.gz"), tmp)
        check("  device 0: peak 13923997700 bytes (13279.0 MiB) after the last phase, step 0; "
              "1373919236 bytes from before the recording" in p.stdout.splitlines(),
              f"magma27 summary\n{p.stdout}")


if __name__ == "__main__":
    {"fixtures": fixtures, "reference": reference}[sys.argv[1]]()
    done()
