"""Send the first stop signal at many moments of real commands and check each ending.

    python scripts/signal_stress.py --count 210 --seed 1 --jobs 2 [--commands simulate,run]

Each moment (``tests/signal_moments.py``) starts a command (simulate with the embedded
or real Batsim, broker, sim, run --standalone, patch, sweep), waits for its phase
(start-up, run, clean-up) by output markers, signals it after a seeded delay and checks
the promise of ``commands/stopping.py``: exit 128 + the signal with "interrupted" said
(or 0 with a good manifest, when the run had ended first), manifest and CSVs whole, no
process of the run alive, no temporary folder left. Prints one line per moment and a
tally; exits 1 if any moment broke the promise.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from signal_moments import COMMANDS, check_moment, moments  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=210)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--commands", default=",".join(COMMANDS))
    parser.add_argument("--keep", action="store_true", help="keep the folders of bad moments")
    args = parser.parse_args()
    commands = tuple(args.commands.split(","))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIMEWARP_")}
    if "TIMEWARP_BATSIM" in os.environ:
        env["TIMEWARP_BATSIM"] = os.environ["TIMEWARP_BATSIM"]
    env["PYTHONPATH"] = str(ROOT)
    env["PYTHONUNBUFFERED"] = "1"
    print(f"load before: {Path('/proc/loadavg').read_text().strip()}", flush=True)
    base = Path(tempfile.mkdtemp(prefix="signal-stress-"))
    todo = moments(args.seed, args.count, commands)
    bad = []
    tally: dict[str, int] = {}

    def one(index_moment):
        index, moment = index_moment
        return check_moment(moment, base / f"m{index:04d}", env)

    with ThreadPoolExecutor(args.jobs) as pool:
        for outcome in pool.map(one, enumerate(todo)):
            how = "interrupted" if outcome.interrupted else f"exit {outcome.returncode}"
            if outcome.killed_exiting:
                how = "killed as it exited, its work done"
            verdict = "OK " if not outcome.problems else "BAD"
            print(f"{verdict} {outcome.moment}  {how}  {'; '.join(outcome.problems)}", flush=True)
            key = f"{outcome.moment.command} {how if not outcome.problems else 'BAD'}"
            tally[key] = tally.get(key, 0) + 1
            if outcome.problems and not outcome.problems[0].startswith("skipped"):
                bad.append(outcome)
                tail = "\n    ".join(outcome.stderr.strip().splitlines()[-12:])
                print(f"    stderr: {tail}", flush=True)
    print(f"load after: {Path('/proc/loadavg').read_text().strip()}")
    for key in sorted(tally):
        print(f"  {key}: {tally[key]}")
    print(f"{len(todo)} moments, {len(bad)} broke the promise (folders in {base})")
    if not args.keep and not bad:
        import shutil

        shutil.rmtree(base, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
