"""Run by check_gil.py under `vramtap run`: another Python thread counts while this one makes
20,000 forward and backward phase calls through the library's builtins, then 20,000 optimizer
phases and step marks (no device memory: no peak rose, no interim snapshot is due), with a
switch interval so long that the other thread runs only when this one lets go of the GIL.
Prints the other thread's count before the calls, after each kind, and after a sleep (which
lets go)."""

import sys
import threading
import time

import vramtap_torch

(begin, end, mark, _note_oom, enter, leave, _nested, backward_enter, backward_exit, _running,
 _taken) = vramtap_torch._api
if enter is None or backward_enter is None:
    sys.exit("the library's builtins are missing")
sys.setswitchinterval(1000)
ran = [0]
stop = [False]


def other():
    while not stop[0]:
        ran[0] += 1
        time.sleep(0)


threading.Thread(target=other, daemon=True).start()
time.sleep(0.05)
before = ran[0]
for _ in range(20000):
    leave(enter(True, 1))
    leave(enter(True))  # as hooks older than the library call it: no path id
    backward_exit(True, backward_enter(True))
after = ran[0]
for _ in range(20000):
    begin(b"optimizer")
    end(b"optimizer")
    mark()
steps = ran[0]
time.sleep(0.05)
stop[0] = True
print(before, after, steps, ran[0])
