#!/usr/bin/python3
"""Run a test program twice over the stand-in, once with libvramtap.so preloaded (interposition)
and once attached through CUPTI (CUDA_INJECTION64_PATH, no LD_PRELOAD), and hold the two sets of
snapshots to each other: every figure, allocation, address, size, API, kind, device, phase and
step, stack (each native frame's module and offset), post-mortem and history event the same.
What may differ is only what cannot be the same: times, process ids, the numbering of stacks and
modules, and the counter of nested calls (interposition sees the driver call under a runtime
call and counts it; CUPTI's callbacks for it are that runtime call's and are passed over).

Usage: attach.py [--env K=V]... -- PROG ARGS
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

# Keys whose values depend on the run (times, ids, stacks) or on how vramtap was loaded.
DROPPED = {"pid", "command", "start_unix", "sites", "modules", "attach", "nested_calls",
           "host_ram", "rss_bytes", "rss_at_peak_bytes", "workers_at_peak_bytes", "file",
           "stacks_bound"}


def stacks(doc):
    """Each site id of doc as its native frames, (module, offset) each."""
    return {s["id"]: [(f.get("module"), f.get("offset")) for f in s["frames"]
                      if f.get("type") == "native"] for s in doc.get("sites", [])}


def normal(x, key="", sites=None):
    if isinstance(x, dict):
        out = {}
        for k, v in x.items():
            if k in DROPPED or k.endswith("_s"):
                continue
            if key == "bounds" and k in ("stacks", "modules"):
                continue
            if k == "history_events":  # [time, ...]
                v = [e[1:] for e in v]
            elif k == "site" and isinstance(v, int):
                v = sites.get(v)
            out[k] = normal(v, k, sites)
        return out
    if isinstance(x, list):
        return [normal(v, key, sites) for v in x]
    return x


def run(cmd, env, attach):
    env = dict(env)
    out = tempfile.mkdtemp(prefix="vt-attach-")
    env["VRAMTAP_OUT"] = out
    env["LD_LIBRARY_PATH"] = env["VT_STANDIN_DIR"] + (
        ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    if attach:
        env["CUDA_INJECTION64_PATH"] = env["VT_LIB"]
        # a sanitizer's runtime must still come first; vramtap itself is not preloaded
        rest = [p for p in env["VT_PRELOAD"].split(":") if p != env["VT_LIB"]]
        if rest:
            env["LD_PRELOAD"] = ":".join(rest)
    else:
        env["LD_PRELOAD"] = env["VT_PRELOAD"]
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=600)
    docs = []
    for path in glob.glob(os.path.join(out, "vramtap.*.json")):
        # the library writes compact files: read through the command
        docs.append(json.loads(subprocess.check_output([env["VT_CLI"], "export", "--json", path])))
    shutil.rmtree(out)  # the figures compared are in docs; random's files hold 100k allocations
    # one process after another in pid order; a process's post-mortems in their order
    docs.sort(key=lambda d: (d["pid"], d.get("kind") != "oom", d.get("oom", {}).get("n", 0)))
    pids = sorted({d["pid"] for d in docs})
    for d in docs:
        d["process"] = pids.index(d["pid"])
    return p, docs


def first_difference(a, b, path=""):
    if type(a) is not type(b):
        return "%s: %r != %r" % (path, a, b)
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return "%s.%s: only in %s" % (path, k, "interposition" if k in a else "attach")
            d = first_difference(a[k], b[k], path + "." + k)
            if d:
                return d
    elif isinstance(a, list):
        if len(a) != len(b):
            return "%s: %d entries != %d" % (path, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, "%s[%d]" % (path, i))
            if d:
                return d
    elif a != b:
        return "%s: %r != %r" % (path, a, b)
    return None


def main():
    args = sys.argv[1:]
    env = dict(os.environ)
    while args and args[0] != "--":
        if args[0] == "--env":
            k, _, v = args[1].partition("=")
            env[k] = v
            args = args[2:]
        else:
            sys.exit("attach.py: unknown option " + args[0])
    cmd = args[1:]
    pre, pre_docs = run(cmd, env, False)
    att, att_docs = run(cmd, env, True)
    failures = []
    if pre.returncode != att.returncode:
        failures.append("exit status %d preloaded, %d attached" % (pre.returncode, att.returncode))
    if not pre_docs:
        failures.append("the preloaded run wrote no snapshot")
    if [d.get("attach") for d in att_docs] != ["cupti"] * len(att_docs):
        failures.append("attached snapshots say %s" % [d.get("attach") for d in att_docs])
    allocs = 0
    if len(pre_docs) != len(att_docs):
        failures.append("%d snapshots preloaded, %d attached" % (len(pre_docs), len(att_docs)))
    for a, b in zip(pre_docs, att_docs):
        d = first_difference(normal(a, sites=stacks(a)), normal(b, sites=stacks(b)))
        if d:
            failures.append("%s snapshot of process %d: %s" % (a.get("kind"), a["process"], d))
        allocs += len(a.get("allocations", [])) + len(a.get("history_allocations", []))
    if not allocs:
        failures.append("no allocation was compared")
    if failures:
        sys.stderr.write(att.stderr)
        for f in failures:
            print("FAIL: " + f)
        sys.exit(1)
    print("%d snapshots, %d allocations: the same preloaded and attached" %
          (len(pre_docs), allocs))


main()
