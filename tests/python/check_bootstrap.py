"""The Python bootstrap: a user's own sitecustomize still runs (also when it imports torch), the
hooks stay silent and out of the way without vramtap or with VRAMTAP_DISABLE, and the small
Python API (vramtap_torch.phase, step) marks what it says."""

import json
import os
import shutil
import subprocess

from vtpy import (BOOTSTRAP, HERE, PYTHON, check, clean_env, finish,
                  require_python_under_sanitizer, show, tmpdir, vramtap_run)

require_python_under_sanitizer()
PROBE = [PYTHON, os.path.join(HERE, "probe_env.py")]


def user_site(body):
    folder = tmpdir("vt-py-site-")
    with open(os.path.join(folder, "sitecustomize.py"), "w") as f:
        f.write("import os\nos.environ['VT_TEST_USER_SITECUSTOMIZE'] = 'ran'\n" + body)
    return folder


def seen_by(p):
    return json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else {}


for case, body in (("user sitecustomize", ""), ("user sitecustomize importing torch",
                                                  "import torch\n")):
    folder = user_site(body)
    p, snaps = vramtap_run(PROBE, env=clean_env(PYTHONPATH=folder))
    seen = seen_by(p)
    check(p.returncode == 0 and len(snaps) == 1, case + ": ran", show(p))
    check(seen.get("user_sitecustomize") == "ran", case + ": it ran", seen)
    check(seen.get("sitecustomize") == os.path.join(folder, "sitecustomize.py"),
          case + ": it is the sitecustomize module, as without vramtap", seen)
    check(seen.get("hooked") is True, case + ": hooks installed", seen)

# A second copy of the bootstrap on PYTHONPATH (another install's, or an older build's), before
# the user's folder: the user's sitecustomize still runs, once, and the hooks are installed; the
# copies used to run each other's sitecustomize until Python's recursion limit.
copy = tmpdir("vt-py-copy-")
for name in os.listdir(BOOTSTRAP):
    if name.endswith(".py"):
        shutil.copy(os.path.join(BOOTSTRAP, name), copy)
folder = user_site("")
p, snaps = vramtap_run(PROBE, env=clean_env(PYTHONPATH=copy + ":" + folder))
seen = seen_by(p)
check(p.returncode == 0 and "sitecustomize" not in p.stderr and len(snaps) == 1,
      "a second bootstrap on the path: runs, nothing said of sitecustomize", show(p))
check(seen.get("user_sitecustomize") == "ran", "a second bootstrap: user sitecustomize ran", seen)
check(seen.get("sitecustomize") == os.path.join(folder, "sitecustomize.py"),
      "a second bootstrap: the user's is the sitecustomize module", seen)
check(seen.get("hooked") is True, "a second bootstrap: hooks installed", seen)

# No vramtap in the process, the bootstrap on PYTHONPATH all the same (a child that dropped
# LD_PRELOAD): the user's sitecustomize runs, nothing else happens, nothing is said.
folder = user_site("")
p = subprocess.run(PROBE + ["--no-alloc"], env=clean_env(PYTHONPATH=BOOTSTRAP + ":" + folder,
                                                         LD_PRELOAD=None),
                   capture_output=True, text=True, timeout=300)
seen = seen_by(p)
check(p.returncode == 0 and p.stderr == "", "no vramtap: runs silently", show(p))
check(seen.get("user_sitecustomize") == "ran", "no vramtap: user sitecustomize ran", seen)
check(seen.get("hooked") is False and seen.get("backward_hooked") is False
      and seen.get("vramtap_torch_imported") is False, "no vramtap: torch untouched", seen)

p, snaps = vramtap_run(PROBE, env=clean_env(VRAMTAP_DISABLE="1"))
seen = seen_by(p)
check(p.returncode == 0 and "vramtap" not in p.stderr, "VRAMTAP_DISABLE: runs silently", show(p))
check(seen.get("hooked") is False, "VRAMTAP_DISABLE: torch untouched", seen)
check(not snaps, "VRAMTAP_DISABLE: no snapshot", len(snaps))

# The Python API, without torch: 1 MiB in setup, 2 MiB in a forward phase, a step, 3 MiB in an
# optimizer phase (a decorator; ending it completes a step), 4 MiB inside an unknown phase.
p, snaps = vramtap_run(PROBE + ["--no-torch", "--api"])
seen = seen_by(p)
if check(p.returncode == 0 and len(snaps) == 1 and seen.get("loaded") is True, "API: ran",
         show(p)):
    births = {a["size"] >> 20: (a["birth"]["phase"], a["birth"]["step"])
              for a in snaps[0]["allocations"]}
    want = {1: ("setup", 0), 2: ("forward", 0), 3: ("optimizer", 1), 4: ("other", 2)}
    check(births == want, "API: phases and steps", "snapshot %s, expected %s" % (births, want))
    check(snaps[0]["steps"] == 2, "API: step count", snaps[0]["steps"])
    said = [l for l in p.stderr.splitlines() if l.startswith("vramtap:")]
    check(len(said) == 1 and "no such phase" in said[0], "API: one line about the unknown phase",
          said)

p = subprocess.run(PROBE + ["--no-torch", "--api"],
                   env=clean_env(PYTHONPATH=BOOTSTRAP, LD_PRELOAD=None), capture_output=True,
                   text=True, timeout=300)
seen = seen_by(p)
check(p.returncode == 0 and p.stderr == "" and seen.get("loaded") is False,
      "API without vramtap: does nothing, says nothing", show(p))
finish()
