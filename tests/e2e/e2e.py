#!/usr/bin/python3
"""End to end: the simulated training job under the preloaded library over the stand-in, then
the vramtap command on what it wrote. The job prints the bill it knows it made; the report
must find exactly that.

    e2e.py bill [train_sim args]   the five categories at the peak, exact
    e2e.py diff                    batch 4 vs 8: only activations change
    e2e.py oom                     a post-mortem written at the failure, and its report
    e2e.py ranks                   two ranks: one line each, the heavier named
    e2e.py signatures              the same code path, the same signatures in two runs
    e2e.py messages                what `vramtap run` says on stderr, start and exit
    e2e.py lines                   sites named by file and line from the program's DWARF
"""
import glob
import json
import os
import shutil
import re
import subprocess
import sys
import tempfile

# vramtap.<prog>.<host>[.r<rank>].<pid>.oom<N>[-<k>].json
POSTMORTEM = re.compile(r"\.oom(\d+)(?:-\d+)?\.json$")

ENV = dict(os.environ)
CLI = ENV["VT_CLI"]
SIM = ENV["VT_TRAIN_SIM"]
CATEGORIES = ["parameters", "gradients", "optimizer_state", "activations", "temporary",
              "unattributed"]
failures = []
made = []  # temporary folders (tmpdir)


def tmpdir(prefix):
    """A temporary folder, removed at finish() when every check passed."""
    made.append(tempfile.mkdtemp(prefix=prefix))
    return made[-1]


def expect(got, want, label):
    if got != want:
        failures.append("%s: got %r, expected %r" % (label, got, want))


def fmt_bytes(n):
    """A byte count as the report prints it: "512 B", "1.50 KiB", "9.50 MiB"."""
    if abs(n) < 1024:
        return "%d B" % n
    v, units = abs(n) / 1024, ["KiB", "MiB", "GiB", "TiB"]
    while v >= 1024 and len(units) > 1:
        v, units = v / 1024, units[1:]
    return "%s%.2f %s" % ("-" if n < 0 else "", v, units[0])


def rows(text, labels):
    """The figure of each labelled row of the report ("    parameters   17.00 MiB  22.2% ..."):
    the first two words after the label."""
    out = {}
    for line in text.splitlines():
        for label in labels:
            rest = line.strip()[len(label):].split()
            if line.strip().startswith(label + " ") and len(rest) > 1 and rest[0][0].isdigit():
                out.setdefault(label, " ".join(rest[:2]))
    return out


def run_sim(args, extra_env=None, want_exit=0):
    """Runs the job; returns (its expectations, the snapshot path, the out dir)."""
    out = tmpdir("vt-e2e-")
    env = dict(ENV, VRAMTAP_OUT=out, LD_PRELOAD=ENV["VT_PRELOAD"],
               LD_LIBRARY_PATH=ENV["VT_STANDIN_DIR"])
    env.update(extra_env or {})
    p = subprocess.run([SIM] + args, env=env, capture_output=True, text=True, timeout=300)
    sys.stderr.write(p.stderr)
    expect(p.returncode, want_exit, "train_sim %s exit status" % args)
    want = {}
    for line in p.stdout.splitlines():
        w = line.split()
        if w[:2] == ["EXPECT", "category"]:
            want[w[2]] = int(w[3])
        elif w[:2] == ["EXPECT", "peak"]:
            want["peak"] = int(w[2])
        elif w[:2] == ["EXPECT", "phase"]:
            want["phase:" + w[2]] = int(w[3])
    snaps = [f for f in glob.glob(os.path.join(out, "vramtap.*.json"))
             if not POSTMORTEM.search(f)]
    return want, (snaps[0] if len(snaps) == 1 else None), out


def cli(args, want_exit=0):
    p = subprocess.run([CLI] + args, capture_output=True, text=True, timeout=300)
    sys.stderr.write(p.stderr)
    expect(p.returncode, want_exit, "vramtap %s exit status" % " ".join(args))
    return p.stdout


def report_json(path):
    try:
        return json.loads(cli(["report", "--json", path]))
    except json.JSONDecodeError as e:
        failures.append("vramtap report --json %s: not JSON (%s)" % (path, e))
        return {"devices": [{}]}


