#!/usr/bin/python3
"""Run a test program under the preloaded library and hold its snapshots to the program's own
account.

The program keeps an independent model of what it did and prints what vramtap must have
recorded, one expectation a line, on stdout:

    EXPECT [pid=N] peak DEV BYTES            devices[DEV].peak_bytes
    EXPECT [pid=N] live_at_end DEV BYTES     devices[DEV].live_bytes_at_end
    EXPECT [pid=N] allocs DEV N              devices[DEV].allocs
    EXPECT [pid=N] devices N                 number of devices in the snapshot
    EXPECT [pid=N] counter NAME N            counters[NAME]
    EXPECT [pid=N] at_peak DEV ADDR SIZE API one allocation live at DEV's peak; all listed for a
                                             device must be exactly the snapshot's set
    EXPECT [pid=N] at_peak_count DEV N       number of allocations live at DEV's peak
    EXPECT [pid=N] birth ADDR PHASE STEP [INSTANCE]  birth phase, step (and phase instance) of
                                             the allocation at ADDR
    EXPECT [pid=N] death ADDR PHASE STEP     death phase and step ("null null": alive at end)
    EXPECT [pid=N] peak_at DEV PHASE STEP    phase and step of DEV's peak
    EXPECT [pid=N] device DEV KEY VALUE      devices[DEV][KEY] (a number, or text to the line end;
                                             KEY may be a path: reserved.peak_bytes)
    EXPECT [pid=N] mode FRAMEWORK MODE REASON  modes[FRAMEWORK]
    EXPECT [pid=N] env_set NAME VALUE|-      env_set[NAME] ("-": vramtap did not set it)
    EXPECT [pid=N] timeline_len N            records in timeline
    EXPECT [pid=N] timeline I KEY VALUE      timeline[I][KEY] (phase, step, instance) or
                                             timeline[I].devices[0][KEY] (live_start, live_max...)
    EXPECT [pid=N] timeline_summary KEY VALUE  timeline_summary[KEY] (live_max: of device 0)
    EXPECT [pid=N] markers true|false        phase_markers
    EXPECT [pid=N] steps N                   steps
    EXPECT [pid=N] host_peak BYTES           host.peak_bytes
    EXPECT [pid=N] no_snapshot               no exit snapshot for that process
    EXPECT [pid=N] oom_files N               post-mortem files written
    EXPECT [pid=N] oom N FIELD VALUE         oom_events[N-1][FIELD] (retry_succeeded true|false)
    EXPECT [pid=N] json PATH VALUE           the member at PATH (dotted: keys, array indices,
                                             "length" of an array) equals VALUE, a JSON text
    EXPECT [pid=N] history windows N         windows in history
    EXPECT [pid=N] history W KEY VALUE       history.windows[W][KEY] (reason, events, truncated;
                                             devices as 0,1)
    EXPECT [pid=N] history W sizes +A,-B,... the signed sizes of window W's events, in order
    EXPECT [pid=N] history dropped N         history.dropped
    EXPECT [pid=N] history_times_ordered N   history_events holds N events, their times never
                                             going back (threads read the clock before the lock)
    EXPECT [pid=N] history_death SIZE PHASE STEP  death of the one allocation of SIZE bytes
                                             (allocations and history_allocations)
    EXPECT [pid=N] history_birth SIZE PHASE STEP ADDRESS  the same allocation's birth and address
    EXPECT [pid=N] birth_where SIZE INSTANCE FUNCTION PATH  the same allocation's birth in phase
                                             instance INSTANCE, FUNCTION in its stack, under module
                                             path PATH
    EXPECT [pid=N] labels ADDR OFF:BYTES:CATEGORY,...  the labels of the allocation at ADDR, as
                                             a set ("-": none)
    EXPECT [pid=N] identity KEY N            identity[KEY]
    EXPECT [pid=N] record KEY VALUE          run_record[KEY] (a number, or text)
    EXPECT [pid=N] bill DEV CATEGORY EVIDENCE BYTES  `vramtap report --json`:
                                             devices[DEV].evidence[CATEGORY][EVIDENCE]
    EXPECT [pid=N] workspace DEV BYTES       the same report's library_workspace_bytes
    EXPECT [pid=N] report_line REGEX N       lines of `vramtap report` (text) matching REGEX
    EXPECT stderr REGEX N                    lines of stderr matching REGEX

pid defaults to the program's own. Usage: snapcheck.py [--env K=V]... [--exit N] [--cwd-out]
[--attach] -- PROG ARGS (--cwd-out: the program runs in the output folder, where the snapshots
are looked for whatever VRAMTAP_OUT says; --attach: vramtap is not preloaded but loaded by the
driver as its CUPTI injection library)
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile


def main():
    args = sys.argv[1:]
    env = dict(os.environ)
    want_exit = 0
    cwd_out = False
    attach = False
    while args and args[0] != "--":
        if args[0] == "--env":
            k, _, v = args[1].partition("=")
            env[k] = v
            args = args[2:]
        elif args[0] == "--cwd-out":
            cwd_out = True
            args = args[1:]
        elif args[0] == "--attach":
            attach = True
            args = args[1:]
        elif args[0] == "--exit":
            want_exit = int(args[1])
            args = args[2:]
        else:
            sys.exit("snapcheck: unknown option " + args[0])
    cmd = args[1:]
    if os.path.exists(cmd[0]):
        cmd[0] = os.path.abspath(cmd[0])
    out = tempfile.mkdtemp(prefix="vt-test-")
    env.setdefault("VRAMTAP_OUT", out)
    env["LD_PRELOAD"] = env["VT_PRELOAD"] + (
        ":" + env["VT_PRELOAD_EXTRA"] if env.get("VT_PRELOAD_EXTRA") else "")
    if attach:  # the driver loads vramtap at cuInit; a sanitizer's runtime stays preloaded
        env["CUDA_INJECTION64_PATH"] = env["VT_LIB"]
        env["LD_PRELOAD"] = ":".join(p for p in env["LD_PRELOAD"].split(":")
                                     if p != env["VT_LIB"])
    env["LD_LIBRARY_PATH"] = env["VT_STANDIN_DIR"] + (
        ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, cwd=out if cwd_out else None)
    folder = out if cwd_out else env["VRAMTAP_OUT"]
    stdout, stderr = p.communicate(timeout=600)
    sys.stderr.write(stderr)
    failures = []
    if p.returncode != want_exit:
        failures.append("exit status %d, expected %d" % (p.returncode, want_exit))

    snaps = {}
    ooms = {}
    for path in glob.glob(os.path.join(folder, "vramtap.*.json")):
        # the library writes a compact file: a file export cannot read fails the test here
        doc = json.loads(subprocess.check_output([os.environ["VT_CLI"], "export", "--json", path]))
        if doc.get("kind") == "oom":
            ooms.setdefault(doc["pid"], []).append(doc)
        else:
            snaps[doc["pid"]] = doc
    leftovers = glob.glob(os.path.join(folder, "*.tmp"))
    if leftovers:
        failures.append("temporary files left behind: %s" % leftovers)

    expected_at_peak = {}
    nexpect = 0
    for line in stdout.splitlines():
        if not line.startswith("EXPECT "):
            continue
        nexpect += 1
        words = line.split()[1:]
        pid = p.pid
        if words[0].startswith("pid="):
            pid = int(words[0][4:])
            words = words[1:]
        what, rest = words[0], words[1:]
        if what == "stderr":
            n = sum(1 for l in stderr.splitlines() if re.search(rest[0], l))
            if n != int(rest[1]):
                failures.append("%d stderr lines match %r, expected %s" % (n, rest[0], rest[1]))
            continue
        if what == "oom_files":
            n = len(ooms.get(pid, []))
            if n != int(rest[0]):
                failures.append("pid %d: %d oom files, expected %s" % (pid, n, rest[0]))
            continue
        if what == "no_snapshot":
            if pid in snaps:
                failures.append("pid %d wrote a snapshot, expected none" % pid)
            continue
        doc = snaps.get(pid)
        if doc is None:
            failures.append("pid %d wrote no snapshot (%s)" % (pid, line))
            continue
        check(doc, what, rest, failures, expected_at_peak, pid)
    for (pid, dev), want in expected_at_peak.items():
        doc = snaps.get(pid)
        if doc is None:
            continue
        got = sorted((a["address"], a["size"], a["api"]) for a in doc["allocations"]
                     if a["device"] == dev)
        if got != sorted(want):
            missing = sorted(set(want) - set(got))[:5]
            extra = sorted(set(got) - set(want))[:5]
            failures.append("pid %d device %d: live-at-peak set differs (%d vs %d expected); "
                            "missing %s extra %s" % (pid, dev, len(got), len(want), missing,
                                                     extra))
    if nexpect == 0:
        failures.append("the program printed no expectations")
    for f in failures:
        print("FAIL:", f)
    print("%d expectations, %d failures" % (nexpect, len(failures)))
    if not failures:  # kept only to look into a failure
        shutil.rmtree(out, ignore_errors=True)
    sys.exit(1 if failures else 0)


def device(doc, dev):
    for d in doc["devices"]:
        if d["device"] == dev:
            return d
    return None


def by_address(doc, addr):
    found = [a for a in doc["allocations"] if a["address"] == addr]
    return found[0] if len(found) == 1 else None


def by_size(doc, size):
    """The allocations of `size` bytes, in allocations and history_allocations."""
    return [a for a in doc["allocations"] + doc.get("history_allocations", [])
            if a["size"] == size]


_reports = {}


def report_json(doc):
    """`vramtap report --json` of the snapshot of doc's process, run once."""
    if doc["pid"] not in _reports:
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(doc, f)
        p = subprocess.run([os.environ["VT_CLI"], "report", "--json", f.name],
                           capture_output=True, text=True)
        os.unlink(f.name)
        _reports[doc["pid"]] = json.loads(p.stdout) if p.returncode == 0 else {"error": p.stderr}
    return _reports[doc["pid"]]


