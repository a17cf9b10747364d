"""``timewarp report RUN``: one run's figures, plots and manifest — ``timewarp compare``'s
table and HTML report for a single run."""

from __future__ import annotations

import argparse
import sys

from commands.compare import add_common, parse_groups, report
from commands.comparing.runs import RunError

PROG = "timewarp report"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", metavar="RUN", help="a timewarp simulate -o folder")
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    try:
        groups = parse_groups([args.run], args.slo_p99)
    except RunError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    return report(groups, args.title or f"timewarp report: {groups[0].label}", args.html, PROG)