def bill(args):
    killed = "--killed-after" in args
    want, snap, _ = run_sim(args, want_exit=-9 if killed else 0)
    if not snap:
        failures.append("no snapshot written")
        return
    dev = report_json(snap)["devices"][0]
    expect(dev.get("peak_bytes"), want["peak"], "peak_bytes")
    cats = dev.get("categories", {})
    if "--no-markers" in args:
        for c in CATEGORIES:
            expect(cats.get(c), want["peak"] if c == "unattributed" else 0, "category " + c)
    else:
        for c in CATEGORIES:
            expect(cats.get(c), want.get(c, 0), "category " + c)
    expect(dev.get("peak", {}).get("phase"), None if "--no-markers" in args else "backward",
           "peak phase")
    doc = json.loads(subprocess.check_output([CLI, "export", "--json", snap]))
    expect(doc["kind"], "interim" if killed else "exit", "snapshot kind")
    steps = int(args[args.index("--steps") + 1]) if "--steps" in args else 3
    accum = int(args[args.index("--accum") + 1]) if "--accum" in args else 1
    if killed:
        steps = 2  # the last file written: the step where the peak last rose
    if "--no-markers" not in args:
        # One record per phase instance, in order, and the peak inside backward of step 1.
        kinds = [t["phase"] for t in doc["timeline"]]
        expect(kinds, (["forward", "backward"] * accum + ["optimizer"]) * steps, "timeline")
        expect([t["instance"] for t in doc["timeline"]], list(range(1, len(kinds) + 1)),
               "timeline instances")
        peak_span = [t for t in doc["timeline"]
                     if t["devices"][0]["live_max"] == want["peak"]]
        expect([(t["phase"], t["step"]) for t in peak_span][:1], [("backward", 1)],
               "first phase instance reaching the peak")
    # The human report's rows carry the same figures (every row is printed, 0 B included, so
    # naming a category proves nothing).
    human = cli(["report", snap])
    if "--no-markers" in args:
        split = report_json(snap)["devices"][0].get("unattributed_split", {})
        expect(split.get("persistent", 0) + split.get("transient", 0), want["peak"],
               "persistent + transient")
        want_rows = {"unattributed (persistent)": fmt_bytes(split.get("persistent", -1)),
                     "unattributed (transient)": fmt_bytes(split.get("transient", -1))}
    else:
        want_rows = {c.replace("_", " "): fmt_bytes(want.get(c, 0)) for c in CATEGORIES[:-1]}
    want_rows["total"] = fmt_bytes(want["peak"])
    expect(rows(human, want_rows), want_rows, "the human report's category rows")


def diff():
    want4, snap4, _ = run_sim(["--batch", "4"])
    want8, snap8, _ = run_sim(["--batch", "8"])
    if not (snap4 and snap8):
        failures.append("no snapshots written")
        return
    a = report_json(snap4)["devices"][0].get("categories", {})
    b = report_json(snap8)["devices"][0].get("categories", {})
    for c in CATEGORIES:
        changed = a.get(c) != b.get(c)
        expect(changed, c == "activations", "category %s changed" % c)
    expect(b.get("activations", 0) - a.get("activations", 0),
           want8["activations"] - want4["activations"], "activations growth")
    # Each category row of the human diff: A, B and the change, with activations alone moving.
    got = {}
    for line in cli(["diff", snap4, snap8]).splitlines():
        for c in CATEGORIES[:-1]:
            if line.strip().startswith(c.replace("_", " ") + " "):
                got[c] = line.strip()[len(c):].split()[:6]
    want_rows = {}
    for c in CATEGORIES[:-1]:
        a_b, d = want4.get(c, 0), want8.get(c, 0) - want4.get(c, 0)
        change = fmt_bytes(d) if d <= 0 else "+" + fmt_bytes(d)
        want_rows[c] = (fmt_bytes(a_b) + " " + fmt_bytes(want8.get(c, 0)) + " " + change).split()
    expect(got, want_rows, "the human diff's category rows (A, B, change)")


