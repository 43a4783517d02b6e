"""The five-category bill `vramtap report --json` gives each imported reference trace is
plausible for the model and optimizer that made it (docs/validation/real-traces.md says what is
known of each run). Skipped when the reference traces are not present."""
import json
import os

from common import check, done, import_file, reference_traces, run, tempdir

GiB = 1 << 30
MiB = 1 << 20


# PyTorch's default cuBLAS workspace before Hopper: the cs336 runs made two before their
# recording began (the main thread's handle and autograd's), with no stack
CUBLAS_WORKSPACE = 4096 * 1024 * 2 + 16 * 1024 * 8
workspaces = {}


def bill(path, tmp):
    snap, p = import_file(path, tmp)
    if not check(p.returncode == 0, f"{path}: import exit {p.returncode}: {p.stderr}"):
        return None, None
    out = os.path.join(tmp, os.path.basename(path) + ".vramtap.json")
    r = run(["report", "--json", out])
    if not check(r.returncode == 0, f"{path}: report exit {r.returncode}: {r.stderr}"):
        return None, None
    dev = json.loads(r.stdout)["devices"][0]
    workspaces[os.path.basename(path)] = dev["library_workspace_bytes"]
    return snap, dev["categories"]


def ratio(c, key):
    return c[key] / c["parameters"] if c["parameters"] else float("nan")


def main():
    traces = reference_traces()
    with tempdir() as tmp:
        def get(name):
            return bill(os.path.join(traces, name), tmp)

        # GPT-style LM, d=1024, 24 layers, vocabulary 10000: about 424 M fp32 parameters;
        # AdamW keeps two fp32 moments per parameter (replaced every step by this optimizer)
        # (docs/validation/real-traces.md). Made before the window, without a stack: the 219
        # parameters (49 x 4 KiB, 96 x 4 MiB, 72 x 16 MiB, 2 x 39.06 MiB), the RoPE buffer
        # (128 KiB), the token batches (2 x 80 KiB, 2 x 16 KiB), two cuBLAS workspaces; the
        # moments the step replaces (freed by the optimizer) are exactly two per parameter.
        _, c = get("cs336_wedsonlin_medium_ctx512_train.pickle.gz")
        if c:
            params = 49 * 4096 + 96 * 4 * MiB + 72 * 16 * MiB + 2 * 40960000
            check(c["parameters"] == params + 128 * 1024 + 2 * 81920 + 2 * 16384,
                  f"wedsonlin parameters {c}")
            check(c["optimizer_state"] == 2 * params, f"wedsonlin AdamW state {c}")
            check(f"{ratio(c, 'optimizer_state'):.2f}" == "2.00", f"wedsonlin AdamW ratio {c}")
            check(c["activations"] > c["parameters"], f"wedsonlin activations {c}")

        # small LM under torch.compile, AdamW, peak inside the optimizer step
        _, c = get("cs336_bcrafton_compiled_train.pickle.gz")
        if c:
            check(c["parameters"] > 0 and c["optimizer_state"] > 0, f"bcrafton {c}")
            check(0.5 <= ratio(c, "optimizer_state") <= 3, f"bcrafton AdamW state {c}")

        # forward and backward only: no optimizer state; the peak comes before backward
        _, c = get("cs336_magma27_train.pickle.gz")
        if c:
            check(c["optimizer_state"] == 0 and c["gradients"] == 0, f"magma27 {c}")
            check(c["activations"] > sum(c.values()) / 2, f"magma27 activations {c}")

        # SGD: no optimizer state made inside the window
        _, c = get("hta_df_index_resolver.json.gz")
        if c:
            check(c["optimizer_state"] == 0 and c["parameters"] > 0, f"hta {c}")

        # ResNet-50, SGD, a trace without running totals: what existed before the window
        # (parameters, momentum) is invisible; the window's activations dominate
        _, c = get("kineto_tbplugin_resnet50_nw0.json.gz")
        if c:
            check(c["parameters"] == 0 and c["optimizer_state"] == 0, f"resnet50 {c}")
            check(c["activations"] > 0.9 * sum(c.values()), f"resnet50 activations {c}")

        # Qwen1.5-0.5B inference in bf16: about 464 M parameters, 2 bytes each
        _, c = get("tracelens_qwen1.5-0.5b_h100_infer.json.gz")
        if c:
            check(c["gradients"] == 0 and c["optimizer_state"] == 0, f"qwen {c}")
            check(0.85 * GiB <= c["parameters"] <= 1.0 * GiB, f"qwen parameters {c}")

        # ResNet-50 (25.6 M fp32 parameters), PyTorch's own labels; vramtap has no phases there
        snap, c = get("hta_resnet50_memory_timeline.raw.json.gz")
        if c:
            check(c["unattributed"] == snap["devices"][0]["peak_bytes"], f"timeline {c}")
            pt = snap["import"]["devices"][0]["pytorch_categories_at_peak"]
            check(95 * MiB <= pt["parameter"] <= 100 * MiB, f"timeline parameters {pt}")
        for name in ("cs336_wedsonlin_medium_ctx512_train.pickle.gz",
                     "cs336_bcrafton_compiled_train.pickle.gz", "cs336_magma27_train.pickle.gz"):
            if name in workspaces:
                check(workspaces[name] == 2 * CUBLAS_WORKSPACE,
                      f"{name}: library workspaces {workspaces[name]}")
    done()


main()
