"""Runs tap_copies (see copies.c) under the library and checks the snapshot's copies against
the program's own account, exactly: totals, each phase and each step, by direction and host
kind, and the synchronous downloads (those into pinned memory at the wait for their stream, an
event or the device). Every copy is counted once whichever route it took (the
runtime's copies call the driver's underneath). The forked worker's snapshot holds its one copy
and nothing of its parent's. `vramtap report --json` carries the same bytes and a typical step;
the text report advises pin_memory when half or more of a step's upload bytes come from pageable
memory (7 and 5 MiB of 10: yes, 4: no) and names the synchronous download a step; `vramtap diff`
sets two runs' uploads side by side. With VRAMTAP_COPY_STACKS=1 the counts are the same and the
largest sites (at most 8, largest first) and the bytes left out make the total.

usage: copies.py PROGRAM
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

prog = sys.argv[1]
cli = os.environ["VT_CLI"]
failures = []


def expect(ok, what):
    if not ok:
        failures.append(what)


def run(pageable_mib, extra_env=None):
    """The program's account and its snapshots by pid, in a fresh folder."""
    out = tempfile.mkdtemp(prefix="vt-copies-")
    env = dict(os.environ, LD_PRELOAD=os.environ["VT_PRELOAD"], VRAMTAP_OUT=out,
               VRAMTAP_QUIET="1", LD_LIBRARY_PATH=os.environ["VT_STANDIN_DIR"],
               **(extra_env or {}))
    p = subprocess.run([prog, str(pageable_mib)], env=env, capture_output=True, text=True,
                       timeout=300)
    expect(p.returncode == 0, "exit %d %s" % (p.returncode, p.stderr[-2000:]))
    snaps = {}
    for path in glob.glob(os.path.join(out, "vramtap.*.json")):
        doc = json.loads(subprocess.check_output([os.environ["VT_CLI"], "export", "--json", path]))
        snaps[doc["pid"]] = (path, doc)
    return out, (json.loads(p.stdout) if p.returncode == 0 else None), snaps


MiB = 1 << 20
folders, parents = [], {}
for pageable in (7, 5, 4):
    out, want, snaps = run(pageable)
    folders.append(out)
    if not want:
        break
    expect(len(snaps) == 2 and want["worker"] in snaps, "snapshots of pids %s" % sorted(snaps))
    parent = next((s for pid, s in snaps.items() if pid != want["worker"]), None)
    if not parent:
        break
    parents[pageable] = parent[0]
    got = parent[1]["copies"]
    for key in ("total", "phases", "steps"):
        expect(got.get(key) == want["copies"][key],
               "%d MiB: %s:\n  got  %s\n  want %s" % (pageable, key, got.get(key),
                                                     want["copies"][key]))
    expect(got.get("later_steps") is None and got.get("sites") is None,
           "later_steps %s sites %s" % (got.get("later_steps"), got.get("sites")))
    child = snaps.get(want["worker"], (None, {}))[1].get("copies", {})
    one = {"h2d": {"pageable_bytes": MiB, "pinned_bytes": 0, "pageable_calls": 1,
                   "pinned_calls": 0},
           "d2h": {"pageable_bytes": 0, "pinned_bytes": 0, "pageable_calls": 0, "pinned_calls": 0},
           "d2d": {"bytes": 0, "calls": 0}, "h2h": {"bytes": 0, "calls": 0}, "sync_d2h_calls": 0}
    expect(child.get("total") == one, "the worker's copies %s" % child.get("total"))

    # the report: the same bytes, a typical step of the loop (not step 0 and its routes)
    r = subprocess.run([cli, "report", "--json", parent[0]], capture_output=True, text=True)
    rep = json.loads(r.stdout).get("copies", {}) if r.returncode == 0 else {}
    total = want["copies"]["total"]
    expect(rep.get("h2d", {}).get("pageable_bytes") == total["h2d"]["pageable_bytes"] and
           rep["h2d"]["pinned_bytes"] == total["h2d"]["pinned_bytes"] and
           rep["h2d"]["bytes"] == total["h2d"]["pageable_bytes"] + total["h2d"]["pinned_bytes"]
           and rep["d2h"]["pageable_bytes"] == total["d2h"]["pageable_bytes"] and
           rep["sync_d2h_calls"] == total["sync_d2h_calls"] and
           rep["steps"][1]["h2d"]["pageable_bytes"] == pageable * MiB,
           "report --json copies %s" % {k: rep.get(k) for k in ("h2d", "d2h", "sync_d2h_calls")})
    typical = rep.get("typical_step", {})
    expect(typical.get("step") in (1, 2) and typical.get("h2d_bytes") == 10 * MiB and
           typical.get("h2d_pageable_bytes") == pageable * MiB and
           typical.get("sync_d2h_calls") == 1 and typical.get("d2h_bytes") == 4,
           "typical_step %s" % typical)
    advised = pageable * 2 >= 10
    expect(rep.get("advice") == (["pin_memory"] if advised else []) + ["sync_download"],
           "%d MiB: advice %s" % (pageable, rep.get("advice")))
    text = subprocess.run([cli, "report", parent[0]], capture_output=True, text=True,
                          env=dict(os.environ, COLUMNS="200")).stdout
    pin = [l for l in text.splitlines() if "DataLoader(pin_memory=True)" in l]
    expect(len(pin) == (1 if advised else 0) and
           (not pin or ".to(device, non_blocking=True)" in pin[0] and
            "%d%% of the bytes a step uploads" % (pageable * 10) in pin[0]),
           "%d MiB: pin_memory advice %s" % (pageable, pin))
    wait = [l for l in text.splitlines() if "1 synchronous download a step" in l]
    expect(len(wait) == 1 and "waits for the GPU" in wait[0], "the wait on the GPU %s" % wait)