def report_text(doc):
    """`vramtap report` of the snapshot of doc's process (text, no colours)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(doc, f)
    p = subprocess.run([os.environ["VT_CLI"], "report", f.name], capture_output=True, text=True,
                       env=dict(os.environ, NO_COLOR="1"))
    os.unlink(f.name)
    return p.stdout if p.returncode == 0 else "error: " + p.stderr


def report_device(doc, dev):
    for d in report_json(doc).get("devices", []):
        if d["device"] == dev:
            return d
    return {}


def check(doc, what, rest, failures, expected_at_peak, pid):
    def expect(got, want, label):
        if got != want:
            failures.append("pid %d %s: got %r, expected %r" % (pid, label, got, want))

    if what in ("peak", "live_at_end", "allocs"):
        key = {"peak": "peak_bytes", "live_at_end": "live_bytes_at_end", "allocs": "allocs"}[what]
        d = device(doc, int(rest[0]))
        expect(d and d[key], int(rest[1]), "device %s %s" % (rest[0], key))
    elif what == "devices":
        expect(len(doc["devices"]), int(rest[0]), "device count")
    elif what == "counter":
        expect(doc["counters"].get(rest[0]), int(rest[1]), "counter " + rest[0])
    elif what == "at_peak":
        expected_at_peak.setdefault((pid, int(rest[0])), []).append(
            (rest[1], int(rest[2]), rest[3]))
    elif what == "at_peak_count":
        n = sum(1 for a in doc["allocations"] if a["device"] == int(rest[0]))
        expect(n, int(rest[1]), "allocations at device %s peak" % rest[0])
    elif what in ("birth", "death"):
        a = by_address(doc, rest[0])
        if a is None:
            failures.append("pid %d: no single allocation at %s in the peak set" % (pid, rest[0]))
            return
        mark = a[what]
        got = [mark["phase"], mark["step"]] if mark else [None, None]
        want = [None if rest[1] == "null" else rest[1], None if rest[2] == "null" else int(rest[2])]
        if len(rest) > 3:
            got.append(mark["instance"] if mark else None)
            want.append(int(rest[3]))
        expect(got, want, "%s of %s" % (what, rest[0]))
    elif what == "labels":
        a = by_address(doc, rest[0])
        if a is None:
            failures.append("pid %d: no single allocation at %s in the peak set" % (pid, rest[0]))
            return
        got = sorted("%d:%d:%s" % (l["offset"], l["bytes"], l["category"])
                     for l in a.get("labels", []))
        want = [] if rest[1] == "-" else sorted(rest[1].split(","))
        expect(got, want, "labels of " + rest[0])
    elif what == "identity":
        expect(doc.get("identity", {}).get(rest[0]), int(rest[1]), "identity " + rest[0])
    elif what == "record":
        want = " ".join(rest[1:])
        expect(doc.get("run_record", {}).get(rest[0]),
               int(want) if re.fullmatch(r"-?\d+", want) else want, "run_record " + rest[0])
    elif what == "bill":
        d = report_device(doc, int(rest[0]))
        got = d.get("evidence", {}).get(rest[1], {}).get(rest[2])
        expect(got, int(rest[3]), "report: device %s %s by %s" % tuple(rest[:3]))
    elif what == "report_line":
        got = [l for l in report_text(doc).splitlines() if re.search(rest[0], l)]
        expect(len(got), int(rest[1]), "report: lines matching %r" % rest[0])
    elif what == "workspace":
        expect(report_device(doc, int(rest[0])).get("library_workspace_bytes"), int(rest[1]),
               "report: device %s library workspaces" % rest[0])
    elif what == "peak_at":
        d = device(doc, int(rest[0]))
        expect(d and [d["peak_phase"], d["peak_step"]], [rest[1], int(rest[2])],
               "device %s peak phase/step" % rest[0])
    elif what == "device":
        d = device(doc, int(rest[0]))
        got = d
        for k in rest[1].split("."):
            got = got.get(k) if isinstance(got, dict) else None
        want = " ".join(rest[2:])
        expect(got, int(want) if re.fullmatch(r"-?\d+", want) else want,
               "device %s %s" % (rest[0], rest[1]))
    elif what == "mode":
        m = doc["modes"].get(rest[0], {})
        expect([m.get("mode"), m.get("reason")], rest[1:3], "mode of " + rest[0])
    elif what == "env_set":
        expect(doc["env_set"].get(rest[0], "-"), rest[1], "env_set " + rest[0])
    elif what == "timeline_len":
        expect(len(doc["timeline"]), int(rest[0]), "timeline records")
    elif what == "timeline":
        rec = doc["timeline"][int(rest[0])] if int(rest[0]) < len(doc["timeline"]) else {}
        got = rec.get(rest[1], rec.get("devices", [{}])[0].get(rest[1]))
        want = int(rest[2]) if re.fullmatch(r"-?\d+", rest[2]) else rest[2]
        expect(got, want, "timeline[%s].%s" % (rest[0], rest[1]))
    elif what == "timeline_summary":
        summary = doc["timeline_summary"] or {}
        got = summary.get(rest[0])
        if rest[0] == "live_max":
            got = (got or {}).get("0")
        expect(got, int(rest[1]), "timeline_summary " + rest[0])
    elif what == "markers":
        expect(doc["phase_markers"], rest[0] == "true", "phase_markers")
    elif what == "steps":
        expect(doc["steps"], int(rest[0]), "steps")
    elif what == "host_peak":
        expect(doc["host"]["peak_bytes"], int(rest[0]), "host peak")
    elif what == "json":
        got = doc
        for k in rest[0].split("."):
            if isinstance(got, list):
                got = len(got) if k == "length" else got[int(k)] if int(k) < len(got) else None
            else:
                got = got.get(k) if isinstance(got, dict) else None
        expect(got, json.loads(" ".join(rest[1:])), rest[0])
    elif what == "oom":
        ev = doc["oom_events"][int(rest[0]) - 1] if len(doc["oom_events"]) >= int(rest[0]) else {}
        want = rest[2]
        if want in ("true", "false"):
            want = want == "true"
        elif re.fullmatch(r"-?\d+", want):
            want = int(want)
        expect(ev.get(rest[1]), want, "oom %s %s" % (rest[0], rest[1]))
    elif what == "history":
        check_history(doc, rest, expect)
    elif what == "history_times_ordered":
        times = [e[0] for e in doc.get("history_events", [])]
        back = next((i for i in range(1, len(times)) if times[i] < times[i - 1]), None)
        expect(len(times), int(rest[0]), "history events")
        expect(back, None, "the first history event whose time goes back")
    elif what == "history_death":
        found = by_size(doc, int(rest[0]))
        death = found[0]["death"] if len(found) == 1 else None
        expect(death and [death["phase"], death["step"]], [rest[1], int(rest[2])],
               "death of the allocation of %s bytes (%d found)" % (rest[0], len(found)))
    elif what == "history_birth":
        found = by_size(doc, int(rest[0]))
        a = found[0] if len(found) == 1 else {}
        expect([a.get("birth", {}).get("phase"), a.get("birth", {}).get("step"), a.get("address")],
               [rest[1], int(rest[2]), rest[3]],
               "birth of the allocation of %s bytes (%d found)" % (rest[0], len(found)))
    elif what == "birth_where":
        found = by_size(doc, int(rest[0]))
        a = found[0] if len(found) == 1 else {}
        site, path = a.get("site"), a.get("module_path")
        frames = next((s["frames"] for s in doc["sites"] if s["id"] == site), [])
        expect([a.get("birth", {}).get("instance"),
                rest[2] if any(f.get("symbol") == rest[2] for f in frames) else frames,
                doc["module_paths"][path] if path is not None else None],
               [int(rest[1]), rest[2], rest[3]],
               "where the allocation of %s bytes was made (%d found)" % (rest[0], len(found)))
    else:
        failures.append("unknown expectation " + what)


def check_history(doc, rest, expect):
    h = doc.get("history") or {"windows": []}
    if rest[0] in ("windows", "dropped"):
        got = len(h["windows"]) if rest[0] == "windows" else h.get("dropped")
        expect(got, int(rest[1]), "history " + rest[0])
        return
    w = h["windows"][int(rest[0])] if int(rest[0]) < len(h["windows"]) else {}
    if rest[1] == "sizes":
        events = doc["history_events"][w.get("first_event", 0):][:w.get("events", 0)]
        got = ",".join("%+d" % e[2] for e in events)
        expect(got, rest[2], "history window %s sizes" % rest[0])
    elif rest[1] == "devices":
        expect(",".join(map(str, w.get("devices", []))), rest[2], "history window %s devices"
               % rest[0])
    else:
        want = rest[2]
        want = want == "true" if want in ("true", "false") else \
            int(want) if re.fullmatch(r"-?\d+", want) else want
        expect(w.get(rest[1]), want, "history window %s %s" % (rest[0], rest[1]))


if __name__ == "__main__":
    main()
