"""``timewarp compare RUN…``: runs side by side — a terminal table and one
self-contained HTML report (``docs/user-guide.md``, "Compare two schedulers").

A RUN is a ``timewarp simulate -o`` folder, ``LABEL=FOLDER``, or ``LABEL=F1,F2,…``: the
replicates of one configuration (e.g. the same run over seeds), summed up as their mean
with the spread (σ, lowest and highest); or a ``timewarp sweep -o`` folder: one column
per point of the sweep, over its seeds (``commands/comparing/sweep_groups.py``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from commands.comparing.figures import Group
from commands.comparing.runs import RunError, read_run
from commands.comparing.sweep_groups import is_sweep_results, read_sweep_results
from commands.outfiles import write_text_atomically

PROG = "timewarp compare"


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds > 0, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected seconds > 0, got {text}")
    return value


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--html", metavar="FILE", help="write the HTML report there (plots embedded; opens offline)"
    )
    parser.add_argument(
        "--slo-p99",
        type=_positive,
        metavar="SECONDS",
        help="a latency target: the share of metrics ticks whose p99 met it with no failed "
        "request is shown per service",
    )
    parser.add_argument("--title", help="the report's title")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="FOLDER, LABEL=FOLDER or LABEL=F1,F2,... (replicates); a sweep's RESULTS "
        "folder gives one column per point, over its seeds",
    )
    add_common(parser)


def parse_groups(specs: list[str], slo_p99: float | None) -> list[Group]:
    groups: list[Group] = []
    labels: set[str] = set()
    for spec in specs:
        label, eq, folders = spec.partition("=")
        if not eq:
            label, folders = Path(spec).name or spec, spec
        if label in labels:
            raise RunError(f"{spec}: the label {label!r} is given twice (use LABEL=FOLDER)")
        labels.add(label)
        paths = [Path(f) for f in folders.split(",") if f]
        if len(paths) == 1 and is_sweep_results(paths[0]):
            for group in read_sweep_results(paths[0], slo_p99):
                if eq:  # LABEL=RESULTS: the label tells two sweeps apart
                    group = Group(f"{label}: {group.label}", group.runs)
                if group.label in labels:
                    raise RunError(f"{spec}: the column {group.label!r} is there twice "
                                   "(label the sweeps: LABEL=RESULTS)")  # fmt: skip
                labels.add(group.label)
                groups.append(group)
            continue
        runs = [
            read_run(p, label if len(paths) == 1 else f"{label}/{p.name}", slo_p99) for p in paths
        ]
        groups.append(Group(label, runs))
    return groups


def report(groups: list[Group], title: str, html_path: str | None, prog: str) -> int:
    from commands.comparing.table import print_table

    print_table(groups, sys.stdout, title)
    if html_path:
        from commands.comparing.html import render

        try:
            write_text_atomically(Path(html_path), render(groups, title))
        except OSError as exc:
            print(
                f"{prog}: --html {html_path}: cannot write ({exc.strerror or exc})", file=sys.stderr
            )
            return 2
        print(f"{prog}: report in {html_path}", file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        groups = parse_groups(args.runs, args.slo_p99)
    except RunError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    title = args.title or "timewarp compare: " + " vs ".join(g.label for g in groups)
    return report(groups, title, args.html, PROG)
