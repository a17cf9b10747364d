"""``timewarp resume OUT``: let a paused ``timewarp simulate`` run go on
(``commands/pausing.py``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("output", metavar="OUT", help="the paused run's output folder (its -o)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds to wait for the run to go on (default 30)",
    )


def run(args: argparse.Namespace) -> int:
    from commands.pausing import resume

    try:
        print(f"timewarp resume: {resume(Path(args.output), args.timeout)}", file=sys.stderr)
    except ValueError as exc:
        print(f"timewarp resume: {exc}", file=sys.stderr)
        return 2
    return 0