if 7 in parents and 4 in parents:
    p = subprocess.run([cli, "diff", parents[7], parents[4]], capture_output=True, text=True,
                       env=dict(os.environ, COLUMNS="200"))
    rows = [" ".join(l.split()) for l in p.stdout.splitlines()]
    expect(p.returncode == 0 and "uploads a step 10.00 MiB 10.00 MiB 0 B +0.0%" in rows and
           "from pageable 7.00 MiB 4.00 MiB -3.00 MiB -42.9%" in rows and
           "sync downloads 1 1" in rows, "diff's copies rows %r" % p.stdout[-600:])
    p = subprocess.run([cli, "diff", "--json", parents[7], parents[4]], capture_output=True,
                       text=True)
    d = json.loads(p.stdout).get("copies", {}) if p.returncode == 0 else {}
    expect(d.get("a", {}).get("typical_step", {}).get("h2d_pageable_bytes") == 7 * MiB and
           d.get("b", {}).get("typical_step", {}).get("h2d_pageable_bytes") == 4 * MiB,
           "diff --json copies %s" % d)
# With the sites of copies: the same counts (each copy then counted under the lock), and the
# largest sites, whose bytes and those left out make the total.
out, want, snaps = run(7, {"VRAMTAP_COPY_STACKS": "1"})
folders.append(out)
parent = want and next((s for pid, s in snaps.items() if pid != want["worker"]), None)
if parent:
    got = parent[1]["copies"]
    for key in ("total", "phases", "steps"):
        expect(got.get(key) == want["copies"][key], "with sites: %s differs" % key)
    sites = got.get("sites") or []
    t = want["copies"]["total"]
    total = (t["h2d"]["pageable_bytes"] + t["h2d"]["pinned_bytes"] + t["d2h"]["pageable_bytes"] +
             t["d2h"]["pinned_bytes"] + t["d2d"]["bytes"] + t["h2h"]["bytes"])
    expect(0 < len(sites) <= 8 and
           sum(s["bytes"] for s in sites) + got.get("sites_left_out_bytes", -1) == total and
           all(isinstance(s["site"], int) and 0 <= s["site"] < len(parent[1]["sites"])
               for s in sites) and
           [s["bytes"] for s in sites] == sorted((s["bytes"] for s in sites), reverse=True),
           "sites %s (left out %s, total %d)" % (sites, got.get("sites_left_out_bytes"), total))
for out in folders:
    shutil.rmtree(out)
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