def oom():
    # Room for the first step but not for the optimizer state that arrives with it.
    _, _, out = run_sim(["--batch", "4"], {"STANDIN_CAPACITY": str(40 << 20)}, want_exit=1)
    files = sorted(glob.glob(os.path.join(out, "vramtap.*.oom*.json")))
    expect(len(files), 1, "post-mortem files")
    if not files:
        return
    pm = json.loads(subprocess.check_output([CLI, "export", "--json", files[0]]))
    expect(pm["kind"], "oom", "post-mortem kind")
    expect(pm["oom"]["size"], 4 << 20, "failed request size")
    expect(pm["oom"]["phase"], "optimizer", "failed request phase")
    live = sum(a["size"] for a in pm["allocations"])
    expect(pm["oom"]["total_bytes"], 40 << 20, "device total")
    expect(pm["oom"]["free_bytes"], (40 << 20) - live, "device free = total - live")
    # The report's own words, not the file name it repeats (which always holds "oom").
    lines = [l.strip() for l in cli(["report", files[0]]).splitlines()]
    expect(lines[0].endswith("(out-of-memory post-mortem)"), True,
           "the report's title names a post-mortem: %r" % lines[0])
    expect("out of memory on cuda:0" in lines, True, "the report's 'out of memory on cuda:0' line")
    asked = [" ".join(l.split()).split(", at ")[0] for l in lines if l.startswith("asked ")]
    expect(asked, ["asked 4.00 MiB via %s, optimizer of step 0" % pm["oom"]["api"]],
           "the report's failed request")
    rj = report_json(files[0]).get("oom", {})
    expect((rj.get("size"), rj.get("phase"), rj.get("live_bytes")),
           (4 << 20, "optimizer", live), "report --json: the request and the live bytes")


def ranks():
    outdir = tmpdir("vt-ranks-")
    for rank, b in ((0, "4"), (1, "8")):
        run_sim(["--batch", b], {"VRAMTAP_OUT": outdir, "RANK": str(rank),
                                 "LOCAL_RANK": str(rank)})
    pid, peak = {}, {}
    for f in glob.glob(os.path.join(outdir, "vramtap.*.json")):
        doc = json.loads(subprocess.check_output([CLI, "export", "--json", f]))
        pid[doc["rank"]["rank"]] = doc["pid"]
        peak[doc["rank"]["rank"]] = doc["devices"][0]["peak_bytes"]
    expect(sorted(pid), [0, 1], "ranks written")
    expect(peak.get(1, 0) > peak.get(0, 0), True, "batch 8 peaks higher than batch 4")
    if len(pid) != 2:
        return
    text = cli(["report", outdir])
    # "  rank local pid device peak ...": one row per rank, each with its own pid
    rows = {}
    for line in text.splitlines():
        w = line.split()
        if len(w) > 4 and w[0].isdigit() and w[3] == "cuda:0":
            rows[int(w[0])] = (int(w[1]), int(w[2]), w[4] + " " + w[5])
    mib = {r: "%.2f MiB" % (peak[r] / (1 << 20)) for r in peak}
    expect(rows, {r: (r, pid[r], mib[r]) for r in (0, 1)}, "one row per rank: local rank, pid, peak")
    heaviest = [l.split() for l in text.splitlines() if l.split()[:1] == ["heaviest"]]
    expect(heaviest, [["heaviest", "rank", "1,", "pid", "%d" % pid[1], "on", os.uname().nodename + ":"]
                      + mib[1].split() + ["on", "cuda:0"]],
           "the heaviest line names rank 1, its pid and its host")


def signatures():
    """The same code path gets the same signature in two runs (addresses differ: ASLR)."""
    views = []
    for _ in range(2):
        _, snap, _ = run_sim(["--batch", "4"])
        doc = json.loads(subprocess.check_output([CLI, "export", "--json", snap]))
        sig = [s["signature"] for s in doc["sites"]]
        by_sig = {}
        for a in doc["allocations"]:
            if a["site"] is not None:
                by_sig[sig[a["site"]]] = by_sig.get(sig[a["site"]], 0) + a["size"]
        views.append((by_sig, sorted(a["address"] for a in doc["allocations"])))
    expect(len(views[0][0]) >= 6, True, "distinct sites in a run")
    expect(views[0][0], views[1][0], "bytes by signature across two runs")


