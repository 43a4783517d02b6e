"""scripts/gpu-validate's driver (stdlib only): builds what it needs, runs the CUDA C program and
the PyTorch workload under vramtap and plainly, holds vramtap's snapshots and reports to the
programs' own accounts and to PyTorch's own figures, and writes the report.

Run it through scripts/gpu-validate (which picks the Python that has torch); see
docs/validation/README.md for the options and the device command line.

Every figure in the report is computed here from what the runs wrote; tolerances are stated
next to the check that uses them. A check is one of:
  exact      must be equal; a failure makes the exit status 1
  tolerance  equal within a stated bound and reason; reported, does not change the exit status
  info       a figure shown side by side, no verdict
"""

import argparse
import datetime
import glob
import gzip
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

# vramtap.<prog>.<host>[.r<rank>].<pid>.oom<N>[-<k>].json
POSTMORTEM = re.compile(r"\.oom(\d+)(?:-\d+)?\.json$")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WORKLOAD = os.path.join(HERE, "workload.py")
# The Python frames tests' program (tests/python_stacks): allocations in generators, coroutines,
# partials, callbacks from C, exec'd code, each noting traceback.extract_stack() at its call.
FRAMES_PY = os.path.join(ROOT, "tests", "python_stacks", "frames.py")
ROUTES_C = os.path.join(HERE, "routes.c")
# scripts/bench's allocation pair program (cudaMallocAsync + cudaFreeAsync, N threads, L live).
PAIR_C = os.path.join(ROOT, "bench", "alloc_pair.c")
MiB = 1 << 20

SECTIONS = ["versions", "cuda", "tensor", "native", "tools", "oom", "attach", "frames", "cost"]
# Run order: the comparisons with PyTorch's tools last, so that a run short of time loses them
# rather than the checks.
RUN_ORDER = ["cuda", "tensor", "native", "oom", "attach", "frames", "cost", "tools"]
SECTION_TITLES = {
    "versions": "1. Machine and versions",
    "cuda": "2. CUDA C: every route, dynamic and static runtime",
    "tensor": "3. PyTorch, tensor mode (fp32 and bf16 autocast)",
    "native": "4. PyTorch, native allocator (reserved memory)",
    "tools": "5. Against PyTorch's own tools",
    "oom": "6. Out of memory",
    "attach": "7. Attached through CUPTI, and the coverage check",
    "frames": "8. Python frames on this Python",
    "cost": "9. What an allocation costs on this driver",
}


# ---------------------------------------------------------------------------------------------
# Small helpers


def fmt_bytes(n):
    if n is None:
        return "n/a"
    if not isinstance(n, int):
        return str(n)
    sign = "-" if n < 0 else ""
    a = abs(n)
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if a >= size:
            return "%s%s B (%s%.2f %s)" % (sign, format(a, ","), sign, a / size, unit)
    return "%s%s B" % (sign, format(a, ","))


def md_escape(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        out.append("| " + " | ".join(md_escape(c) for c in r) + " |")
    return "\n".join(out) + "\n"


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def load_snapshot(ctx, path):
    """A snapshot as JSON: the library writes a compact file, `vramtap export --json` spells it
    out. None when it cannot be read."""
    try:
        return json.loads(subprocess.run([ctx.build["cli"], "export", "--json", path],
                                         capture_output=True, check=True, timeout=600).stdout)
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def round_up(n, g):
    return -(-n // g) * g


def addr_int(a):
    if a is None:
        return None
    return int(a, 16) if isinstance(a, str) else int(a)


class Checks:
    def __init__(self):
        self.items = []

    def add(self, section, name, expected, got, kind="exact", ok=None, note="", status=None):
        """ok None: compare expected == got. status overrides (skipped, n/a, info)."""
        if status is None:
            if kind == "info":
                status = "info"
            else:
                if ok is None:
                    ok = expected == got
                status = "pass" if ok else ("FAIL" if kind == "exact" else "outside tolerance")
        item = {"section": section, "name": name, "expected": expected, "got": got,
                "kind": kind, "status": status, "note": note}
        self.items.append(item)
        return item

    def skip(self, section, name, why, kind="exact"):
        return self.add(section, name, None, None, kind=kind, status="skipped", note=why)

    def of(self, section):
        return [c for c in self.items if c["section"] == section]

    def exact_failures(self):
        return [c for c in self.items if c["kind"] == "exact" and c["status"] == "FAIL"]


class Runner:
    """Runs commands with logs in the work directory and a deadline for the whole validation."""

    def __init__(self, work, budget_s):
        self.work = work
        self.logs = os.path.join(work, "logs")
        os.makedirs(self.logs, exist_ok=True)
        self.deadline = time.monotonic() + budget_s
        self.started = time.monotonic()

    def left(self):
        return self.deadline - time.monotonic()

    def run(self, name, cmd, env=None, timeout=300, cwd=None):
        timeout = max(5, min(timeout, self.left()))
        log = os.path.join(self.logs, name + ".log")
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=timeout)
            rc, out = p.returncode, p.stdout
        except subprocess.TimeoutExpired as e:
            rc, out = "timeout after %ds" % timeout, e.stdout or b""
        except OSError as e:
            rc, out = "could not start: %s" % e, b""
        text = out.decode("utf-8", "replace")
        with open(log, "w") as f:
            f.write("$ %s\n%s" % (" ".join(map(str, cmd)), text))
        return {"rc": rc, "seconds": round(time.monotonic() - t0, 2), "log": log,
                "tail": "\n".join(text.strip().splitlines()[-15:])}


def clean_env(extra=None):
    """The environment without anything that would change what vramtap or PyTorch do."""
    drop = ("LD_PRELOAD", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "NVTX_INJECTION64_PATH",
            "CUDA_INJECTION64_PATH",
            "XLA_PYTHON_CLIENT_ALLOCATOR", "XLA_PYTHON_CLIENT_PREALLOCATE", "TF_GPU_ALLOCATOR",
            "CUDA_LAUNCH_BLOCKING")
    env = {k: v for k, v in os.environ.items()
           if k not in drop and not k.startswith(("VRAMTAP_", "STANDIN_"))}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


# ---------------------------------------------------------------------------------------------
# Build and discovery


def find_cuda(python, dry):
    """Where the CUDA headers, the dynamic and static runtime and libcuda (for -lcuda) are. The
    toolkit may be in /usr/local/cuda, $CUDA_HOME, or only in PyTorch's nvidia wheels."""
    prefixes = []
    for var in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"):
        if os.environ.get(var):
            prefixes.append(os.environ[var])
    prefixes.append("/usr/local/cuda")
    prefixes += sorted(glob.glob("/usr/local/cuda-*"), reverse=True)
    nvcc = shutil.which("nvcc")
    if nvcc:
        prefixes.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    try:
        out = subprocess.run([python, "-c", "import nvidia, sys; print('\\n'.join(nvidia.__path__))"],
                             capture_output=True, text=True, timeout=60).stdout
        for d in out.split():
            prefixes += [os.path.join(d, x) for x in sorted(os.listdir(d))
                         if os.path.isdir(os.path.join(d, x))]
    except (OSError, subprocess.SubprocessError):
        pass
    found = {"prefixes_searched": prefixes}

    def first(patterns):
        for p in prefixes:
            for pat in patterns:
                hits = sorted(glob.glob(os.path.join(p, pat)))
                if hits:
                    return hits[0]
        return None

    inc = first(["include/cuda.h", "targets/*/include/cuda.h"])
    found["include"] = os.path.dirname(inc) if inc else None
    found["cudart_shared"] = first(["lib64/libcudart.so", "lib/libcudart.so",
                                    "targets/*/lib/libcudart.so", "lib64/libcudart.so.1[0-9]",
                                    "lib/libcudart.so.1[0-9]", "lib/libcudart.so.*"])
    found["cudart_static"] = first(["lib64/libcudart_static.a", "lib/libcudart_static.a",
                                    "targets/*/lib/libcudart_static.a"])
    libcuda = None
    if not dry:
        # The real driver (its soname is what the program will load) or else the toolkit's stub.
        cands = ["/usr/local/nvidia/lib64/libcuda.so.1", "/usr/local/nvidia/lib/libcuda.so.1",
                 "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib64/libcuda.so.1",
                 "/usr/lib/libcuda.so.1"]
        try:
            out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True,
                                 timeout=30).stdout
            cands = [l.split("=>")[-1].strip() for l in out.splitlines()
                     if "libcuda.so.1 " in l] + cands
        except (OSError, subprocess.SubprocessError):
            pass
        libcuda = next((c for c in cands if os.path.exists(c)), None) or first(
            ["lib64/stubs/libcuda.so", "lib/stubs/libcuda.so", "targets/*/lib/stubs/libcuda.so"])
    found["libcuda"] = libcuda
    found["nvcc"] = nvcc
    return found


def tool_cmd(name, python):
    """`meson` or `ninja` as a command: on PATH, beside the Python (a venv's bin), or its module."""
    exe = shutil.which(name) or shutil.which(name, path=os.path.dirname(python))
    if exe:
        return [exe]
    module = {"meson": "mesonbuild.mesonmain", "ninja": "ninja"}[name]
    probe = subprocess.run([python, "-c", "import " + module.split(".")[0]], capture_output=True)
    return [python, "-m", module] if probe.returncode == 0 else None


