#!/usr/bin/python3
"""`meson install` into a staging folder brings what a user of the tool expects: the command,
the library, the C header, a pkg-config file, the man page vramtap(1) and bash completion; and
`vramtap lib` prints the library's absolute path, so that the README's preload line
LD_PRELOAD=$(vramtap lib) COMMAND profiles COMMAND."""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

BUILD, CLI, LIB = os.environ["VT_BUILD"], os.environ["VT_CLI"], os.environ["VT_LIB"]
failures = []


def expect(ok, what):
    if not ok:
        failures.append(what)
    return ok


stage = tempfile.mkdtemp(prefix="vt-install-")
p = subprocess.run(["meson", "install", "-C", BUILD, "--no-rebuild", "--quiet", "--destdir", stage],
                   capture_output=True, text=True, timeout=300)
expect(p.returncode == 0, "meson install: exit %d\n%s%s" % (p.returncode, p.stdout, p.stderr))


def one(pattern):
    found = glob.glob(os.path.join(stage, pattern), recursive=True)
    expect(len(found) == 1, "installed %s: %s" % (pattern, found))
    return found[0] if found else None


for pattern in ("**/bin/vramtap", "**/libvramtap.so", "**/include/vramtap.h"):
    one(pattern)
pc = one("**/pkgconfig/vramtap.pc")
if pc:
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.dirname(pc), PKG_CONFIG_SYSROOT_DIR=stage)
    flags = subprocess.run(["pkg-config", "--cflags", "vramtap"], env=env, capture_output=True,
                           text=True).stdout.split()
    expect(any(os.path.exists(os.path.join(f[2:], "vramtap.h")) for f in flags if f.startswith("-I")),
           "pkg-config --cflags vramtap names the header's folder: %s" % flags)
    preload = subprocess.run(["pkg-config", "--variable=preload", "vramtap"], env=env,
                             capture_output=True, text=True).stdout.strip()
    expect(preload.endswith("/libvramtap.so"), "pkg-config preload variable: %r" % preload)
man = one("**/man1/vramtap.1")
if man:
    with open(man) as f:
        page = f.read()
    expect(page.startswith(".TH VRAMTAP 1") and "@VERSION@" not in page and "vramtap lib" in page,
           "the man page: " + page[:200])
comp = one("**/bash-completion/completions/vramtap")
if comp:
    script = ('. "%s"; COMP_WORDS=(vramtap re); COMP_CWORD=1; _vramtap; echo "${COMPREPLY[*]}"; '
              'COMP_WORDS=(vramtap run --mode ""); COMP_CWORD=3; _vramtap; echo "${COMPREPLY[*]}"'
              % comp)
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True).stdout.splitlines()
    expect(out == ["report", "tensor native"], "bash completion: %r" % out)

# The preload line of the README, as written.
p = subprocess.run([CLI, "lib"], capture_output=True, text=True)
lib = p.stdout.strip()
expect(p.returncode == 0 and os.path.isabs(lib) and os.path.samefile(lib, LIB),
       "vramtap lib: %r, expected the absolute path of %s" % (lib, LIB))
out = tempfile.mkdtemp(prefix="vt-install-run-")
sim = os.path.join(BUILD, "tests", "e2e", "train_sim")
env = dict(os.environ, VRAMTAP_OUT=out, LD_LIBRARY_PATH=os.environ["VT_STANDIN_DIR"],
           LD_PRELOAD=":".join(x for x in os.environ["VT_PRELOAD"].split(":") if x != LIB) + ":" + lib)
p = subprocess.run(["sh", "-c", 'LD_PRELOAD="$LD_PRELOAD" "$0" --steps 1', sim], env=env,
                   capture_output=True, text=True, timeout=300)
expect(p.returncode == 0 and len(glob.glob(os.path.join(out, "vramtap.train_sim.*.json"))) == 1,
       "LD_PRELOAD=$(vramtap lib) train_sim writes one snapshot: %s" % p.stderr)

for f in failures:
    print("FAIL:", f)
print("%d failed" % len(failures) if failures else "all checks passed")
if not failures:  # kept only to look into a failure
    for folder in (stage, out):
        shutil.rmtree(folder, ignore_errors=True)
sys.exit(1 if failures else 0)
