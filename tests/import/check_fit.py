"""`vramtap fit` over imported recordings of one model at several sequence lengths (the seq/
fixtures made by fixtures/make.py): with materialised attention scores the activations grow as
L^2 and the fit says so; with flash-style attention they grow linearly and it says that. Each
prediction is checked against a recording made at that length."""
import json
import os

from common import check, done, fixture, fixture_maker, import_file, run, tempdir

MiB = 1 << 20


def fit(*args):
    p = run(["fit", "--json", *args])
    if not check(p.returncode == 0, f"fit {args}: exit {p.returncode}: {p.stderr}"):
        return {}
    return json.loads(p.stdout)["devices"][0]


def imported(kind, length, tmp):
    path = fixture(f"seq/{kind}_{length}.pt.trace.json")
    snap, p = import_file(path, tmp)
    check(p.returncode == 0, f"import {path}: {p.stderr}")
    return os.path.join(tmp, os.path.basename(path) + ".vramtap.json")


def recorded(make, kind, length, tmp):
    """A recording at a length no fixture has, made the same way, imported."""
    path = os.path.join(tmp, f"{kind}_{length}.pt.trace.json")
    with open(path, "w") as f:
        json.dump(make.seq_sweep(length, attention=kind == "attention"), f)
    _, p = import_file(path, tmp)
    check(p.returncode == 0, f"import {path}: {p.stderr}")
    r = run(["report", "--json", path + ".vramtap.json"])
    return json.loads(r.stdout)["devices"][0]


def superlinear_said(f):
    return any("superlinear" in a for a in f.get("assumptions", []))


def main():
    make = fixture_maker()
    lengths = make.SEQ_LENGTHS
    with tempdir() as tmp:
        for kind in ("attention", "flash"):
            att = kind == "attention"
            runs = [f"{imported(kind, n, tmp)}={n}" for n in lengths]
            f = fit(*runs, "--predict", "1024")
            acts = f.get("fit", {}).get("activations", {})
            # the fixture's own sizes: 4096 bytes per token kept, 16 per token pair of scores
            check(acts == {"fixed_bytes": 0, "per_unit_bytes": 4096,
                           "per_unit2_bytes": 16 if att else 0,
                           "growth": "quadratic" if att else "linear"},
                  f"{kind}: activations {acts}")
            check(superlinear_said(f) == att, f"{kind}: superlinear said: {f.get('assumptions')}")
            check(f.get("warnings") == [], f"{kind}: warnings {f.get('warnings')}")
            measured = recorded(make, kind, 1024, tmp)
            p = f.get("predicted", {})
            check((p.get("peak_bytes"), p.get("phase")) ==
                  (measured["peak_bytes"], measured["peak"]["phase"]),
                  f"{kind}: predicted at 1024 {p.get('peak_bytes')} in {p.get('phase')}, "
                  f"recorded {measured['peak_bytes']} in {measured['peak']['phase']}")
            check(p.get("categories") == measured["categories"],
                  f"{kind}: bill at 1024 {p.get('categories')} vs {measured['categories']}")
            # three lengths suffice to see the parabola; two cannot, and the fit says so
            f3 = fit(*runs[:2], runs[3])
            check(f3.get("fit", {}).get("activations", {}).get("growth") ==
                  ("quadratic" if att else "linear"), f"{kind}, three lengths: {f3.get('fit')}")
            f2 = fit(runs[0], runs[3])
            check(f2.get("fit", {}).get("activations", {}).get("growth") == "linear" and
                  any("only with three runs or more" in a for a in f2.get("assumptions", [])),
                  f"{kind}, two lengths: {f2.get('fit')} {f2.get('assumptions')}")
    done()


main()
