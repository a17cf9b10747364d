"""Says it is ready through a FIFO (argv[1]), then idles in virtual time forever.

Ready means the whole simulation runs: its first virtual sleep has returned, and only
the simulator's messages move virtual time under ``timewarp simulate``."""

import sys
import time

time.sleep(1)
with open(sys.argv[1], "w") as fifo:
    fifo.write("ready\n")
while True:
    time.sleep(60)
