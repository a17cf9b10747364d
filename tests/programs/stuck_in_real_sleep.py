"""One thread ticks in virtual time, another blocks in a real (unpatched) sleep."""

import os
import sys
import threading
import time as real_time

from timewarp import vtime

print(os.getpid(), flush=True)
vtime.sleep(1)  # start-up is over once the process has waited (the stall guard's grace)


def ticker():
    for _ in range(3):
        vtime.sleep(60)
    print("ticks done at", vtime.monotonic() - 1000, flush=True)


t = threading.Thread(target=ticker)
t.start()
real_time.sleep(float(sys.argv[1]))
t.join()
