"""tiny_scheduler.py that dies (exit code 5) after --crash-after seconds (simulated under
timewarp): jobs that ended before then must still be in the partial outputs."""

import argparse
import os
import sys
import threading
import time

parser = argparse.ArgumentParser()
parser.add_argument("--crash-after", type=float, required=True)
args, rest = parser.parse_known_args()


def crash() -> None:
    time.sleep(args.crash_after)
    print(f"crashing after {args.crash_after} s", flush=True)
    os._exit(5)


threading.Thread(target=crash, daemon=True).start()
sys.argv = [sys.argv[0], *rest]
import tiny_scheduler  # noqa: E402,F401  (its module body is the scheduling loop)
