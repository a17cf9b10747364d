"""Run `timewarp simulate` as a user would, for the end-to-end tests (one place)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_simulate(out, env, scheduler, platform, workload, *extra, timeout=240, quiet=True):
    """`timewarp simulate [-q] --no-plots` from the checkout's root; returns the process.
    (-q: only warnings, errors and the summary of a failed or partial run.)"""
    return subprocess.run(
        [sys.executable, "-m", "timewarp", "simulate", *(["-q"] if quiet else []), "--no-plots",
         "--scheduler", scheduler, "-p", str(platform), "-w", str(workload), "-o", str(out),
         *extra],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
