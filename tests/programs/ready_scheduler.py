"""Says it is ready through a FIFO (argv[1]), then idles in virtual time forever."""

import sys
import time

with open(sys.argv[1], "w") as fifo:
    fifo.write("ready\n")
while True:
    time.sleep(60)
