"""Shared by the import tests: running `vramtap import` and reading what it wrote."""
import json
import os
import subprocess
import sys
import tempfile

CLI = os.environ["VT_CLI"]
FIXTURES = os.path.join(os.environ["VT_SRC"], "tests", "import", "fixtures")
failures = []


def reference_traces():
    """The folder of the reference recordings (real GPU traces that are not part of the
    repository): VRAMTAP_TRACES when set, else the one the build was configured with. Where it
    is missing the test is skipped (exit 77) with the reason."""
    folder = os.environ.get("VRAMTAP_TRACES") or os.environ.get("VT_TRACES", "")
    if not folder or not os.path.isdir(folder):
        print(f"skipped: reference traces not present (looked in {folder or 'nowhere'}; "
              "set VRAMTAP_TRACES to their folder)")
        sys.exit(77)
    return folder


def fixture(name):
    """A committed fixture's path; a missing one fails the test that needs it."""
    path = os.path.join(FIXTURES, name)
    check(os.path.isfile(path), f"fixture {name} is missing: remake it with "
                                "tests/import/fixtures/make.py")
    return path


def fixture_maker():
    """tests/import/fixtures/make.py as a module."""
    sys.path.insert(0, FIXTURES)
    import make
    return make


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)
    return cond


def done():
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    print("all checks passed")
    sys.exit(0)


def run(args, **kw):
    return subprocess.run([CLI] + args, capture_output=True, text=True, timeout=600, **kw)


def import_file(path, tmpdir):
    """Imports path; returns (snapshot dict or None, completed process)."""
    out = os.path.join(tmpdir, os.path.basename(path) + ".vramtap.json")
    p = run(["import", path, "-o", out])
    snap = None
    if p.returncode == 0:
        with open(out) as f:
            snap = json.load(f)
    return snap, p


def tempdir():
    return tempfile.TemporaryDirectory(prefix="vt-import-")


def peak_set_consistent(snap):
    """Each device's allocations live at the peak add up to its peak."""
    ok = True
    for d in snap["devices"]:
        total = sum(a["size"] for a in snap["allocations"] if a["device"] == d["device"])
        ok &= check(total == d["peak_bytes"],
                    f"device {d['device']}: allocations at the peak sum to {total}, "
                    f"peak_bytes is {d['peak_bytes']}")
    return ok


PHASES = {"setup", "forward", "backward", "optimizer", "other"}


def well_formed(snap, name):
    """The keys docs/snapshot-format.md requires, with their types."""
    for key in ("format", "version", "kind", "vramtap_version", "phase_markers", "steps",
                "stacks", "counters", "devices", "allocations", "sites", "timeline",
                "timeline_summary", "oom_events", "import"):
        check(key in snap, f"{name}: top-level key {key} missing")
    check(snap.get("format") == "vramtap-snapshot" and snap.get("version") == 1
          and snap.get("kind") == "import", f"{name}: format/version/kind")
    nsites = len(snap.get("sites", []))
    for i, s in enumerate(snap.get("sites", [])):
        check(s["id"] == i and len(s["signature"]) == 16 and int(s["signature"], 16) >= 0,
              f"{name}: site {i} id/signature")
        for f in s["frames"]:
            check(f["type"] in ("python", "native", "op"), f"{name}: frame type {f['type']}")
    ids = set()
    for a in snap.get("allocations", []):
        ids.add(a["id"])
        check(a["size"] > 0, f"{name}: allocation {a['id']} size {a['size']}")
        check(a["birth"]["phase"] in PHASES, f"{name}: allocation {a['id']} birth phase")
        check(a["death"] is None or a["death"]["phase"] in PHASES,
              f"{name}: allocation {a['id']} death phase")
        check(a["site"] is None or 0 <= a["site"] < nsites, f"{name}: allocation site range")
        check(a["address"] is None or a["address"].startswith("0x"), f"{name}: address form")
        check(a["death_time_s"] is None or a["death_time_s"] >= a["birth_time_s"],
              f"{name}: allocation {a['id']} dies before birth")
    check(len(ids) == len(snap.get("allocations", [])), f"{name}: allocation ids unique")
    for t in snap.get("timeline", []):
        check(t["phase"] in ("forward", "backward", "optimizer") and t["end_s"] >= t["start_s"],
              f"{name}: timeline record {t['instance']}")
