"""tiny_scheduler.py that, after --after seconds (simulated under timewarp), either dies
(exit code 5, --how crash) or blocks in real I/O the broker cannot see (--how hang, for
the stall guard): jobs that ended before then must still be in the partial outputs."""

import argparse
import os
import socket
import sys
import threading
import time

parser = argparse.ArgumentParser()
parser.add_argument("--after", type=float, required=True)
parser.add_argument("--how", choices=("crash", "hang"), default="crash")
args, rest = parser.parse_known_args()


def trouble() -> None:
    time.sleep(args.after)
    if args.how == "crash":
        print(f"crashing after {args.after} s", flush=True)
        os._exit(5)
    print(f"hanging after {args.after} s", flush=True)
    quiet, _ = socket.socketpair()
    quiet.recv(1)  # never answered: a block outside virtual time


threading.Thread(target=trouble, daemon=True).start()
sys.argv = [sys.argv[0], *rest]
import tiny_scheduler  # noqa: E402,F401  (its module body is the scheduling loop)