def messages():
    """Under `vramtap run`: at exit the file with its peak and the command that reads it (a
    relative --out made absolute); nothing with VRAMTAP_QUIET=1. What vramtap changed for the
    Python frameworks is said once, by the first Python process (here one a shell starts), and
    never by a program that is not Python (train_sim)."""
    cwd = tmpdir("vt-msg-")
    env = {k: v for k, v in ENV.items() if not k.startswith("VRAMTAP_") and k not in (
        "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "XLA_PYTHON_CLIENT_ALLOCATOR",
        "XLA_PYTHON_CLIENT_PREALLOCATE", "TF_GPU_ALLOCATOR")}
    env["LD_LIBRARY_PATH"] = ENV["VT_STANDIN_DIR"]
    # the sanitizer runtimes (if any) that the library needs in front of it
    env["LD_PRELOAD"] = ":".join(p for p in ENV["VT_PRELOAD"].split(":") if p != ENV["VT_LIB"])
    for mode, quiet in (("tensor", False), ("native", False), ("tensor", True)):
        if quiet:
            env["VRAMTAP_QUIET"] = "1"
        p = subprocess.run([CLI, "run", "--mode", mode, "--out", "snaps", "--", SIM, "--batch",
                            "4", "--steps", "3"], env=env, cwd=cwd, capture_output=True,
                           text=True, timeout=300)
        expect(p.returncode, 0, "vramtap run exit status")
        snaps = glob.glob(os.path.join(cwd, "snaps", "vramtap.train_sim.*.json"))
        expect(len(snaps), 1, "snapshots")
        got = [l for l in p.stderr.splitlines() if l.startswith("vramtap:")]
        if quiet:
            expect(got, [], "VRAMTAP_QUIET=1: lines on stderr")
            continue
        want = ["vramtap: snapshot written, cuda:0 peak 76.50 MiB in backward of step 1; "
                "to read it: vramtap report " + (snaps[0] if snaps else "?")]
        expect(got, want, "--mode %s, a program that is not Python: lines on stderr" % mode)
        for f in snaps:
            os.unlink(f)
    del env["VRAMTAP_QUIET"]
    tensor = ("vramtap: tensor mode: set PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync, "
              "XLA_PYTHON_CLIENT_ALLOCATOR=platform, XLA_PYTHON_CLIENT_PREALLOCATE=false, "
              "TF_GPU_ALLOCATOR=cuda_malloc_async so that frameworks allocate per tensor "
              "(--mode native keeps their own allocators)")
    native = "vramtap: allocator settings left as they are (native mode)"
    # the shell is the process the user started: it says that it allocated nothing (bash: dash
    # leaves by _exit, past every destructor)
    py = "/usr/bin/python3 -c pass"
    for mode, first in (("tensor", tensor), ("native", native)):
        p = subprocess.run([CLI, "run", "--mode", mode, "--out", "snaps", "--", "bash", "-c",
                            py + "; true"], env=env, cwd=cwd, capture_output=True, text=True,
                           timeout=300)
        got = [l for l in p.stderr.splitlines() if l.startswith("vramtap:")]
        expect([re.sub(r"\(pid \d+\)", "(pid N)", l) for l in got],
               [first, "vramtap: no CUDA device allocation seen in bash (pid N): no snapshot written"],
               "--mode %s, Python started by a shell: lines on stderr" % mode)


def build_id(path):
    """The GNU build id of an ELF file, in lowercase hex (None without one)."""
    import struct
    with open(path, "rb") as f:
        elf = f.read()
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", elf, 0x3a)
    for i in range(shnum):
        sh = shoff + i * shentsize
        kind, = struct.unpack_from("<I", elf, sh + 4)
        off, size = struct.unpack_from("<QQ", elf, sh + 0x18)
        pos = off
        while kind == 7 and pos + 12 <= off + size:  # SHT_NOTE
            namesz, descsz, ntype = struct.unpack_from("<III", elf, pos)
            name = elf[pos + 12:pos + 12 + namesz]
            desc_at = pos + 12 + ((namesz + 3) & ~3)
            if ntype == 3 and name == b"GNU\0":  # NT_GNU_BUILD_ID
                return elf[desc_at:desc_at + descsz].hex()
            pos = desc_at + ((descsz + 3) & ~3)
    return None


