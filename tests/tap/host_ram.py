"""Runs tap_host_ram (see host_ram.c) under the library with a fake memory cgroup and checks the
snapshot's host RAM and the report's: the high-water mark and the sample at the device peak
within load .. load + 128 MiB, the worker (a forked child) by its pid within its size .. size +
64 MiB, the machine's RAM exactly /proc/meminfo's, the cgroup's limit exactly its memory.max; a
cgroup with no limit ("max") gives none. Against a 300 MiB limit the report warns, naming the
workers; `vramtap diff` sets two runs' host RAM side by side. Under ThreadSanitizer, whose shadow memory is resident
too (the 256 MiB load reads as 1.3 GB there), only the lower bounds are asserted.

usage: host_ram.py PROGRAM
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

prog = sys.argv[1]
failures = []


def expect(ok, what):
    if not ok:
        failures.append(what)


with open("/proc/meminfo") as f:
    machine = next(int(l.split()[1]) * 1024 for l in f if l.startswith("MemTotal:"))
MiB = 1 << 20
# the most a figure may exceed what the program holds: the process's own pages, or no bound
SLACK = None if "thread" in os.environ.get("VT_SANITIZE", "") else 128 * MiB
kept = {}
for limit in ("1073741824", "max", "314572800"):
    out, cgroup = tempfile.mkdtemp(prefix="vt-ram-"), tempfile.mkdtemp(prefix="vt-cgroup-")
    with open(os.path.join(cgroup, "memory.max"), "w") as f:
        f.write(limit + "\n")
    env = dict(os.environ, LD_PRELOAD=os.environ["VT_PRELOAD"], VRAMTAP_OUT=out,
               VRAMTAP_QUIET="1", VRAMTAP_CGROUP=cgroup,
               LD_LIBRARY_PATH=os.environ["VT_STANDIN_DIR"])
    p = subprocess.run([prog], env=env, capture_output=True, text=True, timeout=300)
    shutil.rmtree(cgroup)
    if p.returncode:
        failures.append("exit %d %s" % (p.returncode, p.stderr[-2000:]))
        break
    load, worker_pid, worker_size = (int(x) for x in p.stdout.split())
    snaps = glob.glob(os.path.join(out, "vramtap.*.json"))
    if len(snaps) != 1:
        failures.append("%d snapshots" % len(snaps))
        break
    doc = json.loads(subprocess.check_output([os.environ["VT_CLI"], "export", "--json", snaps[0]]))
    ram = doc["host_ram"]
    within = lambda v: v is not None and load <= v <= load + (SLACK if SLACK else v)
    expect(within(ram["high_water_bytes"]), "high_water_bytes %s" % ram["high_water_bytes"])
    high = ram["sampled_high"] or {}
    expect(within(high.get("bytes")) and high.get("phase") == "setup" and high.get("step") == 0,
           "sampled_high %s" % high)
    expect(within(doc["devices"][0]["rss_at_peak_bytes"]),
           "rss_at_peak_bytes %s" % doc["devices"][0]["rss_at_peak_bytes"])
    in_worker = lambda v: (v is not None and worker_size <= v <=
                           worker_size + (SLACK // 2 if SLACK else v))
    workers = ram["workers"]
    expect(len(workers) == 1 and workers[0]["pid"] == worker_pid and
           in_worker(workers[0]["pss_high_bytes"]) and ram["workers_left_out"] == 0,
           "workers %s (pid %d)" % (workers, worker_pid))
    expect(in_worker(ram["workers_high_bytes"]), "workers_high_bytes %s" % ram["workers_high_bytes"])
    expect(in_worker(doc["devices"][0]["workers_at_peak_bytes"]),
           "workers_at_peak_bytes %s" % doc["devices"][0]["workers_at_peak_bytes"])
    expect(ram["machine_bytes"] == machine, "machine_bytes %s, expected %d"
           % (ram["machine_bytes"], machine))
    want_limit = int(limit) if limit != "max" else None
    kept[limit] = (snaps[0], ram)
    expect(ram["cgroup_limit_bytes"] == want_limit, "cgroup_limit_bytes %s, expected %s"
           % (ram["cgroup_limit_bytes"], want_limit))
    r = subprocess.run([os.environ["VT_CLI"], "report", "--json", snaps[0]], capture_output=True,
                       text=True)
    rep = json.loads(r.stdout) if r.returncode == 0 else {}
    expect(rep.get("host_ram", {}).get("high_water_bytes") == ram["high_water_bytes"] and
           rep.get("host_ram", {}).get("cgroup_limit_bytes") == want_limit,
           "report --json host_ram %s" % rep.get("host_ram"))
    expect([(w["pid"], w["pss_bytes"]) for w in rep.get("host_ram", {}).get("workers", [])] ==
           [(worker_pid, workers[0]["pss_high_bytes"])] and
           rep["host_ram"]["workers_high_bytes"] == ram["workers_high_bytes"],
           "report --json workers %s" % rep.get("host_ram"))
    expect(rep.get("devices", [{}])[0].get("levels", {}).get("host_ram") ==
           doc["devices"][0]["rss_at_peak_bytes"], "report --json levels.host_ram")
    text = subprocess.run([os.environ["VT_CLI"], "report", snaps[0]], capture_output=True,
                          text=True, env=dict(os.environ, COLUMNS="200")).stdout
    line = next((l for l in text.splitlines() if l.startswith("  host RAM")), "")
    expect("high-water " in line and "in setup, step 0" in line and "at the cuda:0 peak" in line
           and "; 1 worker process, " in line,
           "report line %r" % line)
    expect(("cgroup limit " in line) == (limit != "max"), "report's cgroup limit %r" % line)
    warned = [l for l in text.splitlines() if "host RAM reached" in l]
    if limit == "314572800":
        expect(len(warned) == 1 and "of its cgroup's limit" in warned[0] and
               "    1 worker process held " in text and "num_workers" in text,
               "the warning against a 300 MiB limit: %r" % text[:2000])
    elif SLACK:
        expect(not warned, "no warning under a limit far above the load: %r" % warned)
p = subprocess.run([os.environ["VT_CLI"], "diff", kept["max"][0], kept["314572800"][0]],
                   capture_output=True, text=True, env=dict(os.environ, COLUMNS="200"))
rows = [l.split()[:2] for l in p.stdout.splitlines() if l.startswith("  RAM high-water")]
expect(p.returncode == 0 and "\nhost " in p.stdout and rows == [["RAM", "high-water"]] and
       "  workers at most" in p.stdout, "diff's host block: %s %s" % (p.stdout[-800:], p.stderr))
p = subprocess.run([os.environ["VT_CLI"], "diff", "--json", kept["max"][0], kept["314572800"][0]],
                   capture_output=True, text=True)
d = json.loads(p.stdout) if p.returncode == 0 else {}
expect(d.get("host_ram", {}).get("a", {}).get("high_water_bytes") ==
       kept["max"][1]["high_water_bytes"] and
       d["host_ram"]["b"]["cgroup_limit_bytes"] == 314572800, "diff --json host_ram")
for path, _ in kept.values():
    shutil.rmtree(os.path.dirname(path))
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
