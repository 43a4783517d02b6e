"""Steps timed in blocks with vramtap's hooks (or a part of them) on and off alternately, in one
process: bench/train_step.py and bench/module_step.py --paired.

Turning hooks sets attributes of classes, which makes Python look up and specialise their callers
again, so the first steps of a block are left out. The figure compares the lower quartiles of the
two sets of steps: a step's CPU time is spread by what other tenants do to the caches, and (tried
with the hooks on in both) the quartiles of two sets agree within 5 us where the medians of the
blocks' differences stray by 15.
"""

import time


def timed_steps(step, n):
    """The CPU time of each of n steps, in seconds."""
    times = []
    for _ in range(n):
        t = time.process_time()
        step()
        times.append(time.process_time() - t)
    return times


def paired(step, use, pairs, block=10, settle=2):
    """use(True) turns the hooks on, use(False) off; returns the lower quartile of the steps
    with them and that of the steps without, in seconds. Leaves them on."""
    steps = {True: [], False: []}
    for i in range(pairs):
        for on in ((True, False) if i % 2 else (False, True)):
            use(on)
            steps[on] += timed_steps(step, block)[settle:]
    use(True)
    return tuple(sorted(steps[on])[len(steps[on]) // 4] for on in (True, False))