def with_module(snap, path, bid, out):
    """The snapshot with the program's entry in modules naming `path` and build id `bid`."""
    doc = json.loads(subprocess.check_output([CLI, "export", "--json", snap]))
    for m in doc.get("modules", []):
        if m["path"] == os.path.realpath(SIM):
            m.update(path=path, build_id=bid)
    with open(out, "w") as f:
        json.dump(doc, f)
    return out


def source_line(text):
    """The line of train_sim.c holding `text`."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "train_sim.c")) as f:
        found = [i + 1 for i, l in enumerate(f) if text in l]
    expect(len(found), 1, "lines of train_sim.c holding %r" % text)
    return found[0] if found else -1


def lines():
    """Frames resolved to function, file and line from the module path and build id the
    library records; the C library's start-up folded; what is missing said."""
    _, snap, out = run_sim(["--batch", "4"])
    if not snap:
        failures.append("no snapshot written")
        return
    mods = {m["path"]: m["build_id"] for m in json.loads(subprocess.check_output([CLI, "export", "--json", snap])).get("modules", [])}
    bid = build_id(SIM)
    expect(mods.get(os.path.realpath(SIM)), bid, "the program's module and build id recorded")
    at = "e2e/train_sim.c:%d " % source_line("if (cudaMalloc(&p, size) != cudaSuccess)")
    want = {
        "parameters": at + "alloc < e2e/train_sim.c:%d main" % source_line(
            "cache = alloc(1 * MiB, PARAM)"),
        "gradients": at + "alloc < e2e/train_sim.c:%d backward_worker" % source_line(
            "grads[l] = alloc(4 * MiB, GRAD)"),
        "optimizer_state": "e2e/train_sim.c:%d main" % source_line("driver_alloc(&p, 4 * MiB)"),
    }
    sites = report_json(snap)["devices"][0].get("top_sites", {})
    got = {c: [s["label"] for s in sites.get(c, [])] for c in want}
    expect(got["gradients"], [want["gradients"]], "gradient site")
    expect(got["optimizer_state"], [want["optimizer_state"]], "optimizer state site")
    expect(want["parameters"] in got["parameters"], True,
           "the lazily built parameter's site among %r" % got["parameters"])
    text = cli(["report", snap])
    expect("sites without file and line" in text, False, "nothing said missing:\n" + text)
    expect("libc.so" in text or "__libc_start_main" in text, False,
           "C library start-up folded:\n" + text)
    os.environ["COLUMNS"] = "400"
    expect("libc_start" in cli(["report", "--all-frames", snap]), True,
           "--all-frames shows the C library's start-up")

    # A copy without debug information, a program rebuilt since the run, the file gone.
    stripped = os.path.join(out, "train_sim.stripped")
    subprocess.run(["objcopy", "--strip-debug", SIM, stripped], check=True)
    for path, bid2, said in ((stripped, bid, "train_sim.stripped has no debug information"),
                             (SIM, "00" * 20, "train_sim changed since the run"),
                             (out + "/gone", bid, "gone is not found (%s/gone)" % out)):
        text = cli(["report", with_module(snap, path, bid2, os.path.join(out, "m.json"))])
        expect(said in text.replace("\n  ", " "), True, "%r said in:\n%s" % (said, text))
        expect("e2e/train_sim.c" in text, False, "no file and line from %s" % path)
        expect("alloc < main" in text and "libc.so" not in text, True,
               "symbols, start-up still folded:\n" + text)


def main():
    what, args = sys.argv[1], sys.argv[2:]
    {"bill": lambda: bill(args), "diff": diff, "oom": oom, "ranks": ranks,
     "signatures": signatures, "messages": messages,
     "lines": lines}[what]()
    finish(what)


def finish(label):
    for f in failures:
        print("FAIL:", f)
    print("%s: %d failures" % (label, len(failures)))
    if not failures:  # kept only to look into a failure
        for folder in made:
            shutil.rmtree(folder, ignore_errors=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
