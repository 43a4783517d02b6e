"""Bad or unknown input: one clear line on stderr, exit status 2, nothing written; a pickle that
names any Python object is refused before anything in it can run."""
import gzip
import json
import os
import pickle

from common import TRACES, check, done, run, tempdir


class Boom:
    """Unpickling this with the default Unpickler would create a file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def one_line_error(p, what, mentions=None):
    lines = p.stderr.strip().splitlines()
    ok = check(p.returncode == 2, f"{what}: exit {p.returncode}, expected 2 ({p.stderr!r})")
    ok &= check(len(lines) == 1 and lines[0].startswith("vramtap import: "),
                f"{what}: stderr is not one 'vramtap import:' line: {p.stderr!r}")
    if mentions:
        ok &= check(mentions in p.stderr, f"{what}: stderr does not mention {mentions!r}: "
                                          f"{p.stderr!r}")
    return ok


def main():
    with tempdir() as tmp:
        def path(name, content, compress=False):
            p = os.path.join(tmp, name)
            data = content.encode() if isinstance(content, str) else content
            with open(p, "wb") as f:
                f.write(gzip.compress(data) if compress else data)
            return p

        out = os.path.join(tmp, "out.json")
        real = os.path.join(TRACES, "hta_df_index_resolver.json.gz")
        with open(real, "rb") as f:
            truncated_gz = f.read()[:200000]
        marker = os.path.join(tmp, "pwned")
        cases = [
            ("missing file", os.path.join(tmp, "nope.json"), "cannot open"),
            ("empty file", path("empty.json", b""), "empty"),
            ("random bytes", path("noise.bin", bytes(range(7, 200))), "not a Kineto trace"),
            ("text", path("notes.txt", "hello, world\n"), "not a Kineto trace"),
            ("JSON without traceEvents", path("other.json", '{"a": [1, 2, 3]}'),
             "traceEvents"),
            ("Kineto without memory events",
             path("nomem.json", json.dumps({"traceEvents": [
                 {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1,
                  "dur": 2}]})), "profile_memory"),
            ("JSON cut short", path("cut.json", '{"traceEvents": [{"ph": "X", "name": "a"'),
             "not valid JSON"),
            ("JSON with a syntax error",
             path("syntax.json", '{"traceEvents": [{"ph": "i",, "name": "[memory]"}]}'),
             "not valid JSON"),
            ("data after the JSON", path("after.json", '{"traceEvents": []} {}'), None),
            ("gzip cut short", path("cut.json.gz", truncated_gz), None),
            ("gzip of garbage", path("garbage.json.gz", b"\x1f\x8b\x08\x00garbage-garbage"), None),
            ("memory timeline of the wrong shape", path("tl.raw.json", "[[1, 2, 3]]"),
             "not a memory timeline"),
            ("pickle that names a class",
             path("evil.pickle", pickle.dumps(Boom(marker), protocol=2)), "refusing"),
            ("gzipped pickle that names a class",
             path("evil.pickle.gz", pickle.dumps(Boom(marker), protocol=4), compress=True),
             "refusing"),
            ("pickle of plain data that is no snapshot",
             path("dict.pickle", pickle.dumps({"hello": 1})), "not a PyTorch memory snapshot"),
            ("snapshot with nothing recorded",
             path("nothing.pickle", pickle.dumps({"segments": [], "device_traces": [[]]})),
             "no GPU allocations"),
            ("pickle cut short",
             path("cut.pickle", pickle.dumps({"segments": [], "device_traces": [[]]})[:-5]),
             "damaged pickle"),
        ]
        for what, file, mentions in cases:
            if os.path.exists(out):
                os.unlink(out)
            p = run(["import", file, "-o", out])
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
