"""Bad or unknown input: one clear line on stderr, exit status 2, nothing written; a pickle that
names any Python object is refused before anything in it can run."""
import json
import os
import pickle

from common import check, done, fixture, fixture_maker, run, tempdir


def one_line_error(p, what, mentions=None):
    lines = p.stderr.strip().splitlines()
    ok = check(p.returncode == 2, f"{what}: exit {p.returncode}, expected 2 ({p.stderr!r})")
    ok &= check(len(lines) == 1 and lines[0].startswith("vramtap import: "),
                f"{what}: stderr is not one 'vramtap import:' line: {p.stderr!r}")
    if mentions:
        ok &= check(mentions in p.stderr, f"{what}: stderr does not mention {mentions!r}: "
                                          f"{p.stderr!r}")
    return ok


# (what, fixture in broken/, what stderr must mention)
CASES = [
    ("empty file", "empty.json", "empty"),
    ("random bytes", "noise.bin", "not a Kineto trace"),
    ("text", "notes.txt", "not a Kineto trace"),
    ("JSON without traceEvents", "other.json", "traceEvents"),
    ("Kineto without memory events", "nomem.json", "profile_memory"),
    ("JSON cut short", "cut.json", "not valid JSON"),
    ("JSON with a syntax error", "syntax.json", "not valid JSON"),
    ("data after the JSON", "after.json", None),
    ("gzip cut short", "cut.json.gz", None),
    ("gzip of garbage", "garbage.json.gz", None),
    ("memory timeline of the wrong shape", "tl.raw.json", "not a memory timeline"),
    ("pickle that names a function", "evil.pickle", "refusing"),
    ("gzipped pickle that names a function", "evil.pickle.gz", "refusing"),
    ("pickle of plain data that is no snapshot", "dict.pickle", "not a PyTorch memory snapshot"),
    ("snapshot with nothing recorded", "nothing.pickle", "no GPU allocations"),
    ("pickle cut short", "cut.pickle", "damaged pickle"),
    ("pickle whose memo index would take 1.2 GB", "memo.pickle", "more memory than 256 MiB"),
]


def main():
    make = fixture_maker()
    broken = sorted(n for n in make.fixtures() if n.startswith("broken/"))
    check(broken == sorted("broken/" + c[1] for c in CASES),
          f"every broken fixture has a case and every case a fixture: {broken}")
    with tempdir() as tmp:
        def path(name, content):
            p = os.path.join(tmp, name)
            with open(p, "wb") as f:
                f.write(content.encode() if isinstance(content, str) else content)
            return p

        out = os.path.join(tmp, "out.json")
        real = fixture("synthetic.pt.trace.json")
        marker = os.path.join(tmp, make.PWNED)
        cases = [("missing file", os.path.join(tmp, "nope.json"), "cannot open")]
        cases += [(what, fixture("broken/" + name), mentions) for what, name, mentions in CASES]
        for what, file, mentions in cases:
            if os.path.exists(out):
                os.unlink(out)
            p = run(["import", file, "-o", out], cwd=tmp)
            one_line_error(p, what, mentions)
            check(not os.path.exists(out), f"{what}: wrote {out} anyway")
            check(not any(n.startswith("out.json.tmp") for n in os.listdir(tmp)),
                  f"{what}: left a temporary file")
        check(not os.path.exists(marker), "the refused pickle ran code")

        usage = [
            ("no file", ["import"]),
            ("two files", ["import", real, real]),
            ("unknown option", ["import", "--frobnicate", real]),
            ("-o without a name", ["import", real, "-o"]),
        ]
        for what, args in usage:
            p = run(args)
            check(p.returncode == 2, f"{what}: exit {p.returncode}")
        p = run(["import", "--help"])
        check(p.returncode == 0 and "usage: vramtap import" in p.stdout, "--help")

        p = run(["import", real, "-o", os.path.join(tmp, "no", "such", "dir", "x.json")])
        one_line_error(p, "unwritable output", "cannot create")

        # '-o -' writes the snapshot to stdout and the summary to stderr
        small = path("small.json", json.dumps({"traceEvents": [
            {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 5,
             "args": {"Device Type": 1, "Device Id": 0, "Bytes": 512}}]}))
        p = run(["import", small, "-o", "-"])
        if check(p.returncode == 0, f"-o -: exit {p.returncode} {p.stderr}"):
            snap = json.loads(p.stdout)
            check(snap["devices"][0]["peak_bytes"] == 512, "-o -: peak")
            check("lacks addresses" in p.stderr and "lacks running totals" in p.stderr,
                  f"-o -: what the trace lacks goes to stderr: {p.stderr!r}")
        # the default output name: the input's name without extensions, in the working dir
        p = run(["import", small], cwd=tmp)
        check(p.returncode == 0 and os.path.exists(os.path.join(tmp, "small.vramtap.json")),
              f"default output name: {p.returncode} {p.stdout} {p.stderr}")

        # a helper that cannot run: one line, exit 2
        env = dict(os.environ, VRAMTAP_PYTHON=os.path.join(tmp, "no-python"))
        pk = path("ok.pickle", pickle.dumps({"segments": [], "device_traces": [[]]}))
        p = run(["import", pk, "-o", out], env=env)
        one_line_error(p, "missing Python", "VRAMTAP_PYTHON")
    done()


main()
