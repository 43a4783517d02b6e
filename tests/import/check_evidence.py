"""fixtures/evidence.pickle (made by fixtures/make.py): a memory-snapshot pickle recorded one
step after warm-up, like a GPT-style AdamW run. The parameters, gradients, AdamW moments and a
cuBLAS workspace were all made before the window; only their allocation stacks say what they
are: C++ frames alone on autograd's engine thread (gradients), a `step` under
torch/optim/optimizer.py's wrapper, in the user's optimizer file or in train.py (moments),
at::cuda::getNewWorkspace among Python frames (workspace). Two more have no stack, made before
history was recorded: one of PyTorch's default cuBLAS workspace size (workspace), one other
(parameters, by timing). One Python frame carries line
2**64 - 1, as CPython 3.13 reports for some frames: an unknown line, not a refusal.
`vramtap report --json` must bill each category to the byte, by the evidence worked out below."""
import json

from common import check, done, fixture, import_file, run, tempdir

MiB = 1 << 20
CUBLAS_WORKSPACE = 4096 * 1024 * 2 + 16 * 1024 * 8


def main():
    with tempdir() as tmp:
        snap, p = import_file(fixture("evidence.pickle"), tmp)
        if not check(p.returncode == 0, f"import exit {p.returncode}: {p.stderr}"):
            done()
        lines = [f.get("line") for s in snap["sites"] for f in s["frames"]
                 if f.get("file") == "torch/nn/functional.py"]
        check(lines == [None], f"the out-of-range line is unknown: {lines}")
        out = tmp + "/evidence.pickle.vramtap.json"
        r = run(["report", "--json", out])
        if not check(r.returncode == 0, f"report exit {r.returncode}: {r.stderr}"):
            done()
        dev = json.loads(r.stdout)["devices"][0]
        ws = 8 * MiB + CUBLAS_WORKSPACE
        want = {"parameters": 6 * MiB, "gradients": 4 * MiB, "optimizer_state": 10 * MiB,
                "activations": 1 * MiB, "temporary": ws + 512 * 1024, "unattributed": 0}
        check(dev["categories"] == want, f"categories {dev['categories']}, expected {want}")
        evidence = {
            "parameters": {"identity": 0, "stack": 0, "timing": 6 * MiB},
            "gradients": {"identity": 0, "stack": 4 * MiB, "timing": 0},
            "optimizer_state": {"identity": 0, "stack": 10 * MiB, "timing": 0},
            "activations": {"identity": 0, "stack": 0, "timing": 1 * MiB},
            "temporary": {"identity": 0, "stack": ws, "timing": 512 * 1024},
        }
        check(dev["evidence"] == evidence, f"evidence {dev['evidence']}, expected {evidence}")
        check(dev["library_workspace_bytes"] == ws,
              f"library workspaces {dev['library_workspace_bytes']}")
        check(abs(dev["checks"]["optimizer_state_per_parameter"] - 10 / 6) < 1e-9
              and abs(dev["checks"]["gradients_per_parameter"] - 4 / 6) < 1e-9,
              f"checks {dev['checks']}")
        text = run(["report", out]).stdout
        check("\n    of which library workspaces   16.12 MiB\n" in text
              and "    by stack     gradients 4.00 MiB, optimizer state 10.00 MiB, temporary 16.12 "
                  "MiB\n" in text,
              f"the report shows the library workspaces:\n{text}")

        # the curves of the trace export (and of `vramtap view`, drawn from the same series)
        # follow the bill's evidence: after the window's activation and temporary are freed,
        # what stays is billed as at the peak, workspaces as temporary
        trace = tmp + "/evidence.trace.json"
        r = run(["export", "--perfetto", "-o", trace, out])
        if check(r.returncode == 0, f"export exit {r.returncode}: {r.stderr}"):
            with open(trace) as f:
                events = json.load(f)["traceEvents"]
            last = max((e for e in events if e.get("ph") == "C"), key=lambda e: e["ts"])["args"]
            end = dict(want, activations=0, temporary=ws, unattributed_persistent=0,
                       unattributed_transient=0)
            del end["unattributed"]
            check(last == end, f"the export's last counter {last}, expected {end}")

        # PyTorch's own labels of a memory timeline reach report, --json and diff
        snap, p = import_file(fixture("memory_timeline.raw.json"), tmp)
        if not check(p.returncode == 0, f"timeline import exit {p.returncode}: {p.stderr}"):
            done()
        out = tmp + "/memory_timeline.raw.json.vramtap.json"
        theirs = snap["import"]["devices"][0]["pytorch_categories_at_peak"]
        dev = json.loads(run(["report", "--json", out]).stdout)["devices"][0]
        check(dev["pytorch_categories"] == theirs,
              f"--json pytorch_categories {dev.get('pytorch_categories')}, expected {theirs}")
        text = run(["report", out]).stdout
        check("PyTorch's own categories" in text and all(
            name in text for name, n in theirs.items() if n > 0), f"report:\n{text}")
        d = json.loads(run(["diff", "--json", out, out]).stdout)["devices"][0]
        check(d["pytorch_categories"] == {"a": theirs, "b": theirs}, f"diff --json {d}")
        text = run(["diff", tmp + "/evidence.pickle.vramtap.json", out]).stdout
        check("PyTorch's own categories" in text, f"diff:\n{text}")
    done()


main()
