"""The phase calls that cannot write a snapshot keep the GIL: an outermost module call's enter
and exit, a backward's begin and end, and an optimizer phase's end and a step mark while no peak
rose since the last interim snapshot. Letting go of it at every phase boundary hands it to any
Python thread waiting for it (a data loader's), which the training thread then waits out."""

import os

from vtpy import HERE, PYTHON, check, finish, require_python_under_sanitizer, show, vramtap_run

require_python_under_sanitizer()
p, _ = vramtap_run([PYTHON, os.path.join(HERE, "gil_workload.py")])
if check(p.returncode == 0, "the workload ran", show(p)):
    before, after, steps, later = (int(n) for n in p.stdout.split())
    check(after == before, "no other thread ran during 20,000 forward and backward calls",
          "it counted %d times" % (after - before))
    check(steps == after, "nor during 20,000 optimizer phases and step marks, no peak risen",
          "it counted %d times" % (steps - after))
    check(later > steps, "the other thread ran once the GIL was let go", (steps, later))
finish()
