#!/usr/bin/python3
"""Output files in a shared directory (outfiles.c is the program).

    outfiles.py symlinks PROG     links planted at the names a run would use are never followed
    outfiles.py namespaces PROG   two "nodes" (PID and UTS namespaces) with the same pid, one
                                  directory: every snapshot kept and named by its host, and
                                  `vramtap report DIR` shows both nodes (root only)
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

MiB = 1 << 20
failures = []


def expect(got, want, what):
    if got != want:
        failures.append("%s: got %r, expected %r" % (what, got, want))


def env_for(out):
    env = dict(os.environ)
    env["VRAMTAP_OUT"] = out
    env["VRAMTAP_QUIET"] = "1"  # only warnings on stderr: they are counted
    env["LD_PRELOAD"] = env["VT_PRELOAD"]
    env["LD_LIBRARY_PATH"] = env["VT_STANDIN_DIR"]
    for k in ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"):
        env.pop(k, None)
    return env


def run(cmd, env):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=300)
    sys.stderr.write(p.stderr)
    expect(p.returncode, 0, "exit status of %s" % cmd)
    return p


def load(path):
    return json.loads(subprocess.check_output([os.environ["VT_CLI"], "export", "--json", path]))


def short_host():
    return re.sub(r"[^A-Za-z0-9_-]", "_", os.uname().nodename.split(".")[0])


def symlinks(prog):
    out = tempfile.mkdtemp(prefix="vt-out-")
    victims = tempfile.mkdtemp(prefix="vt-victims-")
    for name in ("snapshot", "temporary", "postmortem"):
        with open(os.path.join(victims, name), "w") as f:
            f.write("precious %s\n" % name)
    p = subprocess.Popen([prog, "3", "plant", victims], env=env_for(out), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    stdout, stderr = p.communicate(timeout=300)
    sys.stderr.write(stderr)
    expect(p.returncode, 0, "exit status")
    base = "vramtap.tap_outfiles.%s.%d" % (short_host(), p.pid)

    for name in ("snapshot", "temporary", "postmortem"):
        with open(os.path.join(victims, name)) as f:
            expect(f.read(), "precious %s\n" % name, "content of the file %s points to" % name)
    planted = {base + ".json": "snapshot", base + ".json.tmp": "temporary",
               base + ".oom1.json": "postmortem"}
    for name, target in planted.items():
        path = os.path.join(out, name)
        expect(os.path.islink(path) and os.readlink(path), os.path.join(victims, target),
               "link " + name)
    # The interim snapshots went to -2 (the planted name is not this process's); the later
    # ones and the exit snapshot replaced that file, which this process wrote, and nothing else.
    expect(sorted(os.listdir(out)),
           sorted(list(planted) + [base + "-2.json", base + ".oom1-2.json"]), "files")
    expect([l for l in stdout.splitlines() if l.startswith("WRITTEN")],
           ["WRITTEN %s-2.json interim" % base], "files written before the exit")
    snap = load(os.path.join(out, base + "-2.json"))
    expect(snap["kind"], "exit", "kind of the snapshot")
    expect(snap["devices"][0]["peak_bytes"], 5 * MiB, "peak")
    expect(snap["oom_events"][0]["file"], base + ".oom1-2.json", "post-mortem named in oom_events")
    pm = load(os.path.join(out, base + ".oom1-2.json"))
    expect([pm["kind"], pm["oom"]["size"]], ["oom", 1 << 40], "post-mortem")

    def lines(pattern):
        return sum(1 for l in stderr.splitlines() if re.search(pattern, l))
    expect(lines(r"^vramtap: .*\.json\.tmp already exists and is not this process's: left alone"),
           1, "warnings about the temporary name")
    expect(lines(r"^vramtap: .*/%s\.json already exists and was not written by this process: "
                 r"left alone, wrote %s-2\.json instead$" % (re.escape(base), re.escape(base))),
           1, "warnings about the snapshot's name")
    expect(lines(r"^vramtap: .*/%s\.oom1\.json already exists and was not written by this "
                 r"process: left alone, wrote %s\.oom1-2\.json instead$"
                 % (re.escape(base), re.escape(base))), 1, "warnings about the post-mortem's name")
    expect(lines(r"^vramtap: "), 3, "vramtap lines on stderr")
    shutil.rmtree(out)
    shutil.rmtree(victims)


def namespaces(prog):
    probe = subprocess.run(["unshare", "--pid", "--uts", "--fork", "true"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if probe.returncode != 0:
        print("SKIP: unshare --pid --uts is not permitted here (needs root or user namespaces)")
        sys.exit(77)
    out = tempfile.mkdtemp(prefix="vt-out-")
    env = env_for(out)
    # Each process is pid 1 of its own PID namespace, on a host of its own name; the third is
    # a restarted container on nodeA, pid 1 again.
    for host, mib in (("nodeA", 3), ("nodeB", 5), ("nodeA", 7)):
        run(["unshare", "--pid", "--uts", "--fork", "sh", "-c", 'hostname "$0" && exec "$@"',
             host, prog, str(mib)], env)
    names = sorted(n for n in os.listdir(out) if ".oom" not in n)
    expect(names, ["vramtap.tap_outfiles.nodeA.1-2.json", "vramtap.tap_outfiles.nodeA.1.json",
                   "vramtap.tap_outfiles.nodeB.1.json"], "snapshots")
    want = {"vramtap.tap_outfiles.nodeA.1.json": 5 * MiB,
            "vramtap.tap_outfiles.nodeB.1.json": 7 * MiB,
            "vramtap.tap_outfiles.nodeA.1-2.json": 9 * MiB}
    uuids = {}
    for name, peak in want.items():
        if os.path.exists(os.path.join(out, name)):
            doc = load(os.path.join(out, name))
            host = name.split(".")[2]
            expect([doc["pid"], doc["host"]["name"], doc["devices"][0]["peak_bytes"]],
                   [1, host, peak], name)
            uuids.setdefault(host, set()).add(doc["devices"][0]["uuid"])
    # the stand-in's GPUs, like real ones, are the host's own: one per node here
    expect(sorted(len(u) for u in uuids.values()), [1, 1], "one GPU per node")
    expect(len(set.union(*uuids.values())) if uuids else 0, 2, "distinct GPUs on the two nodes")
    p = subprocess.run([os.environ["VT_CLI"], "report", out], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    expect(p.returncode, 0, "vramtap report exit status")
    text = p.stdout
    for line in ("vramtap report  3 processes on 2 nodes\n", "\nnodeA  2 processes\n",
                 "\nnodeB  1 process\n", "\nout-of-memory post-mortems\n"):
        if line not in text:
            failures.append("vramtap report %s: no %r in:\n%s" % (out, line, text))
    rows = re.findall(r"^ +- +- +1 +cuda:0 +(\S+ MiB) .* yes$", text, re.M)
    # same host and pid: in file name order, "nodeA.1-2.json" before "nodeA.1.json"
    expect(rows, ["9.00 MiB", "5.00 MiB", "7.00 MiB"], "report rows (nodeA, nodeA, nodeB)")
    expect(text.count("pid 1 on nodeA: 1.00 TiB asked on cuda:0"), 2, "nodeA's post-mortems")
    expect(text.count("pid 1 on nodeB: 1.00 TiB asked on cuda:0"), 1, "nodeB's post-mortem")
    expect(sorted(n for n in os.listdir(out) if ".oom" in n),
           ["vramtap.tap_outfiles.nodeA.1.oom1-2.json", "vramtap.tap_outfiles.nodeA.1.oom1.json",
            "vramtap.tap_outfiles.nodeB.1.oom1.json"], "post-mortems")
    shutil.rmtree(out)


def main():
    {"symlinks": symlinks, "namespaces": namespaces}[sys.argv[1]](sys.argv[2])
    for f in failures:
        print("FAIL:", f)
    print("%d failures" % len(failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
