"""Shared by the pictures tests: making snapshots (the simulated training run, its
post-mortem, imports of the committed fixtures), reading a page's embedded data, replaying a
snapshot's history independently of the command, and checking figures exactly."""
import glob
import json
import os
import shutil
import pickle
import subprocess
import sys
import tempfile

ENV = dict(os.environ)
CLI = ENV["VT_CLI"]
SRC = ENV["VT_SRC"]
FIXTURES = os.path.join(SRC, "tests", "import", "fixtures")
CATS = ["parameters", "gradients", "optimizer_state", "activations", "temporary",
        "unattributed_persistent", "unattributed_transient"]
failures = []
made = []  # temporary folders (tmpdir)


def expect(got, want, what):
    if got != want:
        failures.append("%s: got %r, want %r" % (what, got, want))


def check(cond, what):
    if not cond:
        failures.append(what)


def finish():
    for f in failures:
        print("FAIL:", f)
    print("%d failure(s)" % len(failures))
    if not failures:  # kept only to look into a failure
        for folder in made:
            shutil.rmtree(folder, ignore_errors=True)
    sys.exit(1 if failures else 0)


def cli(*args, want=0):
    p = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=300)
    if p.returncode != want:
        failures.append("vramtap %s: exit %d, want %d\n%s" % (" ".join(args), p.returncode, want,
                                                            p.stderr))
    return p


def tmpdir():
    """A temporary folder, removed at finish() when every check passed."""
    made.append(tempfile.mkdtemp(prefix="vt-pictures-"))
    return made[-1]


def imported(fixture, out):
    path = os.path.join(out, os.path.basename(fixture) + ".vt.json")
    cli("import", os.path.join(FIXTURES, fixture), "-o", path)
    return path


def untimed_pickle(out):
    """The synthetic memory snapshot with its timestamps taken out, imported; returns the
    imported snapshot's path."""
    with open(os.path.join(FIXTURES, "synthetic.pickle"), "rb") as f:
        snap = pickle.load(f)
    for trace in snap["device_traces"]:
        for e in trace:
            e.pop("time_us", None)
    path = os.path.join(out, "untimed.pickle")
    with open(path, "wb") as f:
        pickle.dump(snap, f)
    return imported(path, out)


def simulated(out, args=("--batch", "4", "--steps", "3"), extra=None, want_exit=0):
    """The simulated training job under the library; returns the snapshots it wrote."""
    env = dict(ENV, VRAMTAP_OUT=out, LD_PRELOAD=ENV["VT_PRELOAD"],
               LD_LIBRARY_PATH=ENV["VT_STANDIN_DIR"], VRAMTAP_QUIET="1")
    env.update(extra or {})
    p = subprocess.run([ENV["VT_TRAIN_SIM"], *args], env=env, capture_output=True, text=True,
                       timeout=300)
    expect(p.returncode, want_exit, "train_sim exit status\n" + p.stderr)
    return sorted(glob.glob(os.path.join(out, "vramtap.*.json")))


def load(path):
    """A JSON file; a compact snapshot (the library's) as `vramtap export --json` spells it."""
    with open(path, "rb") as f:
        if f.read(8) != b"\x89VTSNAP ":
            f.seek(0)
            return json.load(f)
    return json.loads(subprocess.check_output([CLI, "export", "--json", path]))


def page_data(html_path):
    """The JSON the page draws, as the page holds it."""
    with open(html_path, encoding="utf-8") as f:
        html = f.read()
    start = '<script type="application/json" id="vt-data">'
    i = html.index(start) + len(start)
    return json.loads(html[i:html.index("</script>", i)])


def report(path):
    return json.loads(cli("report", "--json", path).stdout)


def replay(snap):
    """Live bytes of each device after each history event, by an independent reading of
    history_events: {device: [(time_s, live_bytes)]}, per window, with the live bytes at the
    window's start from the allocations born before it."""
    allocs = {a["id"]: a for a in snap["allocations"] + snap.get("history_allocations", [])}
    out = []
    for w in snap.get("history", {}).get("windows", []):
        per = {}
        for d in w["devices"]:
            live = sum(a["size"] for a in allocs.values() if a["device"] == d and
                       a["birth_seq"] < w["start_seq"] and
                       (a["death_seq"] is None or a["death_seq"] >= w["start_seq"]))
            per[d] = [(w["start_s"], live)]
        for t, i, b in snap["history_events"][w["first_event"]:w["first_event"] + w["events"]]:
            d = allocs[i]["device"]
            check(abs(b) == allocs[i]["size"], "event of allocation %d: %d bytes" % (i, b))
            if d in per:
                per[d].append((t, per[d][-1][1] + b))
        out.append(per)
    return out


def report_categories(rdev):
    """The report's bill in the page's seven categories."""
    c = dict(rdev["categories"] or {})
    split = rdev["unattributed_split"]
    c.pop("unattributed", None)
    c["unattributed_persistent"] = split["persistent"]
    c["unattributed_transient"] = split["transient"]
    return [c.get(k, 0) for k in CATS]