def verify_build(d):
    """The two binaries of a build directory, if they exist and can load here."""
    lib = os.path.join(d, "src", "tap", "libvramtap.so")
    cli = os.path.join(d, "src", "cli", "vramtap")
    if not (os.path.exists(lib) and os.path.exists(cli)):
        return None, "no libvramtap.so or vramtap in %s" % d
    for obj in (lib, cli):
        try:
            out = subprocess.run(["ldd", obj], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        missing = [l.split()[0] for l in out.splitlines() if "not found" in l]
        if missing:
            return None, "%s needs %s, not found here" % (os.path.basename(obj), ", ".join(missing))
    p = subprocess.run([cli, "--version"], capture_output=True, text=True)
    if p.returncode != 0:
        return None, "%s --version failed: %s" % (cli, p.stderr.strip())
    return {"dir": d, "lib": lib, "cli": cli, "version": p.stdout.strip(),
            "standin": os.path.join(d, "tests", "standin")}, None


def build_vramtap(ctx, dry):
    """Use --build, else build here (release; plus the stand-in in a dry run), else fall back to
    a build carried along in build-validate-carry."""
    notes = []
    if ctx.args.build:
        b, why = verify_build(os.path.abspath(ctx.args.build))
        if b:
            b["how"] = "given with --build"
            return b, notes
        notes.append("--build %s unusable: %s" % (ctx.args.build, why))
    bdir = os.path.join(ROOT, "build-validate" if dry else "build-gpu-validate")
    meson, ninja = tool_cmd("meson", ctx.python), tool_cmd("ninja", ctx.python)
    env = clean_env({"PATH": os.path.dirname(ctx.python) + os.pathsep + os.environ.get("PATH", "")})
    if meson and ninja:
        ok = True
        if not os.path.exists(os.path.join(bdir, "build.ninja")):
            shutil.rmtree(bdir, ignore_errors=True)  # a setup that failed earlier
            opts = ["-Dbuildtype=release"] if not dry else []
            if ctx.cuda.get("include"):
                opts.append("-Dcudaheaders=" + ctx.cuda["include"])
            r = ctx.runner.run("build-setup", meson + ["setup", bdir] + opts, env=env, cwd=ROOT,
                               timeout=300)
            ok = r["rc"] == 0
            if not ok:
                notes.append("meson setup failed (%s): %s" % (r["rc"], r["tail"][-600:]))
        if ok:
            targets = ["src/tap/libvramtap.so", "src/cli/vramtap"]
            if dry:
                # the driver, the runtime, and the CUPTI that attach mode subscribes to
                targets += ["tests/standin/libcuda.so.1", "tests/standin/libcudart.so.13",
                            "tests/standin/libcupti.so.13"]
            r = ctx.runner.run("build", ninja + ["-C", bdir] + targets, env=env, timeout=600)
            if r["rc"] != 0:
                notes.append("ninja failed (%s): %s" % (r["rc"], r["tail"][-600:]))
            else:
                b, why = verify_build(bdir)
                if b:
                    b["how"] = "built here in %s" % os.path.relpath(bdir, ROOT)
                    return b, notes
                notes.append(why)
    else:
        notes.append("meson or ninja not found")
    carry = CARRY
    if os.path.isdir(carry):
        b, why = verify_build(carry)
        if b:
            b["how"] = "carried along in build-validate-carry (the build here failed)"
            return b, notes
        notes.append("build-validate-carry unusable: %s" % why)
    return None, notes


CARRY = os.path.join(ROOT, "build-validate-carry")
# Libraries the two binaries need, directly or through one another, that a CUDA/PyTorch image may
# lack (the CLI reads DWARF line tables with elfutils' libdw, which needs libelf and libbz2); the
# rest (libc, libm, libz, liblzma) every distribution has.
CARRY_LIBS = re.compile(r"^lib(jansson|yajl|unwind|dw|elf|bz2)[.-]")


def prepare_carry(python):
    """Build a release vramtap here to carry to the device, in build-validate-carry (ignored by
    git as /build*/): the two binaries look for the libraries of CARRY_LIBS in ../../deps first,
    where copies of this machine's are put. An RPATH, not a RUNPATH: the loader follows a RUNPATH
    only for the binary's own needs, and libdw's libelf is found through it too."""
    meson, ninja = tool_cmd("meson", python), tool_cmd("ninja", python)
    if not (meson and ninja):
        print("gpu-validate: meson and ninja are needed", file=sys.stderr)
        return 2
    shutil.rmtree(CARRY, ignore_errors=True)
    cuda = find_cuda(python, True)
    opts = ["-Dbuildtype=release", "-Dc_link_args=-Wl,--disable-new-dtags,-rpath,$ORIGIN/../../deps"]
    if cuda.get("include"):
        opts.append("-Dcudaheaders=" + cuda["include"])
    for cmd in (meson + ["setup", CARRY] + opts,
                ninja + ["-C", CARRY, "src/tap/libvramtap.so", "src/cli/vramtap"]):
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if p.returncode != 0:
            print(p.stdout[-2000:] + p.stderr[-2000:], file=sys.stderr)
            return 2
    deps = os.path.join(CARRY, "deps")
    os.makedirs(deps, exist_ok=True)
    for obj in ("src/tap/libvramtap.so", "src/cli/vramtap"):
        out = subprocess.run(["ldd", os.path.join(CARRY, obj)], capture_output=True,
                             text=True).stdout
        for line in out.splitlines():
            m = re.match(r"\s*(\S+) => (\S+)", line)
            if m and CARRY_LIBS.match(m.group(1)):
                shutil.copy2(os.path.realpath(m.group(2)), os.path.join(deps, m.group(1)))
    b, why = verify_build(CARRY)
    if not b:
        print("gpu-validate: the carried build does not run here: %s" % why, file=sys.stderr)
        return 2
    size = sum(os.lstat(os.path.join(d, f)).st_size for d, _, fs in os.walk(CARRY) for f in fs)
    print("gpu-validate: %s ready (%s; deps: %s)" % (os.path.relpath(CARRY, ROOT),
                                                    fmt_bytes(size), ", ".join(os.listdir(deps))))
    return 0


# ---------------------------------------------------------------------------------------------
# vramtap's outputs


def remove_snapshots(out_dir):
    """Every file vramtap wrote to out_dir: the next run's are then the only ones there."""
    for f in glob.glob(os.path.join(out_dir, "*.json")):
        os.remove(f)


def find_snapshots(out_dir):
    snaps = sorted(f for f in glob.glob(os.path.join(out_dir, "vramtap.*.json"))
                   if not POSTMORTEM.search(f))
    ooms = sorted(glob.glob(os.path.join(out_dir, "vramtap.*.oom*.json")),
                  key=lambda f: int(POSTMORTEM.search(f).group(1)))
    return snaps, ooms


def report_json(ctx, path, name):
    r = ctx.runner.run(name, [ctx.build["cli"], "report", "--json", path], timeout=120)
    if r["rc"] != 0:
        return None, "vramtap report --json exited %s: %s" % (r["rc"], r["tail"][-400:])
    with open(r["log"]) as f:
        text = f.read().split("\n", 1)[1]
    try:
        return json.loads(text), None
    except ValueError as e:
        return None, "vramtap report --json: not JSON (%s)" % e


def subset_categories(ctx, snap, groups, tag):
    """vramtap's own classifier on groups of the allocations live at the peak: each group is
    written as a copy of the snapshot holding only its allocations and reported on. (The
    classifier looks at one allocation at a time: its birth, death and the run's last step.)"""
    out = {}
    for gname, allocs in groups.items():
        if not allocs:
            out[gname] = None
            continue
        doc = dict(snap)
        doc["allocations"] = allocs
        path = os.path.join(ctx.runner.work, "subset-%s-%s.json" % (tag, gname))
        with open(path, "w") as f:
            json.dump(doc, f)
        rep, err = report_json(ctx, path, "report-subset-%s-%s" % (tag, gname))
        dev = (rep or {}).get("devices") or [{}]
        out[gname] = dev[0].get("categories") if rep else {"error": err}
    return out


# Frames that say nothing about who allocated: CUDA itself, the FFI and the interpreter.
PLUMBING = re.compile(r"^(libcuda|libcudart|libffi|_ctypes|python\d|libpython|libc\.so|ld-linux"
                      r"|libvramtap)")


def site_label(snap, site_index):
    """A short name for an allocation's stack: its innermost two native frames outside CUDA and
    the interpreter, and its innermost Python frame."""
    if site_index is None:
        return "(no stack)"
    sites = snap.get("sites") or []
    if not 0 <= site_index < len(sites):
        return "(site %s)" % site_index
    native, python = [], None
    for fr in sites[site_index].get("frames", []):
        if fr.get("type") == "python":
            if python is None:
                python = "%s:%s %s" % (os.path.basename(fr.get("file", "?")), fr.get("line"),
                                       fr.get("function"))
        elif len(native) < 2 and not PLUMBING.match(fr.get("module") or "?"):
            sym = fr.get("symbol") or fr.get("offset") or "?"
            native.append("%s!%s" % (fr.get("module"), sym if len(sym) <= 70 else sym[:67] + "..."))
    parts = native + ([python] if python else [])
    return " < ".join(parts) or "(only CUDA and interpreter frames)"


def explain_rounding(sizes, target):
    """The allocation granularity g (if any) for which the sizes rounded up to g add up exactly
    to `target`: how a pool that rounds each request accounts the same live set."""
    for g in (1, 256, 512, 1024, 2048, 4096, 8192, 16384, 65536, 2 * MiB):
        if sum(round_up(s, g) for s in sizes) == target:
            return g
    return None


# ---------------------------------------------------------------------------------------------
# Sections


def section_versions(ctx):
    v = ctx.raw.setdefault("versions", {})
    smi = shutil.which("nvidia-smi")
    if smi and not ctx.dry:
        r = ctx.runner.run("nvidia-smi", [smi, "--query-gpu=name,memory.total,driver_version,"
                                          "pci.bus_id", "--format=csv,noheader"], timeout=60)
        v["nvidia_smi"] = r["tail"] if r["rc"] == 0 else "not available (%s)" % r["rc"]
        r = ctx.runner.run("nvidia-smi-ids", [smi, "--query-gpu=uuid,pci.bus_id",
                                              "--format=csv,noheader"], timeout=60)
        v["gpu_ids"] = ([[x.strip() for x in l.split(",")] for l in open(r["log"]).read()
                         .splitlines() if l.startswith("GPU-")] if r["rc"] == 0 else None)
        r = ctx.runner.run("nvidia-smi-full", [smi], timeout=60)
        m = re.search(r"CUDA Version:\s*([\d.]+)", r["tail"] + open(r["log"]).read())
        v["driver_cuda_version"] = m.group(1) if m else None
    else:
        v["nvidia_smi"] = "not available" + (" (dry run)" if ctx.dry else "")
    r = ctx.runner.run("uname", ["uname", "-srm"], timeout=30)
    v["kernel"] = r["tail"]
    for tool, cmd in (("cc", ["cc", "--version"]), ("nvcc", ["nvcc", "--version"])):
        if shutil.which(cmd[0]):
            r = ctx.runner.run("version-" + tool, cmd, timeout=60)
            lines = [l for l in r["tail"].splitlines() if l.strip()]
            v[tool] = lines[-1] if tool == "nvcc" and lines else (lines[0] if lines else None)
        else:
            v[tool] = "not installed"
    v["python"] = ctx.python
    v["vramtap"] = ctx.build["version"] if ctx.build else None
    v["vramtap_build"] = ctx.build["how"] if ctx.build else None
    v["cuda_found"] = {k: ctx.cuda.get(k) for k in ("include", "cudart_shared", "cudart_static",
                                                   "libcuda", "nvcc")}
    # torch's own view comes from the first workload result (see torch_environment).


def compile_cuda_program(ctx, variant, source=ROUTES_C, opt="-O1"):
    """Builds a CUDA C program (routes.c unless `source`) against the dynamic or the static
    runtime: the executable's path and None, or None and why not."""
    name = os.path.splitext(os.path.basename(source))[0]
    exe = os.path.join(ctx.runner.work, "%s_%s" % (name, variant))
    inc = ctx.cuda.get("include")
    if not inc:
        return None, "no CUDA headers found (searched %s)" % ", ".join(
            ctx.cuda["prefixes_searched"][:6])
    cmd = ["cc", "-std=c11", "-D_GNU_SOURCE", opt, "-Wall", "-I" + inc, source, "-o", exe]
    if ctx.dry:
        sd = ctx.build["standin"]
        libcuda = ["-L" + sd, "-lcuda", "-Wl,-rpath," + sd]
    else:
        lc = ctx.cuda.get("libcuda")
        if not lc:
            return None, "no libcuda to link with (driver or toolkit stub)"
        libcuda = [lc] if lc.endswith(".so.1") else ["-L" + os.path.dirname(lc), "-lcuda"]
    if variant == "dynamic":
        if ctx.dry:
            # The stand-in runtime: NVIDIA's needs a real driver's private interfaces.
            cmd += ["-L" + ctx.build["standin"], "-lcudart"] + libcuda
        else:
            rt = ctx.cuda.get("cudart_shared")
            if not rt:
                return None, "no libcudart.so found"
            cmd += [rt, "-Wl,-rpath," + os.path.dirname(rt)] + libcuda
        cmd += ["-ldl"]
    else:
        st = ctx.cuda.get("cudart_static")
        if not st:
            return None, "no libcudart_static.a found"
        cmd += [st] + libcuda + ["-ldl", "-lrt"]
    r = ctx.runner.run("cc-%s-%s" % (name, variant), cmd + ["-lpthread"], timeout=120)
    if r["rc"] != 0:
        return None, "cc failed: %s" % r["tail"][-800:]
    return exe, None


def section_cuda(ctx):
    for variant in ("dynamic", "static"):
        sec = "cuda"
        label = "%s runtime" % variant
        exe, why = compile_cuda_program(ctx, variant)
        if ctx.dry and not exe and variant == "static" and not ctx.cuda.get("cudart_static"):
            ctx.checks.skip(sec, "%s: program builds" % label,
                            "skipped (dry run): no libcudart_static.a on this machine")
            continue
        ctx.checks.add(sec, "%s: program builds" % label, True, exe is not None, note=why or "")
        if not exe:
            continue
        if ctx.dry and variant == "static":
            ctx.checks.skip(sec, "%s: run under vramtap" % label,
                            "skipped (dry run): NVIDIA's static runtime needs a real driver (the "
                            "stand-in has no private export table); built and linked only")
            continue
        out = os.path.join(ctx.runner.work, "cuda-" + variant)
        os.makedirs(out, exist_ok=True)
        acct_path = os.path.join(out, "account.json")
        env = routes_env(ctx, out, {"LD_PRELOAD": ctx.build["lib"]})
        r = ctx.runner.run("routes-" + variant, [exe, acct_path], env=env, timeout=120)
        acct = load_json(acct_path)
        ctx.raw.setdefault("cuda", {})[variant] = {"run": r, "account": acct}
        ok = r["rc"] == 0 and acct is not None and not acct.get("errors")
        ctx.checks.add(sec, "%s: every CUDA call succeeded" % label, "exit 0, no errors",
                       "exit %s, %d errors" % (r["rc"], len((acct or {}).get("errors", []))),
                       ok=ok, note="; ".join((acct or {}).get("errors", [])[:3]) or r["tail"][-300:]
                       if not ok else "")
        if acct is None:
            continue
        snaps, _ = find_snapshots(out)
        if not ctx.checks.add(sec, "%s: snapshot written" % label, 1, len(snaps))["status"] == "pass":
            continue
        snap = load_snapshot(ctx, snaps[0])
        ctx.raw["cuda"][variant]["snapshot"] = os.path.relpath(snaps[0], ctx.runner.work)
        compare_routes(ctx, label, variant, acct, snap)


def routes_env(ctx, out, extra):
    """The routes program's environment: over the stand-in in a dry run, where vramtap must take
    the stand-in's CUPTI too, never a real one."""
    env = clean_env(dict(extra, VRAMTAP_OUT=out))
    if ctx.dry:
        env["LD_LIBRARY_PATH"] = ctx.build["standin"]
        env["VRAMTAP_CUPTI"] = os.path.join(ctx.build["standin"], "libcupti.so.13")
    return env


def compare_routes(ctx, label, variant, acct, snap, sec="cuda"):
    """Attached through CUPTI (sec "attach"), CUPTI reports the runtime's calls as called, a
    static runtime's too."""
    attached = sec == "attach"
    dev = next((d for d in snap.get("devices", []) if d["device"] == 0), {})
    ctx.checks.add(sec, "%s: peak bytes" % label, fmt_bytes(acct["peak_bytes"]),
                   fmt_bytes(dev.get("peak_bytes")), ok=acct["peak_bytes"] == dev.get("peak_bytes"))
    want = sorted((addr_int(a["address"]), a["size"], a["kind"]) for a in acct["allocations"]
                  if a["at_peak"])
    got = sorted((addr_int(a["address"]), a["size"], a["kind"]) for a in snap.get("allocations", [])
                 if a["device"] == 0)
    missing = [w for w in want if w not in got]
    extra = [g for g in got if g not in want]
    ctx.checks.add(sec, "%s: live set at the peak (address, size, kind)" % label,
                   "%d allocations" % len(want), "%d allocations" % len(got), ok=want == got,
                   note="" if want == got else "missing %s; unexpected %s" % (
                       [(hex(a), s, k) for a, s, k in missing[:4]],
                       [(hex(a), s, k) for a, s, k in extra[:4]]))
    by_addr = {(addr_int(a["address"]), a["size"]): a for a in snap.get("allocations", [])}
    rows = []
    api_ok = True
    for a in acct["allocations"]:
        s = by_addr.get((addr_int(a["address"]), a["size"])) if a["at_peak"] else None
        want_api = a["api"] if variant == "dynamic" or attached else a["api_static"]
        seen = s["api"] if s else ("(not at the peak)" if not a["at_peak"] else "MISSING")
        if a["at_peak"] and (variant == "dynamic" or attached) and seen != want_api:
            api_ok = False
        rows.append([a["route"], fmt_bytes(a["size"]), a["kind"], "yes" if a["at_peak"] else "no",
                     want_api, seen, fmt_bytes(a["dfree"]),
                     fmt_bytes(a["dfree"] - a["size"]) if a["kind"] in ("device", "vmm") else ""])
    ctx.raw[sec][variant]["table"] = rows
    if variant == "dynamic" or attached:
        ctx.checks.add(sec, "%s: API name recorded for each route" % label, "as called",
                       "as called" if api_ok else "differs", ok=api_ok)
    else:
        ctx.checks.add(sec, "%s: API names recorded" % label, None, None, kind="info",
                       note="the program's runtime calls are its own static copy, so vramtap "
                            "sees the driver calls that copy makes (table below)")
    c = snap.get("counters", {})
    ctx.checks.add(sec, "%s: allocations counted" % label, acct["allocs"], c.get("allocs"))
    ctx.checks.add(sec, "%s: frees matched" % label, acct["frees"], c.get("frees"))
    ctx.checks.add(sec, "%s: unknown frees, failed calls, dropped events" % label, [0, 0, 0],
                   [c.get("unknown_frees"), c.get("failed_calls"), c.get("dropped")])
    ctx.checks.add(sec, "%s: live bytes at the end" % label, fmt_bytes(acct["live_bytes_at_end"]),
                   fmt_bytes(dev.get("live_bytes_at_end")),
                   ok=acct["live_bytes_at_end"] == dev.get("live_bytes_at_end"))
    host = (snap.get("host") or {}).get("peak_bytes")
    ctx.checks.add(sec, "%s: pinned host memory apart (host peak)" % label,
                   fmt_bytes(acct["host_bytes"]), fmt_bytes(host), ok=acct["host_bytes"] == host)
    if not attached:
        copies_check(ctx, sec, label, acct, snap)
    # cudaMemGetInfo: the driver rounds each allocation up to its granularity (queried, not
    # assumed: cuMemGetAllocationGranularity, RECOMMENDED), pools reserve in their own chunks,
    # and managed memory takes device memory only when touched (never here).
    g = acct.get("granularity_recommended") or 2 * MiB
    at_peak = [a for a in acct["allocations"] if a["at_peak"]]
    plain = [a for a in at_peak if a["kind"] in ("device", "vmm")]
    managed = sum(a["size"] for a in at_peak if a["kind"] == "managed")
    pools = acct["default_pool_reserved_at_peak"] + acct["own_pool_reserved_at_peak"]
    expect = sum(a["size"] for a in plain) + pools
    moved = acct["free_start"] - acct["free_at_peak"]
    slack = (len(plain) + 1) * g
    ok = -slack <= moved - expect <= slack + managed
    ctx.checks.add(sec, "%s: cudaMemGetInfo's change from start to peak" % label,
                   fmt_bytes(expect), fmt_bytes(moved), kind="tolerance", ok=ok,
                   note="expected = device and VMM allocations live at the peak + the pools' "
                        "reserved bytes (%s); tolerance one granule (%s) per allocation plus one "
                        "(%d allocations), plus the %s of managed memory on the high side, which "
                        "the driver backs only when touched; difference %s" % (
                            fmt_bytes(pools), fmt_bytes(g), len(plain), fmt_bytes(managed),
                            fmt_bytes(moved - expect)))


def copies_check(ctx, sec, label, acct, snap):
    """The program's copies against the snapshot's, exactly: every copy once whichever route it
    took (a static runtime's through the driver calls it makes), by direction and host kind, and
    the downloads waited for, asynchronous ones into pinned memory at the wait for their stream
    (created and legacy default), an event or the device."""
    want = acct.get("copies")
    got = (snap.get("copies") or {}).get("total")
    diff = []
    for k, v in (want or {}).items():
        g = (got or {}).get(k)
        if isinstance(v, dict):
            diff += ["%s.%s" % (k, f) for f in v if (g or {}).get(f) != v[f]]
        elif g != v:
            diff.append(k)
    ctx.checks.add(sec, "%s: copies by direction and host kind, and the downloads waited for"
                   % label, want, got, ok=want is not None and got == want,
                   note="differs in %s" % ", ".join(diff) if diff else "")


# --- PyTorch runs --------------------------------------------------------------------------


def workload_cmd(ctx, case, out_json, extra=(), mirror_mode="pool"):
    cmd = [ctx.python, WORKLOAD, "--case", case, "--out", out_json,
           "--size", "tiny" if ctx.dry else "gpu"] + list(extra)
    if ctx.dry:
        cmd += ["--mirror", os.path.join(ctx.build["standin"], "libcudart.so.13"),
                "--mirror-mode", mirror_mode]
    return cmd


def vramtap_env(ctx, extra=None):
    env = clean_env({"VRAMTAP_LIB": ctx.build["lib"],
                     "VRAMTAP_PYDIR": os.path.join(ROOT, "src", "python")})
    env.update(ctx.vramtap_extra_env)
    if ctx.dry:
        env["LD_LIBRARY_PATH"] = ctx.build["standin"]
        env["VRAMTAP_CUPTI"] = os.path.join(ctx.build["standin"], "libcupti.so.13")
    env.update(extra or {})
    return env


def run_workload(ctx, name, case, extra=(), under_vramtap=True, mode=None, env_extra=None,
                 mirror_mode="pool", timeout=None, run_extra=()):
    """Returns (result dict or None, snapshot dict or None, snapshot path, post-mortem paths,
    run info)."""
    out = os.path.join(ctx.runner.work, name)
    os.makedirs(out, exist_ok=True)
    res_path = os.path.join(out, "result.json")
    cmd = workload_cmd(ctx, case, res_path, extra, mirror_mode)
    if under_vramtap:
        run_args = ["--out", out] + (["--mode", mode] if mode else []) + list(run_extra)
        cmd = [ctx.build["cli"], "run"] + run_args + ["--"] + cmd
        env = vramtap_env(ctx, env_extra)
    else:
        env = clean_env(env_extra)
        if ctx.dry:
            env["LD_LIBRARY_PATH"] = ctx.build["standin"]
    r = ctx.runner.run(name, cmd, env=env, timeout=timeout or ctx.proc_timeout)
    res = load_json(res_path)
    snaps, ooms = find_snapshots(out)
    snap_path = None
    if res and len(snaps) > 1:
        snaps = [s for s in snaps if ".%d.json" % res.get("pid", -1) in s] or snaps
    if snaps:
        snap_path = snaps[0]
    snap = load_snapshot(ctx, snap_path) if snap_path else None
    info = {"rc": r["rc"], "seconds": r["seconds"], "log": os.path.relpath(r["log"], ctx.runner.work),
            "tail": r["tail"]}
    if res:
        if "environment" in res and "torch" not in ctx.raw:
            ctx.raw["torch"] = res["environment"]
        if res.get("error"):
            info["workload_error"] = res["error"]
    return res, snap, snap_path, ooms, info


def run_failed(res, info, want_snapshot, snap):
    if info["rc"] != 0:
        return "exit %s: %s" % (info["rc"], (info.get("workload_error") or info["tail"])[-700:])
    if res is None:
        return "the workload wrote no result: " + info["tail"][-500:]
    if res.get("error"):
        return res["error"][-700:]
    if want_snapshot and snap is None:
        return "no vramtap snapshot written"
    return None


def first_vramtap_run(ctx, name, case, extra, **kw):
    """The first PyTorch run under vramtap; if it fails, once more without Python stacks and
    then without stacks, and keep whatever worked for the later runs (the GPU run is precious:
    one broken feature should not cost every other figure)."""
    attempts = [{}, {"VRAMTAP_PYTHON_STACKS": "0"}, {"VRAMTAP_STACKS": "0"}]
    for i, extra_env in enumerate(attempts):
        ctx.vramtap_extra_env = dict(extra_env)
        got = run_workload(ctx, name if i == 0 else "%s-retry%d" % (name, i), case, extra, **kw)
        res, snap, _, _, info = got
        why = run_failed(res, info, True, snap)
        # A Python exception in the workload would happen again: only a crash, a hang or a
        # missing snapshot point at vramtap.
        crashed = not isinstance(info["rc"], int) or info["rc"] < 0 or (
            res is not None and not res.get("error") and snap is None)
        if why and not crashed:
            if i == 0:
                ctx.first_failure = why
            break
        if not why:
            if i:
                ctx.notes.append("The first PyTorch run under vramtap failed with its default "
                                 "settings; every later run used %s. First failure: %s" % (
                                     extra_env, ctx.first_failure))
            return got
        if i == 0:
            ctx.first_failure = why
    ctx.vramtap_extra_env = {}
    return got


def torch_peak_phase(res):
    """The phase (and step) at whose end PyTorch's high-water mark first showed its final
    value: its own peak fell inside that phase or just before it."""
    final = res.get("max_allocated")
    for s in res.get("phase_samples", []):
        if s["max_allocated"] == final:
            return s["phase"], s["step"]
    return None, None


def group_allocations(snap, res, device=0):
    """Allocations live at the peak, grouped by the workload's own tensors, matched by address
    and size (an address alone may have been reused by a different allocation)."""
    known, by_addr = {}, {}
    for kind, items in (("parameters and buffers", res.get("params", [])),
                        ("gradients (.grad)", res.get("grads", [])),
                        ("optimizer state", [s for s in res.get("state", []) if s["on_device"]])):
        for t in items:
            known[(addr_int(t["address"]), t["size"])] = kind
            by_addr[addr_int(t["address"])] = t
    groups = {k: [] for k in ("parameters and buffers", "gradients (.grad)", "optimizer state",
                              "other")}
    sizes_off = []
    for a in snap.get("allocations", []):
        if a["device"] != device:
            continue
        x = addr_int(a["address"])
        kind = known.get((x, a["size"]))
        groups[kind or "other"].append(a)
        if kind is None and x in by_addr:
            t = by_addr[x]
            sizes_off.append((t.get("name"), t["size"], a["size"]))
    return groups, sizes_off


GROUP_CATEGORY = {"parameters and buffers": "parameters", "gradients (.grad)": "gradients",
                  "optimizer state": "optimizer_state"}
CATS = ["parameters", "gradients", "optimizer_state", "activations", "temporary", "unattributed"]


def section_tensor(ctx):
    for precision in ("fp32", "bf16"):
        label = "tensor mode, %s" % precision
        name = "tensor-" + precision
        extra = ["--precision", precision]
        if precision == "fp32":
            got = first_vramtap_run(ctx, name, "train", extra)
        else:
            got = run_workload(ctx, name, "train", extra)
        check_training_run(ctx, "tensor", label, name, got, native=False)
    check_copies(ctx)


def check_copies(ctx):
    """A loop fed from the host, with and without pin_memory, against what it did: the bytes a
    typical step uploads and how many of them come from pageable memory (exact: the loop's two
    token tensors), the synchronous downloads a step (at least its one .item(); PyTorch may wait
    more), and the pin_memory advice only where the batches were not pinned."""
    sec = "tensor"
    for pinned in (False, True):
        label = "copies, %s" % ("pin_memory=True" if pinned else "pageable batches")
        name = "copies-" + ("pinned" if pinned else "pageable")
        res, snap, snap_path, _, info = run_workload(
            ctx, name, "copies", ["--steps", "5"] + (["--pin-memory"] if pinned else []))
        why = run_failed(res, info, True, snap)
        if why:
            ctx.checks.add(sec, "%s: the loop ran under vramtap" % label, "ran", "failed",
                           note=why)
            continue
        rep, why = report_json(ctx, snap_path, name)
        copies = (rep or {}).get("copies") or {}
        step = copies.get("typical_step") or {}
        if not step:
            ctx.checks.add(sec, "%s: vramtap report --json gives copies" % label, "copies",
                           None, note=why or "no copies.typical_step in the report")
            continue
        note = ("the median of %s completed steps by bytes uploaded: step %s" %
                (step.get("of_steps"), step.get("step")))
        up = res["upload_bytes_per_step"]
        ctx.checks.add(sec, "%s: bytes uploaded a step" % label, fmt_bytes(up),
                       fmt_bytes(step.get("h2d_bytes")), ok=step.get("h2d_bytes") == up,
                       note=note)
        pageable = 0 if pinned else up
        ctx.checks.add(sec, "%s: of them from pageable memory" % label, fmt_bytes(pageable),
                       fmt_bytes(step.get("h2d_pageable_bytes")),
                       ok=step.get("h2d_pageable_bytes") == pageable, note=note)
        items = res["items_per_step"]
        waited = step.get("sync_d2h_calls")
        ctx.checks.add(sec, "%s: synchronous downloads a step" % label, "at least %d" % items,
                       waited, kind="tolerance", ok=isinstance(waited, int) and waited >= items,
                       note="the loop reads the loss once a step (.item()); PyTorch may wait "
                            "for other values too")
        advice = copies.get("advice") or []
        ctx.checks.add(sec, "%s: pin_memory advised" % label, not pinned,
                       "pin_memory" in advice, note="advice: %s" % advice)


def check_training_run(ctx, sec, label, name, got, native, expandable=False):
    res, snap, snap_path, _, info = got
    store = ctx.raw.setdefault("runs", {}).setdefault(name, {"run": info})
    why = run_failed(res, info, True, snap)
    if not ctx.checks.add(sec, "%s: run completed with a snapshot" % label, True, why is None,
                          note=why or "")["status"] == "pass":
        return
    store["result"] = {k: v for k, v in res.items() if k not in ("params", "grads", "state",
                                                                   "segments")}
    store["snapshot"] = os.path.relpath(snap_path, ctx.runner.work)
    rep, err = report_json(ctx, snap_path, "report-" + name)
    if not ctx.checks.add(sec, "%s: vramtap report --json" % label, "a report", "a report"
                          if rep else "none", ok=rep is not None, note=err or "")["status"] == "pass":
        return
    store["report"] = rep
    dev = next((d for d in rep["devices"] if d["device"] == 0), rep["devices"][0])
    mode = (snap.get("modes") or {}).get("pytorch", {})
    backend = (res.get("facts") or {}).get("allocator_backend")
    want_backend = ("stand-in mirror (%s)" % ("device" if native else "pool") if ctx.dry
                    else ("native" if native else "cudaMallocAsync"))
    ctx.checks.add(sec, "%s: vramtap's mode and PyTorch's allocator" % label,
                   ["native" if native else "tensor", want_backend],
                   [mode.get("mode"), backend], note="mode reason: %s; PYTORCH_CUDA_ALLOC_CONF "
                   "seen by the program: %s" % (mode.get("reason"), res.get("env_alloc_conf")))
    ctx.checks.add(sec, "%s: phases marked, steps counted" % label, [True, res["steps"]],
                   [snap.get("phase_markers"), snap.get("steps")])
    if name == "tensor-fp32":
        check_device_ids(ctx, sec, label, res, snap)
    if native:
        check_native(ctx, sec, label, res, snap, rep, dev, expandable)
    else:
        check_tensor(ctx, sec, label, name, res, snap, rep, dev)


def norm_uuid(u):
    """The 32 hex digits of a UUID, whatever its spelling ("GPU-" prefix, case, dashes)."""
    if not isinstance(u, str):
        return u
    h = re.sub(r"[^0-9a-f]", "", u.lower().replace("gpu-", "", 1))
    return h if len(h) == 32 else u


def norm_bus(b):
    """domain:bus:device.function as numbers: nvidia-smi writes 8 domain digits, the driver 4,
    and the case of the hex digits differs between tools."""
    m = re.fullmatch(r"([0-9a-fA-F]+):([0-9a-fA-F]+):([0-9a-fA-F]+)\.([0-9a-fA-F]+)", b or "")
    return "%04x:%02x:%02x.%x" % tuple(int(x, 16) for x in m.groups()) if m else b


def check_device_ids(ctx, sec, label, res, snap):
    """Which GPU ran: device 0's UUID and PCI bus id in the snapshot, against the driver the
    program itself asked, PyTorch's device properties and nvidia-smi's list of the machine's
    GPUs (where the program's device 0 is found by its UUID, whatever CUDA_VISIBLE_DEVICES)."""
    d0 = next((d for d in snap.get("devices", []) if d["device"] == 0), {})
    got = [norm_uuid(d0.get("uuid")), norm_bus(d0.get("pci_bus_id"))]
    env = res.get("environment") or {}
    sources = [("the driver's (cuDeviceGetUuid_v2, cuDeviceGetPCIBusId from the program)",
                env.get("driver_ids"))]
    if ctx.dry:
        ctx.checks.skip(sec, "%s: device 0's UUID and PCI bus id vs PyTorch and nvidia-smi"
                        % label, "dry run: no CUDA in PyTorch, no nvidia-smi")
    else:
        sources.append(("PyTorch's (get_device_properties(0): uuid, pci_domain_id, pci_bus_id, "
                        "pci_device_id)", env.get("torch_ids")))
        smi = ctx.raw.get("versions", {}).get("gpu_ids")
        row = next((r for r in smi or [] if norm_uuid(r[0]) == got[0]), None)
        sources.append(("nvidia-smi's (--query-gpu=uuid,pci.bus_id)",
                        {"uuid": row[0], "pci_bus_id": row[1]} if row else
                        {"not_available": "no GPU with this UUID in %s" % smi}))
    for what, ids in sources:
        if not ids or "not_available" in ids:
            ctx.checks.add(sec, "%s: device 0's UUID and PCI bus id vs %s" % (label, what), None,
                           got, kind="info", status="not available",
                           note=(ids or {}).get("not_available", "not recorded"))
            continue
        ctx.checks.add(sec, "%s: device 0's UUID and PCI bus id vs %s" % (label, what),
                       [norm_uuid(ids["uuid"]), norm_bus(ids["pci_bus_id"])], got,
                       note="snapshot: %s, %s" % (d0.get("uuid"), d0.get("pci_bus_id")))


def check_tensor(ctx, sec, label, name, res, snap, rep, dev):
    store = ctx.raw["runs"][name]
    exp = res["expected"]
    groups, sizes_off = group_allocations(snap, res)
    cats = dev.get("categories") or {}
    store["categories"] = cats
    sub = subset_categories(ctx, snap, groups, name)
    store["groups"] = {g: {"count": len(a), "bytes": sum(x["size"] for x in a),
                           "categories": sub.get(g)} for g, a in groups.items()}
    # Each tensor kind the program knows about: seen with its exact size, classified as it is.
    for gname, want_bytes, want_count in (
            ("parameters and buffers", exp["parameters_and_buffers"], len(res["params"])),
            ("gradients (.grad)", exp["gradients"], len(res["grads"])),
            ("optimizer state", exp["optimizer_state_device"],
             len([s for s in res["state"] if s["on_device"]]))):
        allocs = groups[gname]
        ctx.checks.add(sec, "%s: %s live at the peak, each at its address with its size" % (
            label, gname), "%d tensors, %s" % (want_count, fmt_bytes(want_bytes)),
            "%d allocations, %s" % (len(allocs), fmt_bytes(sum(a["size"] for a in allocs))),
            ok=len(allocs) == want_count and sum(a["size"] for a in allocs) == want_bytes,
            note="sum of numel x element_size from PyTorch" + (
                "; at a tensor's address but another size (tensor, its bytes, allocation's): %s"
                % sizes_off[:3] if sizes_off else ""))
        c = sub.get(gname) or {}
        cat = GROUP_CATEGORY[gname]
        ctx.checks.add(sec, "%s: vramtap classifies them as %s" % (label, cat),
                       {cat: want_bytes}, {k: v for k, v in c.items() if v} if c else None,
                       ok=bool(c) and c.get(cat) == want_bytes and
                       sum(v for k, v in c.items() if k != cat and isinstance(v, int)) == 0)
    ctx.checks.add(sec, "%s: gradient bytes = parameters that require grad" % label,
                   exp["gradients"], exp["grad_tensors"],
                   note="from PyTorch: sum over p.grad vs sum over parameters with requires_grad")
    # The report's own category totals against PyTorch's figures; whatever is not the model's
    # tensors is named (a library's workspace kept from the first forward is "parameters" by
    # the rules: long-lived state built in forward).
    other = sub.get("other") or {}
    others = summarize_others(snap, groups["other"])
    for cat, want in (("parameters", exp["parameters_and_buffers"]),
                      ("gradients", exp["gradients"]),
                      ("optimizer_state", exp["optimizer_state_device"])):
        extra = other.get(cat) or 0
        ctx.checks.add(sec, "%s: report's %s vs PyTorch's %s" % (
            label, cat, {"parameters": "parameters + buffers", "gradients": "gradients",
                         "optimizer_state": "optimizer.state (on the device)"}[cat]),
            fmt_bytes(want) + (" + %s not the model's" % fmt_bytes(extra) if extra else ""),
            fmt_bytes(cats.get(cat)), ok=cats.get(cat) == want + extra,
            note="equal" if cats.get(cat) == want else
            "the report's figure = PyTorch's + %s in allocations that are not the model's "
            "tensors (see 'Not the program's own tensors' below)" % fmt_bytes(extra))
    # The parts add up to the whole report.
    total = {k: 0 for k in CATS}
    for c in sub.values():
        for k in CATS:
            total[k] += (c or {}).get(k) or 0
    ctx.checks.add(sec, "%s: categories of the groups add up to the report's" % label,
                   {k: cats.get(k) for k in CATS}, total)
    store["other_allocations"] = others
    # Peak against PyTorch's high-water mark, on the bytes both count: the pool's allocations.
    pool = [a for a in snap["allocations"] if a["device"] == 0 and a.get("kind") == "pool"]
    pool_bytes = sum(a["size"] for a in pool)
    nonpool = dev["peak_bytes"] - pool_bytes
    torch_max = res["max_allocated"]
    diff = torch_max - pool_bytes if isinstance(torch_max, int) else None
    g = explain_rounding([a["size"] for a in pool], torch_max) if diff else None
    note = ("vramtap peak %s = %s through the pool + %s outside it (not PyTorch's: %s). " % (
        fmt_bytes(dev["peak_bytes"]), fmt_bytes(pool_bytes), fmt_bytes(nonpool),
        ", ".join(sorted({o["label"] for o in store["other_allocations"]
                          if o["kind"] != "pool"}))[:300] or "none"))
    if diff == 0:
        note += "Same bytes exactly."
    elif diff is not None:
        note += ("PyTorch reports the pool's UsedMemHigh, the driver's own count; it differs from "
                 "the exact request sizes by %s (%.4f%%). " % (fmt_bytes(diff),
                                                          100.0 * diff / max(torch_max, 1)))
        note += ("That is exactly the %d live allocations each rounded up to %d bytes." % (
            len(pool), g) if g else "No single rounding granularity explains it exactly: the "
                                    "pool's high-water moment may not be vramtap's peak moment.")
    ctx.checks.add(sec, "%s: peak vs torch.cuda.max_memory_allocated()" % label,
                   fmt_bytes(torch_max), fmt_bytes(pool_bytes), kind="tolerance",
                   ok=diff is not None and abs(diff) <= 0.01 * max(torch_max, 1), note=note)
    samples = (snap["devices"][0].get("samples") or []) if snap.get("devices") else []
    last = [s for s in samples if s.get("pool_used_high_bytes") is not None]
    seen = last[-1]["pool_used_high_bytes"] if last else None
    ctx.checks.add(sec, "%s: the pool's UsedMemHigh as vramtap last read it" % label,
                   fmt_bytes(torch_max), fmt_bytes(seen), ok=seen is not None and torch_max == seen,
                   note="the same driver attribute PyTorch reports as max_memory_allocated; "
                        "vramtap reads it at phase boundaries and new peaks")
    levels = dev.get("levels") or {}
    ctx.checks.add(sec, "%s: allocator reserved level vs torch.cuda.max_memory_reserved()" % label,
                   fmt_bytes(res["max_reserved"]), fmt_bytes(levels.get("reserved")),
                   ok=levels.get("reserved") is not None
                   and res["max_reserved"] == levels.get("reserved"),
                   note="source %s: the pool's ReservedMemHigh" % levels.get("reserved_source"))
    tp, ts = torch_peak_phase(res)
    vp = (dev.get("peak") or {})
    agree = (tp, ts) == (vp.get("phase"), vp.get("step"))
    store["peak_explained"] = explain_peak(cats, vp, dev["peak_bytes"])
    ctx.checks.add(sec, "%s: phase and step of the peak" % label, "PyTorch: %s, step %s" % (tp, ts),
                   "vramtap: %s, step %s" % (vp.get("phase"), vp.get("step")), kind="info",
                   note=("agree. " if agree else "differ (PyTorch's figure is sampled at phase "
                         "ends and counts rounded bytes). ") + store["peak_explained"])


def explain_peak(cats, peak, peak_bytes):
    parts = ", ".join("%s %s" % (k.replace("_", " "), fmt_bytes(cats.get(k)))
                      for k in CATS if cats.get(k))
    kept = sum(cats.get(k) or 0 for k in ("parameters", "gradients", "optimizer_state"))
    return ("At the peak (%s, step %s): %s. What every step keeps (parameters, gradients, "
            "optimizer state: %s) is all there by then; the rest, %s, is the working set of %s." % (
                peak.get("phase"), peak.get("step"), parts, fmt_bytes(kept),
                fmt_bytes(peak_bytes - kept), peak.get("phase")))


def summarize_others(snap, allocs):
    by = {}
    for a in allocs:
        key = (site_label(snap, a.get("site")), a.get("kind"), a["birth"]["phase"])
        e = by.setdefault(key, {"label": key[0], "kind": key[1], "born": key[2], "count": 0,
                                "bytes": 0})
        e["count"] += 1
        e["bytes"] += a["size"]
    return sorted(by.values(), key=lambda e: -e["bytes"])[:12]


def section_attach(ctx):
    """The routes program and the PyTorch workload attached through CUPTI (no LD_PRELOAD), held
    to the same accounts; and both preloaded with the coverage check, which must find nothing
    missed."""
    sec = "attach"
    for variant in ("dynamic", "static"):
        label = "%s runtime" % variant
        if ctx.dry and variant == "static":
            ctx.checks.skip(sec, "%s: attached and coverage" % label,
                            "skipped (dry run): NVIDIA's static runtime needs a real driver")
            continue
        exe, why = compile_cuda_program(ctx, variant)
        if not exe:
            ctx.checks.skip(sec, "%s: attached and coverage" % label, "the program did not build: "
                            + (why or ""))
            continue
        for how, extra in (("coverage", {"LD_PRELOAD": ctx.build["lib"], "VRAMTAP_COVERAGE": "1"}),
                           ("attached", {"CUDA_INJECTION64_PATH": ctx.build["lib"]})):
            out = os.path.join(ctx.runner.work, "attach-%s-%s" % (how, variant))
            os.makedirs(out, exist_ok=True)
            acct_path = os.path.join(out, "account.json")
            r = ctx.runner.run("routes-%s-%s" % (how, variant), [exe, acct_path],
                               env=routes_env(ctx, out, extra), timeout=120)
            acct = load_json(acct_path)
            snaps, _ = find_snapshots(out)
            name = "%s, %s" % (how, label)
            ok = r["rc"] == 0 and acct is not None and not acct.get("errors") and len(snaps) == 1
            if not ctx.checks.add(sec, "%s: ran, one snapshot" % name, True, ok,
                                  note="" if ok else r["tail"][-400:])["status"] == "pass":
                continue
            snap = load_snapshot(ctx, snaps[0])
            if how == "coverage":
                coverage_checks(ctx, sec, name, snap)
                continue
            ctx.checks.add(sec, "%s: recorded through CUPTI" % name, "cupti", snap.get("attach"))
            ctx.raw.setdefault(sec, {})[variant] = {"run": r}
            compare_routes(ctx, name, variant, acct, snap, sec=sec)
    extra = ["--precision", "fp32"]
    got = run_workload(ctx, "attach-fp32", "train", extra, run_extra=["--attach", "cupti"])
    check_training_run(ctx, sec, "attached, fp32", "attach-fp32", got, native=False)
    snap = got[1]
    if snap:
        ctx.checks.add(sec, "attached, fp32: recorded through CUPTI", "cupti", snap.get("attach"))
    res, snap, _, _, info = run_workload(ctx, "coverage-fp32", "train", extra,
                                         env_extra={"VRAMTAP_COVERAGE": "1"})
    why = run_failed(res, info, True, snap)
    if ctx.checks.add(sec, "coverage, PyTorch fp32: run completed with a snapshot", True,
                      why is None, note=why or "")["status"] == "pass":
        coverage_checks(ctx, sec, "coverage, PyTorch fp32", snap)


def coverage_checks(ctx, sec, label, snap):
    cov = snap.get("coverage")
    if not ctx.checks.add(sec, "%s: coverage counted by CUPTI" % label, True, cov is not None,
                          note="" if cov else "no coverage in the snapshot: see the run's log "
                          "(CUPTI not found, or refused)")["status"] == "pass":
        return
    ctx.raw.setdefault("coverage", {})[label] = cov
    missed = cov["missed"]
    ctx.checks.add(sec, "%s: allocations interposition missed" % label, 0, missed["allocations"],
                   note=", ".join("%s %d (%s)" % (api, v["allocations"], fmt_bytes(v["bytes"]))
                                  for api, v in missed["by_api"].items()))
    ctx.checks.add(sec, "%s: allocations seen by CUPTI and recorded by interposition" % label,
                   cov["cupti"]["allocations"], cov["interposition"]["allocations"])
    ctx.checks.add(sec, "%s: their bytes" % label, fmt_bytes(cov["cupti"]["bytes"]),
                   fmt_bytes(cov["interposition"]["bytes"]),
                   ok=cov["cupti"]["bytes"] == cov["interposition"]["bytes"])


def section_frames(ctx):
    """frames.py on the Python that runs PyTorch here: its CPython version is the one whose frame
    layout matters on this machine. The library must read the frames (not fall back to following
    calls) and every allocation's Python frames must be what traceback.extract_stack() showed."""
    sec = "frames"
    rt = (os.path.join(ctx.build["standin"], "libcudart.so.13") if ctx.dry
          else ctx.cuda.get("cudart_shared"))
    if not rt:
        ctx.checks.skip(sec, "frames.py ran", "no libcudart.so found to allocate through")
        return
    out = os.path.join(ctx.runner.work, "frames")
    os.makedirs(out, exist_ok=True)
    env = routes_env(ctx, out, {"LD_PRELOAD": ctx.build["lib"], "VT_CUDART": rt})
    r = ctx.runner.run("frames", [ctx.python, FRAMES_PY], env=env, timeout=ctx.proc_timeout)
    expect = load_json(os.path.join(out, "expect.json"))
    snaps, _ = find_snapshots(out)
    snap = load_snapshot(ctx, snaps[0]) if len(snaps) == 1 else None
    ran = r["rc"] == 0 and expect is not None and not expect["errors"] and snap is not None
    ctx.checks.add(sec, "frames.py ran under vramtap", "exit 0, no errors, one snapshot",
                   "exit %s, %s, %d snapshots" % (r["rc"], "errors: %s" % expect["errors"][:3]
                                                  if expect else "no expect.json", len(snaps)),
                   ok=ran, note="" if ran else r["tail"][-500:])
    if not ran:
        return
    version = "%d.%d" % tuple(expect["version"])
    ctx.raw["frames"] = {"python": version, "mechanism": expect["mechanism"],
                         "allocations": len(expect["allocs"]), "reused": expect["reused"]}
    with open(r["log"]) as f:
        said = [l.strip() for l in f if "Python frames" in l]
    record = (snap.get("run_record") or {}).get("python_frames")
    ctx.checks.add(sec, "CPython %s: frames read from the interpreter, not followed" % version,
                   "mechanism 3, run_record.python_frames read, nothing said",
                   "mechanism %s, run_record.python_frames %s, %s" % (
                       expect["mechanism"], record, "; ".join(said) or "nothing said"),
                   ok=expect["mechanism"] == 3 and record == "read" and not said,
                   note="1 and 2 mean the layout check at start-up failed and the library "
                        "follows every Python call instead (slower, same frames)")
    sites = {s["id"]: s for s in snap.get("sites") or []}
    # 3.11 and later name a function by its qualified name, as the snapshot does.
    name_at = 3 if tuple(expect["version"]) >= (3, 11) else 2
    wrong = []
    for a in snap.get("allocations") or []:
        want = expect["allocs"].get(str(a["size"]))
        if want is None:
            continue
        got = [[fr["file"], fr["line"], fr["function"]]
               for fr in sites.get(a.get("site"), {}).get("frames", [])
               if fr["type"] == "python"]
        if got != [[w[0], w[1], w[name_at]] for w in want]:
            wrong.append("%d bytes: got %s" % (a["size"], got[:3]))
    checked = len({a["size"] for a in snap.get("allocations") or []} & set(
        int(k) for k in expect["allocs"]))
    ctx.checks.add(sec, "CPython %s: every allocation's Python frames equal "
                   "traceback.extract_stack()" % version,
                   "%d allocations, 0 different" % len(expect["allocs"]),
                   "%d allocations, %d different" % (checked, len(wrong)),
                   note="; ".join(wrong[:3]))
    ctx.checks.add(sec, "CPython %s: freed exec'd code whose address was reused" % version,
                   "at least 1", expect["reused"], ok=expect["reused"] > 0,
                   note="code made by exec and freed, its address given to new code: the "
                        "per-thread memo of names must not lend the old name")


# The cost section's configurations: the environment each adds to the pair program's.
COST_CONFIGS = (("plain", {}), ("stacks off", {"VRAMTAP_STACKS": "0"}),
                ("never buffered", {"VRAMTAP_STACKS": "0", "VRAMTAP_THREAD_BUFFERS": "0"}),
                ("default", {}))
COST_LIVE = 1000


def cost_run(ctx, exe, out, config, threads, pairs, name):
    """One run of the pair program: (wall, cpu) ns per pair, or None and the run."""
    extra = dict(COST_CONFIGS)[config]
    if config != "plain":
        extra = dict(extra, LD_PRELOAD=ctx.build["lib"], VRAMTAP_QUIET="1")
    r = ctx.runner.run(name, [exe, str(threads), "0", str(pairs), str(COST_LIVE)],
                       env=routes_env(ctx, out, extra), timeout=120)
    remove_snapshots(out)
    m = re.search(r"ns_per_pair=([0-9.]+) cpu_ns_per_pair=([0-9.]+)", r["tail"])
    return ((float(m.group(1)), float(m.group(2))) if r["rc"] == 0 and m else None), r


def section_cost(ctx):
    """scripts/bench's pair cost on this machine's driver and runtime: cudaMallocAsync and
    cudaFreeAsync of 512 to 4,096 bytes on the legacy stream with 1,000 allocations live, on 1
    and on 8 threads, plain and under vramtap, alternated in rounds so that the machine's drift
    falls on all alike. A round's added cost is its vramtap run less its plain run; the figures
    are the medians of the rounds'. The targets are those the stand-in's benchmark holds vramtap
    to; in a dry run the figures are the stand-in's, shown only."""
    sec = "cost"
    exe, why = compile_cuda_program(ctx, "dynamic", source=PAIR_C, opt="-O2")
    ctx.checks.add(sec, "the pair program builds", True, exe is not None, note=why or "")
    if not exe:
        return
    out = os.path.join(ctx.runner.work, "cost")
    os.makedirs(out, exist_ok=True)
    rounds, pairs = (3, 5000) if ctx.dry else (4, 20000)
    runs = {}  # (config, threads) -> [(wall, cpu)] by round
    failed = []
    for k in range(rounds):
        if k and ctx.runner.left() < 40:
            break
        for threads in (1, 8):
            for config, _ in COST_CONFIGS:
                got, r = cost_run(ctx, exe, out, config, threads, pairs,
                                  "cost-%s-%d-%d" % (config.replace(" ", "-"), threads, k))
                if got is None:
                    failed.append("%s, %d threads: exit %s %s" % (config, threads, r["rc"],
                                                                  r["tail"][-200:]))
                runs.setdefault((config, threads), []).append(got)
    done = len(runs.get(("plain", 1), []))
    ctx.checks.add(sec, "every run succeeded", "%d rounds, no failure" % rounds,
                   "%d rounds, %d failures" % (done, len(failed)), ok=not failed and done > 0,
                   note="; ".join(failed[:2]))
    if failed or not done:
        return

    def added(config, threads, i):
        """The median over the rounds of config's cost less plain's, wall (0) or CPU (1)."""
        return statistics.median(v[i] - p[i] for v, p in zip(runs[config, threads],
                                                             runs["plain", threads]))

    table_rows = []
    for threads in (1, 8):
        for config, _ in COST_CONFIGS:
            walls = [x[0] for x in runs[config, threads]]
            cpus = [x[1] for x in runs[config, threads]]
            extra = (["+%.1f" % added(config, threads, 0), "+%.1f" % added(config, threads, 1)]
                     if config != "plain" else ["", ""])
            table_rows.append([config, threads, "%.1f" % min(walls),
                               "%.1f" % statistics.median(walls),
                               "%.1f" % statistics.median(cpus)] + extra)
    ctx.raw["cost"] = {"rounds": done, "pairs_per_thread": pairs, "live": COST_LIVE,
                       "runs": {"%s/%d" % key: v for key, v in runs.items()},
                       "table": table_rows}
    kind = "info" if ctx.dry else "tolerance"
    one, stacks = added("stacks off", 1, 0), added("default", 1, 0)
    ctx.checks.add(sec, "1 thread: vramtap's added cost a pair, stacks off",
                   "at most +60 ns", "%+.1f ns" % one, kind=kind, ok=None if ctx.dry else one <= 60,
                   note="the median of %d rounds' wall time; plain %.1f ns a pair (its median)" % (
                       done, statistics.median(x[0] for x in runs["plain", 1])))
    ctx.checks.add(sec, "1 thread: vramtap's added cost a pair, native stacks (the default)",
                   "at most +300 ns", "%+.1f ns" % stacks, kind=kind,
                   ok=None if ctx.dry else stacks <= 300,
                   note="stacks of the pair program's few frames, unwound and interned")
    eight = added("stacks off", 8, 0)
    ratio = eight / one if one > 0 else float("inf")
    ctx.checks.add(sec, "8 threads: added cost a pair over 1 thread's, stacks off",
                   "at most 1.5x", "%.2fx" % ratio, kind=kind,
                   ok=None if ctx.dry else ratio <= 1.5,
                   note="%+.1f ns a pair of the 8 threads' wall time against %+.1f ns; CPU time "
                        "%+.1f against %+.1f ns" % (eight, one, added("stacks off", 8, 1),
                                                    added("stacks off", 1, 1)))
    never, never_one = added("never buffered", 8, 0), added("never buffered", 1, 0)
    ctx.checks.add(sec, "8 threads, never buffered: added cost a pair over 1 thread's",
                   "shown only", "%.2fx" % (never / never_one if never_one > 0 else float("inf")),
                   kind="info",
                   note="VRAMTAP_THREAD_BUFFERS=0, every event recorded at once under the books' "
                        "lock (docs/api.md): %+.1f ns a pair of the 8 threads' wall time against "
                        "%+.1f ns" % (never, never_one))
    huge_pages_check(ctx, sec, exe, out)
    buffers_check(ctx, sec, exe, out)


def replay_history(events):
    """The live bytes of a device's history events [time, id, signed size], in order: (the most,
    the last, what went wrong first or None)."""
    live = most = 0
    born = set()
    for _, ident, size in events:
        if size > 0:
            born.add(ident)
        elif ident not in born:
            return most, live, "allocation %s freed before it was made" % ident
        else:
            born.discard(ident)
        live += size
        if live < 0:
            return most, live, "live bytes below 0 at allocation %s" % ident
        most = max(most, live)
    return most, live, None


def buffers_check(ctx, sec, exe, out):
    """8 threads allocating and freeing at once on this driver, every event written to its
    thread's buffer and applied by whoever takes the books' lock, merged by the TSC
    (VRAMTAP_THREAD_BUFFERS=1, docs/api.md): the books must hold what the program did (its
    allocations and frees, what stays live), the peak must lie between the warm-up's and 8
    threads' largest at once, and the history, replayed in its order, must free nothing before
    it was made and reach the books' peak."""
    threads, pairs = 8, (2000 if ctx.dry else 20000)
    label = "8 threads, every event buffered"
    remove_snapshots(out)
    r = ctx.runner.run("cost-buffers", [exe, str(threads), "0", str(pairs), str(COST_LIVE)],
                       env=routes_env(ctx, out, {"LD_PRELOAD": ctx.build["lib"],
                                                 "VRAMTAP_STACKS": "0", "VRAMTAP_DEBUG": "1",
                                                 "VRAMTAP_THREAD_BUFFERS": "1"}),
                       timeout=120)
    with open(r["log"]) as f:
        text = f.read()
    snaps, _ = find_snapshots(out)
    snap = load_snapshot(ctx, snaps[0]) if r["rc"] == 0 and len(snaps) == 1 else None
    remove_snapshots(out)
    if snap is None:
        ctx.checks.add(sec, label + ": the run and its snapshot", "exit 0, one snapshot",
                       "exit %s, %d snapshots" % (r["rc"], len(snaps)), note=r["tail"][-300:])
        return
    if "needs one clock for every processor" in text:
        ctx.checks.skip(sec, label + ": events applied from the buffers",
                        "this machine's clock source is not the TSC: vramtap records every "
                        "event at once here (VRAMTAP_THREAD_BUFFERS=1 said so)")
    else:
        m = re.search(r"thread buffers: ([0-9]+) events applied in ([0-9]+) holds", text)
        ctx.checks.add(sec, label + ": events applied from the buffers", "more than 0",
                       "%s in %s holds of the lock" % (m.group(1), m.group(2)) if m else "none",
                       ok=bool(m) and int(m.group(1)) > 0)
    made = (threads + 1) * pairs  # the main thread's warm-up and the threads'
    c = snap.get("counters", {})
    ctx.checks.add(sec, label + ": allocations, frees, unknown frees, dropped",
                   "%d, %d, 0, 0" % (COST_LIVE + made, made),
                   "%s, %s, %s, %s" % (c.get("allocs"), c.get("frees"), c.get("unknown_frees"),
                                       c.get("dropped")))
    dev = next((d for d in snap.get("devices", []) if d.get("device") == 0), {})
    kept = COST_LIVE * 512
    ctx.checks.add(sec, label + ": live at exit", fmt_bytes(kept),
                   fmt_bytes(dev.get("live_bytes_at_end", -1)))
    peak = dev.get("peak_bytes", -1)
    ctx.checks.add(sec, label + ": the peak", "from %s to %s" % (
        fmt_bytes(kept + 4096), fmt_bytes(kept + threads * 4096)), fmt_bytes(peak),
                   ok=kept + 4096 <= peak <= kept + threads * 4096,
                   note="the ramp's %d allocations of 512 bytes, and the pairs' of up to 4 KiB at "
                        "once: one on the warm-up's thread, at most one a thread after" % COST_LIVE)
    hist = snap.get("history", {})
    if hist.get("dropped") or any(w.get("truncated") for w in hist.get("windows", [])):
        ctx.checks.skip(sec, label + ": the history replayed in order",
                        "the history dropped events: %s" % hist.get("dropped"))
        return
    most, last, wrong = replay_history(snap.get("history_events", []))
    ctx.checks.add(sec, label + ": the history replayed in order",
                   "never below 0, the books' peak %s, %s at exit" % (fmt_bytes(peak),
                                                                     fmt_bytes(kept)),
                   wrong or "never below 0, the books' peak %s, %s at exit" % (
                       fmt_bytes(most), fmt_bytes(last)))


def huge_pages_check(ctx, sec, exe, out):
    """Whether this machine gave the allocation history its huge pages quickly: a run of 200,000
    pairs populates about 19 MB of events, 2 MiB at a time; VRAMTAP_DEBUG says when a chunk took
    longer than VRAMTAP_HUGE_SLOW_US and the rest went to small pages (a virtual machine whose
    host takes free memory back). Shown, not held to anything."""
    r = ctx.runner.run("cost-huge-pages", [exe, "1", "0", "100000", str(COST_LIVE)],
                       env=routes_env(ctx, out, {"LD_PRELOAD": ctx.build["lib"],
                                                 "VRAMTAP_STACKS": "0", "VRAMTAP_DEBUG": "1"}),
                       timeout=120)
    remove_snapshots(out)
    with open(r["log"]) as f:
        text = f.read()
    m = re.search(r"huge pages took ([0-9]+) us of CPU", text)
    pair = re.search(r"cpu_ns_per_pair=([0-9.]+)", text)
    ctx.checks.add(sec, "the history's huge pages (200,000 pairs, stacks off)", "shown",
                   ("small pages after a chunk of %s us" % m.group(1)) if m else "kept",
                   kind="info",
                   note="exit %s; %s ns a pair of CPU time" % (
                       r["rc"], pair.group(1) if pair else "no figure"))


def section_native(ctx):
    for expandable in (False, True):
        name = "native-expandable" if expandable else "native"
        label = "native allocator" + (", expandable_segments:True" if expandable else "")
        if expandable:
            got = run_workload(ctx, name, "train", [],
                               env_extra={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
                               mirror_mode="device")
        else:
            got = run_workload(ctx, name, "train", [], mode="native", mirror_mode="device")
        check_training_run(ctx, "native", label, name, got, native=True, expandable=expandable)


def check_native(ctx, sec, label, res, snap, rep, dev, expandable):
    """In native mode vramtap sees PyTorch's segments: its peak is the reserved peak, plus
    whatever was allocated outside PyTorch's allocator (told apart by PyTorch's own segment
    list, torch.cuda.memory_snapshot())."""
    segs = res.get("segments")
    allocs = [a for a in snap["allocations"] if a["device"] == 0]
    if not isinstance(segs, list):
        ctx.checks.skip(sec, "%s: reserved peak" % label, "no segment list: %s" % segs)
        return
    ranges = sorted((addr_int(s["address"]), addr_int(s["address"]) + s["size"]) for s in segs)

    def inside(a):
        x = addr_int(a["address"])
        return x is not None and any(lo <= x < hi for lo, hi in ranges)

    ins = [a for a in allocs if inside(a)]
    out = [a for a in allocs if not inside(a)]
    in_bytes = sum(a["size"] for a in ins)
    store = ctx.raw["runs"]["native-expandable" if expandable else "native"]
    store["outside_allocations"] = summarize_others(snap, out)
    ctx.checks.add(sec, "%s: vramtap's peak in PyTorch's segments vs max_memory_reserved()" % label,
                   fmt_bytes(res["max_reserved"]), fmt_bytes(in_bytes),
                   ok=res["max_reserved"] == in_bytes,
                   note="vramtap peak %s = %s in %d allocations inside PyTorch's %d segments + %s "
                        "outside them (%s)" % (
                            fmt_bytes(dev["peak_bytes"]), fmt_bytes(in_bytes), len(ins), len(segs),
                            fmt_bytes(dev["peak_bytes"] - in_bytes),
                            ", ".join(o["label"] for o in store["outside_allocations"])[:300]
                            or "none"))
    levels = dev.get("levels") or {}
    ctx.checks.add(sec, "%s: report's allocator-reserved level" % label,
                   fmt_bytes(res["max_reserved"]), fmt_bytes(levels.get("reserved")), kind="info",
                   note="source %s; in native mode the report's levels are of segments" %
                        levels.get("reserved_source"))
    c = snap.get("counters", {})
    if expandable:
        ctx.checks.add(sec, "%s: VMM calls seen (expandable segments map physical pages)" % label,
                       "cuMemCreate > 0" if not ctx.dry else "n/a on the stand-in mirror",
                       {k: c.get(k) for k in ("vmm_creates", "vmm_releases", "vmm_maps",
                                              "vmm_unmaps")},
                       kind="info" if ctx.dry else "exact",
                       ok=None if ctx.dry else (c.get("vmm_creates") or 0) > 0)


# --- Against PyTorch's tools ---------------------------------------------------------------


def replay_timeline(path, names):
    """Replays the raw memory timeline (torch.profiler export_memory_timeline with a
    .raw.json.gz path: (time, action, bytes, category index) events, bytes negative on release)
    and returns the total and the bytes per category at the first moment of its maximum. Events
    with the same time stamp are applied together."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        events = json.load(f)
    per = [0] * (max([e[3] for e in events], default=0) + 1)
    best, best_cats, best_t = 0, list(per), None
    i = 0
    while i < len(events):
        t = events[i][0]
        while i < len(events) and events[i][0] == t:
            _, _, nb, cat = events[i][:4]
            if cat >= len(per):
                per.extend([0] * (cat + 1 - len(per)))
            per[cat] += nb
            i += 1
        total = sum(per)
        if total > best:
            best, best_cats, best_t = total, list(per), t
    cats = {}
    for idx, b in enumerate(best_cats):
        name = names[idx] if idx < len(names) else "index %d" % idx
        cats[str(name)] = cats.get(str(name), 0) + b
    return {"peak": best, "time": best_t, "categories": cats, "events": len(events)}


PROFILER_TO_VRAMTAP = {"PARAMETER": "parameters", "GRADIENT": "gradients",
                       "OPTIMIZER_STATE": "optimizer_state", "ACTIVATION": "activations",
                       "INPUT": "activations", "TEMPORARY": "temporary",
                       "AUTOGRAD_DETAIL": "(autograd detail)", "None": "(unknown)"}
# torch.profiler._memory_profiler's order, used only when torch no longer says.
FALLBACK_CATEGORY_ORDER = ["PARAMETER", "OPTIMIZER_STATE", "INPUT", "TEMPORARY", "ACTIVATION",
                           "GRADIENT", "AUTOGRAD_DETAIL", None]


def section_tools(ctx):
    sec = "tools"
    # The profiler's memory timeline, plain process, PyTorch's native allocator.
    tl = os.path.join(ctx.runner.work, "profile", "memory.raw.json.gz")
    os.makedirs(os.path.dirname(tl), exist_ok=True)
    res, _, _, _, info = run_workload(ctx, "profile", "profile",
                                      ["--timeline", tl, "--steps", "2" if ctx.dry else "3"],
                                      under_vramtap=False, mirror_mode="device",
                                      timeout=2 * ctx.proc_timeout)
    store = ctx.raw.setdefault("profiler", {"run": info})
    why = run_failed(res, info, False, None)
    prof = (res or {}).get("profile") or {}
    store["result"] = prof
    if why:
        ctx.checks.add(sec, "torch.profiler run", True, False, kind="info", status="did not run",
                       note=why)
    elif prof.get("not_available"):
        ctx.checks.skip(sec, "torch.profiler memory timeline at its peak", prof["not_available"],
                        kind="info")
    else:
        names = prof.get("category_names")
        if not isinstance(names, list):
            names = FALLBACK_CATEGORY_ORDER
            store["category_names_note"] = "torch did not say; used %s" % names
        try:
            rep = replay_timeline(tl, [str(n) for n in names])
            store["timeline"] = rep
            mapped = {}
            for k, b in rep["categories"].items():
                m = PROFILER_TO_VRAMTAP.get(k, k)
                mapped[m] = mapped.get(m, 0) + b
            store["mapped"] = mapped
            ctx.checks.add(sec, "profiler timeline: its peak vs its own max_memory_allocated()",
                           prof.get("max_allocated"), rep["peak"], kind="info",
                           note="the timeline counts tensors it could see; the allocator counts "
                                "blocks rounded to 512 bytes, and workspaces outside tensors")
        except (OSError, ValueError, TypeError, IndexError) as e:
            ctx.checks.add(sec, "profiler raw timeline parsed", True, False, kind="info",
                           status="did not run", note="%s: %s" % (type(e).__name__, e))
    # Step time: plain, plain with the async backend, under vramtap (tensor and native), and
    # PyTorch's recorder in the plain process right after its own plain measurement.
    timing_runs = [
        ("plain, native allocator (+ _record_memory_history in the same process)", "timing-plain",
         dict(under_vramtap=False, extra=["--history"])),
        ("plain, backend:cudaMallocAsync", "timing-plain-async",
         dict(under_vramtap=False, env_extra={"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"})),
        ("under vramtap, tensor mode", "timing-vramtap-tensor", dict()),
        ("under vramtap, native mode", "timing-vramtap-native", dict(mode="native")),
    ]
    n = ["--warmup", "1" if ctx.dry else "5", "--timed", "3" if ctx.dry else "30"]
    timings = ctx.raw.setdefault("timings", {})
    for label, name, kw in timing_runs:
        extra = n + kw.pop("extra", [])
        res, _, _, _, info = run_workload(ctx, name, "timing", extra, **kw)
        why = run_failed(res, info, False, None)
        timings[name] = {"label": label, "run": info,
                         "timings": (res or {}).get("timings"), "error": why}
    base = (((timings.get("timing-plain") or {}).get("timings") or {}).get("this_process")
            or {}).get("median_s")
    rows = []
    for name, t in timings.items():
        for key, v in (t.get("timings") or {}).items():
            lab = t["label"] if key == "this_process" else "plain, %s" % key.replace(
                "record_memory_history_", "_record_memory_history(stacks=\"") + "\")"
            if v.get("median_s") is None:
                rows.append([lab, "n/a", "n/a", v.get("not_available", "")])
            else:
                rows.append([lab, "%.3f" % (v["median_s"] * 1e3),
                             "%.3f" % (v["median_s"] / base) if base else "n/a", ""])
        if t.get("error"):
            rows.append([t["label"], "n/a", "n/a", t["error"][-200:]])
    ctx.raw["timing_table"] = rows
    ctx.checks.add(sec, "step time ratios measured", "all configurations", "%d rows" % len(rows),
                   kind="info", note="see the table; ratios are to the plain native median")


# --- Out of memory -------------------------------------------------------------------------


def section_oom(ctx):
    sec = "oom"
    for kind in ("device", "fraction"):
        label = "OOM (%s)" % ("device full" if kind == "device" else
                              "set_per_process_memory_fraction")
        name = "oom-" + kind
        env_extra = None
        if ctx.dry and kind == "device":
            env_extra = {"STANDIN_CAPACITY": str(48 * MiB)}
        res, snap, snap_path, ooms, info = run_workload(ctx, name, "oom", ["--oom", kind],
                                                        env_extra=env_extra)
        store = ctx.raw.setdefault("oom", {}).setdefault(kind, {"run": info})
        if res and res.get("skipped"):
            ctx.checks.skip(sec, "%s: post-mortem" % label, res["skipped"])
            continue
        why = run_failed(res, info, False, None)
        if not ctx.checks.add(sec, "%s: the run ended in PyTorch's out-of-memory error" % label,
                              "an out-of-memory error", (res or {}).get("outcome", why),
                              ok=why is None and res.get("outcome") not in (None, "no error"),
                              note=why or (res.get("message") or "")[:300])["status"] == "pass":
            continue
        store["result"] = {k: v for k, v in res.items() if k not in ("params", "grads", "state")}
        counters = (snap or {}).get("counters") or {}
        explain = ""
        if not ooms:
            explain = ("vramtap saw %s failed CUDA allocation calls" % counters.get("failed_calls"))
            if re.search(r"exceed allowed memory|memory fraction|allowed memory", res.get("message",
                                                                                      "")):
                explain += ("; PyTorch refused the request itself, against its own count and the "
                            "fraction's limit, without calling CUDA (its message says so), so "
                            "there was no failed CUDA call for vramtap to see")
        if not ctx.checks.add(sec, "%s: post-mortem written" % label, ">= 1 file", len(ooms),
                              ok=len(ooms) >= 1, note=explain)["status"] == "pass":
            continue
        pm_path = ooms[0]
        pm = load_snapshot(ctx, pm_path)
        store["postmortem"] = os.path.relpath(pm_path, ctx.runner.work)
        o = pm.get("oom") or {}
        want_api = "cuMemAllocAsync" if ctx.dry else "cudaMallocAsync"
        want_size = res["expected_request"]
        if kind == "fraction":
            # PyTorch refuses against its own count, with no CUDA call: the hooks pass on the
            # size its message names ("Tried to allocate 1.00 GiB", two decimals of the unit).
            want_api = "framework"
            got = o.get("size") or 0
            if abs(got - want_size) <= want_size * 0.005:
                want_size = got
        ctx.checks.add(sec, "%s: the failed request (size, api, phase, step)" % label,
                       [want_size, want_api, "forward", 1],
                       [o.get("size"), o.get("api"), o.get("phase"), o.get("step")],
                       note="expected size: the token embedding's output, batch %d x seq x d x 4 "
                            "bytes; in the dry run the mirror's own driver call%s" % (
                                res["batch"], "; %s of ballast left a margin of %s" % (
                                    fmt_bytes(res["ballast"]["size"]), fmt_bytes(res["margin"]))
                                if res.get("ballast") else ""))
        rep, err = report_json(ctx, pm_path, "report-" + name)
        store["report"] = rep
        live = [a for a in pm.get("allocations", []) if a["device"] == o.get("device", 0)]
        live_sum = sum(a["size"] for a in live)
        ctx.checks.add(sec, "%s: the live set adds up to the post-mortem's live bytes" % label,
                       fmt_bytes(live_sum),
                       fmt_bytes(((rep or {}).get("oom") or {}).get("live_bytes")),
                       ok=live_sum == ((rep or {}).get("oom") or {}).get("live_bytes"),
                       note=err or "sum of the allocations in the file vs vramtap report --json")
        known = {}
        for group, items in (("parameters and buffers", res.get("params", [])),
                             ("gradients", res.get("grads", [])),
                             ("optimizer state", [s for s in res.get("state", [])
                                                  if s["on_device"]]),
                             ("input batch", [res["input"]]),
                             ("ballast", [res["ballast"]] if res.get("ballast") else [])):
            for t in items:
                known[addr_int(t["address"])] = (group, t["size"])
        matched = [a for a in live if addr_int(a["address"]) in known
                   and known[addr_int(a["address"])][1] == a["size"]]
        want_known = sum(s for _, s in known.values())
        others = [a for a in live if a not in matched]
        store["other_allocations"] = summarize_others(pm, others)
        ctx.checks.add(sec, "%s: the program's live tensors are all in it" % label,
                       "%d tensors, %s" % (len(known), fmt_bytes(want_known)),
                       "%d allocations, %s" % (len(matched), fmt_bytes(sum(a["size"]
                                                                         for a in matched))),
                       ok=len(matched) == len(known) and sum(a["size"] for a in matched)
                       == want_known,
                       note="parameters, buffers, gradients, optimizer state, the input batch "
                            "and the ballast, by address; the rest of the live set: %s" % (
                                ", ".join("%s %s" % (e["label"], fmt_bytes(e["bytes"]))
                                          for e in store["other_allocations"][:4]) or "nothing"))
        pool_sum = sum(a["size"] for a in live if a.get("kind") == "pool")
        at_fail = res.get("allocated_at_failure")
        ok = isinstance(at_fail, int) and abs(at_fail - pool_sum) <= 0.01 * max(at_fail, 1)
        ctx.checks.add(sec, "%s: pool bytes in the live set vs torch.cuda.memory_allocated()" % label,
                       fmt_bytes(at_fail), fmt_bytes(pool_sum), kind="tolerance", ok=ok,
                       note="read by the program right after the error; PyTorch's figure is the "
                            "pool's UsedMemCurrent (driver-rounded), tolerance 1%")
        ctx.checks.add(sec, "%s: device free and total recorded" % label, "integers",
                       "total %s, free %s" % (fmt_bytes(o.get("total_bytes")),
                                              fmt_bytes(o.get("free_bytes"))),
                       ok=isinstance(o.get("total_bytes"), int)
                       and isinstance(o.get("free_bytes"), int),
                       note="PyTorch's total_memory %s; device used at the failure (total - free) "
                            "%s vs live allocations %s" % (
                                fmt_bytes(res.get("total_memory")),
                                fmt_bytes((o.get("total_bytes") or 0) - (o.get("free_bytes") or 0)),
                                fmt_bytes(live_sum)))
        events = (snap or {}).get("oom_events") or []
        ctx.checks.add(sec, "%s: the exit snapshot lists the event" % label, ">= 1", len(events),
                       ok=len(events) >= 1)


# ---------------------------------------------------------------------------------------------
# The report


def write_report(ctx, final=False):
    """The Markdown report and the JSON beside it. A bug in the rendering must not lose the
    figures: the JSON is written first, and a failed rendering leaves a plain list of checks."""
    with open(ctx.json_path, "w") as f:
        json.dump({"date": ctx.date, "dry_run": ctx.dry, "checks": ctx.checks.items,
                   "notes": ctx.notes, "raw": ctx.raw}, f, indent=1, default=str)
    try:
        text = render_report(ctx, final)
    except Exception as e:  # see the docstring
        import traceback
        text = "# vramtap validation — %s\n\nThe report could not be rendered (%s: %s); the " \
               "figures are in %s.\n\n```\n%s```\n\n%s" % (
                   ctx.date, type(e).__name__, e, os.path.basename(ctx.json_path),
                   traceback.format_exc(), table(["check", "kind", "status", "expected", "got",
                                                  "note"],
                                                 [[x["name"], x["kind"], x["status"],
                                                   x["expected"], x["got"], x["note"]]
                                                  for x in ctx.checks.items]))
    with open(ctx.md_path, "w") as f:
        f.write(text)


def render_report(ctx, final):
    c = ctx.checks
    counts = {}
    for item in c.items:
        counts[item["status"]] = counts.get(item["status"], 0) + 1
    fails = c.exact_failures()
    tol = [x for x in c.items if x["status"] == "outside tolerance"]
    v = ctx.raw.get("versions", {})
    t = ctx.raw.get("torch", {})
    gpu = t.get("gpu") or ("CPU stand-in (dry run)" if ctx.dry else "unknown GPU")
    L = []
    L.append("# vramtap on %s — %s\n" % (gpu, ctx.date))
    if ctx.dry:
        L.append("**Dry run** on the CPU stand-in of the CUDA driver and CPU PyTorch: it proves the "
                 "script, not vramtap on a GPU. Figures below are computed from the stand-in and "
                 "from a mirror that allocates one stand-in buffer per tensor (workload.py).\n")
    L.append("Written by `scripts/gpu-validate%s` in %.0f s%s.\n" % (
        " --dry-run" if ctx.dry else "", time.monotonic() - ctx.runner.started,
        "" if final else " (incomplete: the run was still going or was stopped)"))
    L.append("## Summary\n")
    L.append("%d checks: %s. Exact checks failed: %d. Outside tolerance: %d.\n" % (
        len(c.items), ", ".join("%d %s" % (n, s) for s, n in sorted(counts.items())),
        len(fails), len(tol)))
    for x in fails + tol:
        L.append("- **%s** %s — expected %s, got %s. %s" % (
            x["status"], x["name"], x["expected"], x["got"], x["note"][:400]))
    if fails or tol:
        L.append("")
    for n in ctx.notes:
        L.append("- Note: %s" % n)
    L.append("\nKinds of check: *exact* must be equal (a failure makes the exit status 1); "
             "*tolerance* states its bound and why; *info* shows figures side by side.\n")
    for sec in SECTIONS:
        L.append("## %s\n" % SECTION_TITLES[sec])
        if sec == "versions":
            rows = [["GPU (torch)", gpu], ["GPU memory (torch)", fmt_bytes(t.get("gpu_total_bytes"))],
                    ["nvidia-smi", v.get("nvidia_smi")],
                    ["driver (CUDA version, nvidia-smi)", v.get("driver_cuda_version")],
                    ["driver (cuDriverGetVersion, PyTorch's process)", t.get("driver")],
                    ["PyTorch", t.get("torch")], ["PyTorch's CUDA", t.get("torch_cuda")],
                    ["cuDNN", t.get("cudnn")], ["NCCL", t.get("nccl")],
                    ["compute capability", t.get("capability")],
                    ["Python", "%s (%s)" % (t.get("python"), v.get("python"))],
                    ["kernel", v.get("kernel")], ["cc", v.get("cc")], ["nvcc", v.get("nvcc")],
                    ["vramtap", "%s, %s" % (v.get("vramtap"), v.get("vramtap_build"))]]
            for k, val in (v.get("cuda_found") or {}).items():
                rows.append(["CUDA %s" % k, val])
            for variant, d in (ctx.raw.get("cuda") or {}).items():
                a = d.get("account") or {}
                if a:
                    rows.append(["driver (cuDriverGetVersion, %s program)" % variant,
                                 a.get("driver_version")])
            L.append(table(["what", "value"], rows))
        items = c.of(sec)
        if sec == "cuda":
            L.append("The program keeps its own account of every allocation (routes.c) and "
                     "vramtap's snapshot must match it exactly. The cudaMemGetInfo comparison is "
                     "a tolerance: see its note.\n")
        if sec == "tensor":
            L.append("Under `vramtap run` (tensor mode: PyTorch allocates each tensor with "
                     "cudaMallocAsync). The program records where each parameter, buffer, "
                     "gradient and optimizer state tensor lives; vramtap's allocations at those "
                     "addresses are checked for size and for the category vramtap's own "
                     "classifier gives them (a report on just that group of allocations). "
                     "Gradients are kept between steps (`zero_grad(set_to_none=False)`), so all "
                     "of them are live at the peak.\n")
        if sec == "attach":
            L.append("The same programs with vramtap loaded by the CUDA driver as its CUPTI "
                     "injection library (`vramtap run --attach cupti`, no LD_PRELOAD), held to the "
                     "same accounts, API names included. And both "
                     "preloaded with the coverage check (`VRAMTAP_COVERAGE=1`): CUPTI counts "
                     "every allocation call of the runtime and the driver, and none may be "
                     "missing from what interposition recorded.\n")
        if sec == "frames":
            L.append("The Python frames tests' program (tests/python_stacks/frames.py) on the "
                     "Python that runs PyTorch here, allocating through the CUDA runtime: "
                     "generators, coroutines, `functools.partial`, a C function calling back "
                     "into Python, code made by `exec` and freed. Each allocation noted "
                     "`traceback.extract_stack()` on the line of its `cudaMalloc`; the "
                     "snapshot's Python frames for it must be the same files, lines and "
                     "functions, read from the interpreter's frames.\n")
        if sec == "native":
            L.append("PyTorch's caching allocator, segments not tensors: vramtap's peak must be "
                     "PyTorch's reserved peak, once allocations outside PyTorch's segments "
                     "(told apart by `torch.cuda.memory_snapshot()`'s address ranges) are set "
                     "aside.\n")
        if sec == "cost":
            L.append("scripts/bench's allocation pair (bench/alloc_pair.c) built against this "
                     "machine's CUDA runtime: `cudaMallocAsync` and `cudaFreeAsync` on the legacy "
                     "stream with 1,000 allocations live, plain and under vramtap, on 1 and on 8 "
                     "threads, the configurations alternated in each round. A round's added cost "
                     "is its vramtap run less its plain run; the checks take the median of the "
                     "rounds'. Their bounds are the targets scripts/bench holds vramtap to over "
                     "the CPU stand-in.\n")
        if items:
            L.append(table(["check", "kind", "status", "expected", "got", "note"],
                           [[x["name"], x["kind"], x["status"], x["expected"], x["got"],
                             x["note"]] for x in items]))
        if sec == "attach":
            rows = [[label, c["cupti"]["allocations"], fmt_bytes(c["cupti"]["bytes"]),
                     c["interposition"]["allocations"], fmt_bytes(c["interposition"]["bytes"]),
                     c["missed"]["allocations"], ", ".join(c["missed"]["by_api"]) or "none",
                     c.get("libcupti")] for label, c in (ctx.raw.get("coverage") or {}).items()]
            if rows:
                L.append("\nCoverage: allocations the driver made, as CUPTI counted them, beside "
                         "those vramtap's preloaded functions recorded:\n")
                L.append(table(["run", "CUPTI", "bytes", "interposition", "bytes", "missed",
                                "missed through", "CUPTI library"], rows))
        if sec in ("cuda", "attach"):
            for variant, d in (ctx.raw.get(sec) or {}).items():
                if d.get("table"):
                    L.append("\n%s runtime, allocation by allocation (Δfree: how "
                             "cudaMemGetInfo's free memory moved across the call):\n" % variant)
                    L.append(table(["route", "size", "kind", "live at peak", "API expected",
                                    "API recorded", "Δfree", "Δfree − size"], d["table"]))
        if sec in ("tensor", "native", "attach"):
            for name, d in (ctx.raw.get("runs") or {}).items():
                if not name.startswith(sec) or not d.get("report"):
                    continue
                dev = d["report"]["devices"][0]
                L.append("\n**%s**: peak %s at %s, step %s; categories %s.\n" % (
                    name, fmt_bytes(dev.get("peak_bytes")), (dev.get("peak") or {}).get("phase"),
                    (dev.get("peak") or {}).get("step"),
                    ", ".join("%s %s" % (k, fmt_bytes(val)) for k, val in
                              (dev.get("categories") or {}).items() if val) or "n/a (segments)"))
                if d.get("groups"):
                    L.append(table(["allocations at the peak", "count", "bytes",
                                    "vramtap's categories"],
                                   [[g, e["count"], fmt_bytes(e["bytes"]),
                                     ", ".join("%s %s" % (k, fmt_bytes(x)) for k, x in
                                               (e["categories"] or {}).items() if x)]
                                    for g, e in d["groups"].items()]))
                others = d.get("other_allocations") or d.get("outside_allocations")
                if others:
                    L.append("\nNot the program's own tensors (by site):\n")
                    L.append(table(["site", "kind", "born in", "count", "bytes"],
                                   [[o["label"], o["kind"], o["born"], o["count"],
                                     fmt_bytes(o["bytes"])] for o in others]))
        if sec == "cost" and (ctx.raw.get("cost") or {}).get("table"):
            cst = ctx.raw["cost"]
            L.append("\nNanoseconds a pair, %d rounds of %s pairs a thread (after as many on the "
                     "main thread to warm up); wall time is the run's over all threads' pairs:\n"
                     % (cst["rounds"], format(cst["pairs_per_thread"], ",")))
            L.append(table(["configuration", "threads", "lowest wall", "median wall",
                            "median CPU", "added wall", "added CPU"], cst["table"]))
        if sec == "tools":
            p = ctx.raw.get("profiler") or {}
            if p.get("timeline"):
                vt = ((ctx.raw.get("runs") or {}).get("tensor-fp32") or {}).get("categories") or {}
                keys = sorted(set(p["mapped"]) | set(vt))
                L.append("\ntorch.profiler (`profile_memory`, `record_shapes`, `with_stack`; "
                         "`export_memory_timeline` raw events replayed) at its peak, beside "
                         "vramtap's fp32 tensor-mode run of the same model, seed and batch. Not a "
                         "check: the profiler ran with PyTorch's native allocator and its own "
                         "category rules (INPUT counted as activations here).\n")
                L.append(table(["category", "torch.profiler", "vramtap"],
                               [[k, fmt_bytes(p["mapped"].get(k)), fmt_bytes(vt.get(k))]
                                for k in keys] + [["total at peak",
                                                   fmt_bytes(p["timeline"]["peak"]),
                                                   fmt_bytes(sum(x for x in vt.values()
                                                                 if isinstance(x, int)))]]))
                L.append("\nProfiler: %d events; profiling %.1f s, export %.1f s.\n" % (
                    p["timeline"]["events"], p["result"].get("profiled_s", 0),
                    p["result"].get("export_s", 0)))
            if ctx.raw.get("timing_table"):
                L.append("\nStep time (median over the timed steps, synchronised each step); "
                         "ratio to the plain run with PyTorch's native allocator:\n")
                L.append(table(["configuration", "median step (ms)", "ratio", "note"],
                               ctx.raw["timing_table"]))
        if sec == "oom":
            for kind, d in (ctx.raw.get("oom") or {}).items():
                r = d.get("result") or {}
                if r.get("message"):
                    L.append("\n%s: PyTorch said: `%s`\n" % (
                        kind, md_escape(r["message"].strip().splitlines()[0][:300])))
                if d.get("other_allocations"):
                    L.append(table(["other live allocations (site)", "kind", "born in", "count",
                                    "bytes"], [[o["label"], o["kind"], o["born"], o["count"],
                                                fmt_bytes(o["bytes"])]
                                               for o in d["other_allocations"]]))
        L.append("")
    L.append("## Raw data\n")
    L.append("`%s` beside this file holds every figure above and the programs' outputs.%s\n" % (
        os.path.basename(ctx.json_path), " The snapshots and logs are in the archive named by "
        "--archive." if ctx.args.archive else ""))
    return "\n".join(L)


class Ctx:
    pass


def main():
    ap = argparse.ArgumentParser(prog="gpu-validate")
    ap.add_argument("--dry-run", action="store_true", help="no GPU: the CPU stand-in, CPU torch")
    ap.add_argument("--build", help="a vramtap build directory to use (else build one here)")
    ap.add_argument("--report-dir", help="where the report goes (default docs/validation, or a "
                                         "temporary directory in a dry run)")
    ap.add_argument("--work", help="working directory (default: a temporary one)")
    ap.add_argument("--archive", help="also write the working directory (snapshots, logs) as "
                                      "this .tar.gz")
    ap.add_argument("--only", help="comma-separated sections: " + ",".join(SECTIONS[1:]))
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds for the whole run; later sections are skipped past it "
                         "(default 330; 500 in a dry run, which may share two cores with a test "
                         "suite)")
    ap.add_argument("--python", default=sys.executable, help="the Python with torch")
    ap.add_argument("--process-timeout", type=float, default=None,
                    help="seconds one PyTorch process may take (default 120 on a GPU, 300 in a "
                         "dry run; the profiler run gets twice that)")
    ap.add_argument("--prepare-carry", action="store_true",
                    help="only build a release vramtap in build-validate-carry to take to a GPU "
                         "machine that cannot build it (no run)")
    args = ap.parse_args()
    if args.prepare_carry:
        return prepare_carry(args.python)

    ctx = Ctx()
    ctx.args = args
    ctx.dry = args.dry_run
    ctx.python = args.python
    ctx.checks = Checks()
    ctx.raw = {}
    ctx.notes = []
    ctx.vramtap_extra_env = {}
    ctx.first_failure = None
    ctx.proc_timeout = args.process_timeout or (300 if ctx.dry else 120)
    ctx.date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    work = args.work or tempfile.mkdtemp(prefix="vt-validate-")
    os.makedirs(work, exist_ok=True)
    args.budget = args.budget or (500 if ctx.dry else 330)
    ctx.runner = Runner(os.path.abspath(work), args.budget)
    report_dir = args.report_dir or (tempfile.mkdtemp(prefix="vt-validate-report-") if ctx.dry
                                     else os.path.join(ROOT, "docs", "validation"))
    os.makedirs(report_dir, exist_ok=True)

    if not ctx.dry:
        # Before anything is built or written into docs/: is there a GPU PyTorch can use?
        probe = subprocess.run([ctx.python, "-c", "import torch; print(torch.cuda.is_available())"],
                               capture_output=True, text=True, timeout=300)
        if probe.stdout.strip() != "True":
            print("gpu-validate: PyTorch (%s) sees no CUDA device%s; on a machine without one, "
                  "use --dry-run" % (ctx.python, ": " + probe.stderr.strip()[-300:]
                                     if probe.returncode else ""), file=sys.stderr)
            return 2
    ctx.cuda = find_cuda(ctx.python, ctx.dry)
    ctx.build, notes = build_vramtap(ctx, ctx.dry)
    ctx.notes += notes
    section_versions(ctx)

    def slug():
        smi = str(ctx.raw.get("versions", {}).get("nvidia_smi") or "")
        smi_name = smi.split(",")[0].strip() if "," in smi else None
        t = (ctx.raw.get("torch", {}).get("gpu") or smi_name or
             ("dry-run-standin" if ctx.dry else "gpu"))
        return re.sub(r"[^a-z0-9]+", "-", t.lower()).strip("-")

    ctx.md_path = os.path.join(report_dir, "%s-%s.md" % (ctx.date, slug()))
    ctx.json_path = ctx.md_path[:-3] + ".json"
    print("gpu-validate: work directory %s" % ctx.runner.work, flush=True)
    if not ctx.build:
        ctx.checks.add("versions", "vramtap built or carried along", True, False,
                       note="; ".join(notes))
        write_report(ctx, final=True)
        print("gpu-validate: no usable vramtap build: %s" % "; ".join(notes), file=sys.stderr)
        return 2
    only = set(args.only.split(",")) if args.only else set(SECTIONS)
    fns = {"cuda": section_cuda, "tensor": section_tensor, "native": section_native,
           "tools": section_tools, "oom": section_oom, "attach": section_attach,
           "frames": section_frames, "cost": section_cost}
    for sec in RUN_ORDER:
        if sec not in only:
            ctx.checks.skip(sec, "section", "not asked for (--only)", kind="info")
            continue
        if ctx.runner.left() < 20:
            ctx.checks.skip(sec, "section", "skipped: the time budget (--budget %g s) ran out"
                            % args.budget)
            continue
        t0 = time.monotonic()
        print("gpu-validate: %s ..." % SECTION_TITLES[sec], flush=True)
        try:
            fns[sec](ctx)
        except Exception as e:  # a bug here must not cost the other sections
            import traceback
            ctx.checks.add(sec, "section ran", True, False,
                           note="validate.py raised %s: %s" % (type(e).__name__, e))
            ctx.raw.setdefault("tracebacks", {})[sec] = traceback.format_exc()
        ctx.raw.setdefault("section_seconds", {})[sec] = round(time.monotonic() - t0, 1)
        # Rename once the GPU's name is known, and keep a report on disk after each section.
        new_md = os.path.join(report_dir, "%s-%s.md" % (ctx.date, slug()))
        if new_md != ctx.md_path:
            for old in (ctx.md_path, ctx.json_path):
                if os.path.exists(old):
                    os.remove(old)
            ctx.md_path, ctx.json_path = new_md, new_md[:-3] + ".json"
        write_report(ctx)
    write_report(ctx, final=True)
    if args.archive:
        with tarfile.open(args.archive, "w:gz") as tar:
            # The per-group copies of snapshots are left out: they repeat the snapshots.
            tar.add(ctx.runner.work, arcname="gpu-validate-work",
                    filter=lambda ti: None if ti.size > 32 * MiB or
                    os.path.basename(ti.name).startswith("subset-") else ti)
    fails = ctx.checks.exact_failures()
    print("gpu-validate: report %s" % ctx.md_path)
    print("gpu-validate: %d checks, %d exact failures, %d outside tolerance" % (
        len(ctx.checks.items), len(fails),
        len([x for x in ctx.checks.items if x["status"] == "outside tolerance"])))
    for x in fails:
        print("FAIL: %s (expected %s, got %s)" % (x["name"], x["expected"], x["got"]))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
