"""Every input the fuzzers found a fault with (regressions/), fed to the real `vramtap` command.
A name's `.refused.` means the command must refuse it: exit status 2, one line on stderr, no
file written. `.accepted.` means it must import, and `vramtap report` must read what the
import wrote. regressions/import/ holds traces for `vramtap import`; regressions/pickle/ holds
the records the pickle helper writes, fed to `vramtap import` through a stand-in helper
(VRAMTAP_PYTHON) that prints them, as a pickle they came from would."""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "import"))
from common import check, done, run  # noqa: E402  (tests/import's helpers)


def one(name, path, tmp, env=None):
    out = os.path.join(tmp, "out.json")
    if os.path.exists(out):
        os.unlink(out)
    p = run(["import", path, "-o", out], env=dict(os.environ, **(env or {})))
    lines = p.stderr.splitlines()
    if ".refused." in name:
        check(p.returncode == 2, f"{name}: import exit {p.returncode}, expected 2: {p.stderr!r}")
        check(len(lines) == 1 and lines[0].startswith("vramtap import: "),
              f"{name}: stderr is not one 'vramtap import:' line: {p.stderr!r}")
        check(not p.stderr.rstrip().endswith(":"), f"{name}: the line does not say why")
        check(not os.path.exists(out), f"{name}: a refused input left {out}")
        return
    if check(p.returncode == 0, f"{name}: import exit {p.returncode}: {p.stderr!r}"):
        r = run(["report", out])
        check(r.returncode == 0 and not r.stderr,
              f"{name}: report of the import: exit {r.returncode}: {r.stderr!r}")


def main():
    seen = 0
    with tempfile.TemporaryDirectory(prefix="vt-fuzz-reg-") as tmp:
        helper = os.path.join(tmp, "helper.sh")
        with open(helper, "w") as f:
            f.write('#!/bin/sh\n# stand-in pickle helper: $3 is the "pickle"; skip its first line\n'
                    'exec tail -n +2 "$3"\n')
        os.chmod(helper, 0o755)
        for kind in ("import", "pickle"):
            folder = os.path.join(HERE, "regressions", kind)
            for name in sorted(os.listdir(folder)):
                check(".refused." in name or ".accepted." in name,
                      f"{name}: the name says neither .refused. nor .accepted.")
                path = os.path.join(folder, name)
                seen += 1
                if kind == "import":
                    one(name, path, tmp)
                    continue
                pickle = os.path.join(tmp, name + ".pickle")
                with open(path, "rb") as src, open(pickle, "wb") as dst:
                    dst.write(b"\x80\n" + src.read())  # sniffed as a pickle
                one(name, pickle, tmp, {"VRAMTAP_PYTHON": helper})
    check(seen > 0, "no regression inputs found")
    print(f"{seen} input(s)")
    done()


if __name__ == "__main__":
    main()
