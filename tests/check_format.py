"""The C sources as clang-format writes them, by the checked-in .clang-format: the files git
tracks (every .c and .h below src, include, tests, bench and scripts where there is no git).
Skipped, saying why, where clang-format is not installed (Debian: clang-format-14)."""
import os
import shutil
import subprocess
import sys

SRC = os.environ["VT_SRC"]
tool = shutil.which("clang-format") or shutil.which("clang-format-14")
if not tool:
    print("SKIP: no clang-format here (Debian package clang-format-14)")
    sys.exit(77)
p = subprocess.run(["git", "-C", SRC, "ls-files", "*.c", "*.h"], capture_output=True, text=True)
if p.returncode == 0:
    files = [os.path.join(SRC, f) for f in p.stdout.split()]
else:
    files = [os.path.join(d, f) for top in ("src", "include", "tests", "bench", "scripts")
             for d, _, names in os.walk(os.path.join(SRC, top)) for f in names
             if f.endswith((".c", ".h"))]
p = subprocess.run([tool, "--dry-run", "-Werror"] + files, capture_output=True, text=True)
bad = sorted({line.split(":")[0] for line in p.stderr.splitlines() if ": error:" in line})
for f in bad:
    print("FAIL: not as clang-format writes it: %s" % os.path.relpath(f, SRC))
print("%d files, %d not formatted" % (len(files), len(bad)))
sys.exit(1 if bad or (p.returncode and not bad) else 0)
