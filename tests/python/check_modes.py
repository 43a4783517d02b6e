"""Tensor mode under `vramtap run` with Debian's PyTorch: what the program sees in os.environ,
what the snapshot records, and what vramtap says on stderr."""

import json
import os

from vtpy import (HERE, PYTHON, check, clean_env, finish, require_python_under_sanitizer, show,
                  vramtap_run)

require_python_under_sanitizer()
PROBE = [PYTHON, os.path.join(HERE, "probe_env.py")]
ASYNC = "backend:cudaMallocAsync"
USER = "expandable_segments:True"


def run(case, run_args=(), probe_args=(), **env):
    p, snaps = vramtap_run(PROBE + list(probe_args), run_args, env=clean_env(**env))
    if not check(p.returncode == 0 and len(snaps) == 1, case + ": ran, one snapshot", show(p)):
        return None, None, None
    seen = json.loads(p.stdout.strip().splitlines()[-1])
    check(seen["hooked"] and seen["backward_hooked"], case + ": PyTorch hooks installed", seen)
    return seen, snaps[0], [l for l in p.stderr.splitlines() if l.startswith("vramtap:")]


def mode(snap):
    return snap["modes"]["pytorch"]["mode"], snap["modes"]["pytorch"]["reason"]


seen, snap, said = run("default")
if snap:
    check(seen["PYTORCH_CUDA_ALLOC_CONF"] == ASYNC, "default: the program sees tensor mode", seen)
    check(mode(snap) == ("tensor", "default"), "default: snapshot mode", snap["modes"])
    check(snap["env_set"].get("PYTORCH_CUDA_ALLOC_CONF") == ASYNC, "default: env_set",
          snap["env_set"])
    check(not said, "default: nothing said", said)

seen, snap, said = run("user setting", PYTORCH_CUDA_ALLOC_CONF=USER)
if snap:
    check(seen["PYTORCH_CUDA_ALLOC_CONF"] == USER, "user setting: survives", seen)
    check(mode(snap) == ("native", "user-setting"), "user setting: snapshot mode", snap["modes"])
    check(snap["env"].get("PYTORCH_CUDA_ALLOC_CONF") == USER, "user setting: snapshot env",
          snap["env"])
    check("PYTORCH_CUDA_ALLOC_CONF" not in snap["env_set"], "user setting: not in env_set",
          snap["env_set"])
    check(len(said) == 1 and USER in said[0] and "native" in said[0],
          "user setting: one line says native mode", said)

seen, snap, said = run("--mode tensor", ["--mode", "tensor"], PYTORCH_CUDA_ALLOC_CONF=USER)
if snap:
    check(seen["PYTORCH_CUDA_ALLOC_CONF"] == ASYNC, "--mode tensor: replaces the user setting",
          seen)
    check(mode(snap) == ("tensor", "forced"), "--mode tensor: snapshot mode", snap["modes"])
    check(len(said) == 1 and "replacing" in said[0] and USER in said[0],
          "--mode tensor: one line says what it replaced", said)

seen, snap, said = run("--mode native", ["--mode", "native"])
if snap:
    check(seen["PYTORCH_CUDA_ALLOC_CONF"] is None, "--mode native: nothing set", seen)
    check(mode(snap) == ("native", "forced"), "--mode native: snapshot mode", snap["modes"])
    check(snap["env"].get("VRAMTAP_MODE") == "native", "--mode native: VRAMTAP_MODE recorded",
          snap["env"])
# A program that sets the variable itself before importing torch overrides the mode vramtap
# chose at start: it is told.
seen, snap, said = run("program's own setting", probe_args=["--set-conf", USER])
if snap:
    check(seen["PYTORCH_CUDA_ALLOC_CONF"] == USER, "program's own setting: kept", seen)
    check(len(said) == 1 and "PYTORCH_CUDA_ALLOC_CONF=%s (was %s)" % (USER, ASYNC) in said[0]
          and "before importing torch" in said[0], "program's own setting: one line says so",
          said)
    check(mode(snap) == ("native", "program-setting"), "program's own setting: snapshot mode",
          snap["modes"])
seen, snap, said = run("program sets the same", probe_args=["--set-conf", ASYNC])
if snap:
    check(not said, "program sets the same: nothing said", said)
finish()
