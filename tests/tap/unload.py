"""A library unloaded before the snapshot is written keeps its name, its symbols and its
signature: the site of an allocation made through it is the same whether it was dlclosed or
not, and names the module by its absolute path and build id.

usage: unload.py PROGRAM LIBRARY
"""
import glob
import json
import os
import shutil
import re
import subprocess
import sys
import tempfile

prog, lib = sys.argv[1:]
failures = []


def site_of_run(mode):
    out = tempfile.mkdtemp(prefix="vt-unload-")
    env = dict(os.environ, LD_PRELOAD=os.environ["VT_PRELOAD"], VRAMTAP_OUT=out,
               LD_LIBRARY_PATH=os.environ["VT_STANDIN_DIR"])
    p = subprocess.run([prog, lib, mode], env=env, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        failures.append("%s: exit %d: %s" % (mode, p.returncode, p.stderr))
        return None, None
    snaps = glob.glob(os.path.join(out, "vramtap.*.json"))
    doc = json.loads(subprocess.check_output([os.environ["VT_CLI"], "export", "--json", snaps[0]]))
    allocs = [a for a in doc["allocations"] if a["size"] == 12345]
    if len(snaps) != 1 or len(allocs) != 1 or allocs[0]["site"] is None:
        failures.append("%s: %d snapshots, allocations %s" % (mode, len(snaps), allocs))
        return None, None
    shutil.rmtree(out, ignore_errors=True)  # kept only to look into a failure
    return doc, doc["sites"][allocs[0]["site"]]


kept = None
for mode in ("keep", "unload"):
    doc, site = site_of_run(mode)
    if site is None:
        continue
    top = site["frames"][0]
    want = {"type": "native", "module": os.path.basename(lib), "symbol": "unload_lib_alloc"}
    if {k: top.get(k) for k in want} != want:
        failures.append("%s: innermost frame %s, expected %s" % (mode, top, want))
        continue
    module = doc["modules"][top["module_id"]]
    if module["id"] != top["module_id"] or module["path"] != os.path.realpath(lib):
        failures.append("%s: module %s, expected the path %s" % (mode, module, lib))
    if not re.fullmatch(r"[0-9a-f]{40}", module["build_id"] or ""):
        failures.append("%s: build id %r" % (mode, module["build_id"]))
    if int(module["base"], 16) + int(top["offset"], 16) == 0:
        failures.append("%s: base and offset are zero" % mode)
    print(mode, top, module, site["signature"])
    if mode == "keep":
        kept = site
    elif kept and site["signature"] != kept["signature"]:
        failures.append("signature %s after dlclose, %s while loaded" % (site["signature"],
                                                                        kept["signature"]))
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
