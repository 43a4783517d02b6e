"""Runs tap_device_queries (see device_queries.c) without the library, under it disabled
(VRAMTAP_DISABLE=1) and under it recording, and holds the stand-in's count of questions of which
device to what the library must ask: nothing where it records nothing, one question an
allocation where it records.

usage: device_queries.py PROGRAM"""
import os
import subprocess
import sys
import tempfile

from runs import finish

N = 100
prog = sys.argv[1]
failures = []
outs = [tempfile.mkdtemp(prefix="vt-device-queries-")]


def counts(**env):
    """route -> the questions the stand-in answered in its loop, under env."""
    p = subprocess.run([prog, str(N)], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, LD_LIBRARY_PATH=os.environ["VT_STANDIN_DIR"],
                                VRAMTAP_OUT=outs[0], VRAMTAP_QUIET="1", **env))
    if p.returncode != 0:
        failures.append("%s: exit %d\n%s" % (env, p.returncode, p.stderr[-2000:]))
        return {}
    return {w[0]: int(w[1]) for w in (line.split() for line in p.stdout.splitlines())}


plain = counts()
disabled = counts(LD_PRELOAD=os.environ["VT_PRELOAD"], VRAMTAP_DISABLE="1")
recording = counts(LD_PRELOAD=os.environ["VT_PRELOAD"])
for route in ("malloc", "async", "pool"):
    if route not in plain:
        failures.append("%s: no count without the library" % route)
        continue
    if disabled.get(route) != plain[route]:
        failures.append("%s, disabled: %s questions of which device, %d without the library"
                        % (route, disabled.get(route), plain[route]))
    if recording.get(route) != plain[route] + N:
        failures.append("%s, recording: %s questions of which device, expected %d (%d without "
                        "the library, one for each of %d allocations)"
                        % (route, recording.get(route), plain[route] + N, plain[route], N))
print("without the library %s; disabled %s; recording %s" % (plain, disabled, recording))
finish(failures, outs)
