"""tiny_scheduler.py that first starts a helper daemon the classic way — fork, setsid,
fork — as schedulers that spawn a metrics exporter or a cache warmer do: the helper ends
up in a session of its own, a child of init, out of the scheduler's process group. Its pid
goes to the file given by --pidfile."""

import argparse
import os
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--pidfile", required=True)
args, rest = parser.parse_known_args()

if os.fork() == 0:  # the classic double fork
    os.setsid()
    if os.fork() != 0:
        os._exit(0)
    with open(args.pidfile + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(args.pidfile + ".tmp", args.pidfile)
    os.execv("/bin/sleep", ["sleep", "100000"])  # a helper that never ends by itself
os.wait()  # the first child exits at once; its child lives on, adopted by init

sys.argv = [sys.argv[0], *rest]
import tiny_scheduler  # noqa: E402,F401  (its module body is the scheduling loop)
