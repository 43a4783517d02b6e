"""The snapshot's top-level keys have one list, src/common/snapshot_keys.h: every key of a file
the library writes (an exit snapshot and its out-of-memory post-mortems) or `vramtap import`
writes (from a Kineto trace and from a memory snapshot pickle) is in it, and every key in it is
described in docs/snapshot-format.md."""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

src, build, cli = os.environ["VT_SRC"], os.environ["VT_BUILD"], os.environ["VT_CLI"]
failures = []

with open(os.path.join(src, "src/common/snapshot_keys.h")) as f:
    schema = dict(re.findall(r'#define (VT_K_\w+) "([a-z_]+)"', f.read()))
keys = set(schema.values())
if len(keys) != len(schema) or len(keys) < 30:
    failures.append("the schema header lists %d names for %d keys" % (len(schema), len(keys)))

with open(os.path.join(src, "docs/snapshot-format.md")) as f:
    doc = f.read()
for k in sorted(keys):
    if not re.search(r"`%s`" % k, doc):
        failures.append("docs/snapshot-format.md does not describe `%s`" % k)

files = {}
with tempfile.TemporaryDirectory() as out:
    env = dict(os.environ, LD_PRELOAD=os.environ["VT_LIB"], VRAMTAP_OUT=out, VRAMTAP_QUIET="1",
               LD_LIBRARY_PATH=os.environ["VT_STANDIN_DIR"], STANDIN_CAPACITY="1073741824")
    subprocess.run([os.path.join(build, "tests/tap/tap_routes")], env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for path in sorted(glob.glob(os.path.join(out, "vramtap.*.json"))):
        files[os.path.basename(path)] = json.loads(subprocess.check_output([cli, "export", "--json", path]))
    fixtures = os.path.join(src, "tests/import/fixtures")
    for name in ("synthetic.pt.trace.json", "synthetic.pickle"):
        dest = os.path.join(out, name + ".vramtap.json")
        p = subprocess.run([cli, "import", os.path.join(fixtures, name), "-o", dest],
                           capture_output=True, text=True)
        if p.returncode:
            failures.append("vramtap import %s: exit %d %s" % (name, p.returncode, p.stderr))
            continue
        with open(dest) as f:
            files["import of " + name] = json.load(f)

kinds = sorted(set(d.get("kind") for d in files.values()))
if kinds != ["exit", "import", "oom"]:
    failures.append("expected exit, oom and import files, got %s" % kinds)
for name, d in files.items():
    extra = sorted(set(d) - keys)
    if extra:
        failures.append("%s has keys the schema does not list: %s" % (name, extra))
written = set().union(*(set(d) for d in files.values())) if files else set()
print("%d keys in the schema, %d written across %d files" % (len(keys), len(written), len(files)))
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
