"""The Python files (the bootstrap, the tests, the scripts' helpers) as pyflakes reads them: no
unused import or name, no undefined one. The files git tracks; skipped, saying why, where
pyflakes is not installed (Debian: python3-pyflakes) or there is no git."""
import importlib.util
import os
import subprocess
import sys

SRC = os.environ["VT_SRC"]
if importlib.util.find_spec("pyflakes") is None:
    print("SKIP: no pyflakes here (Debian package python3-pyflakes)")
    sys.exit(77)
p = subprocess.run(["git", "-C", SRC, "ls-files", "*.py"], capture_output=True, text=True)
if p.returncode != 0:
    print("SKIP: not a git checkout: no list of the files")
    sys.exit(77)
files = [os.path.join(SRC, f) for f in p.stdout.split()]
p = subprocess.run([sys.executable, "-m", "pyflakes"] + files, capture_output=True, text=True)
for line in (p.stdout + p.stderr).splitlines():
    print("FAIL:", os.path.relpath(line, SRC) if line.startswith(SRC) else line)
print("%d files, pyflakes exit %d" % (len(files), p.returncode))
sys.exit(1 if p.returncode else 0)
