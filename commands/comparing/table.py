"""The terminal table of a comparison: one column per run (or group of replicates: mean
± σ [lowest–highest]), the best value of each figure marked with ★ — (★) when the
replicates' ranges overlap — the run-cost figures apart from the results."""

from __future__ import annotations

from typing import TextIO

from commands.comparing.figures import (
    BATCH,
    COST,
    SERVICE,
    Figure,
    Group,
    best,
    cell,
    has_batch,
    sameness,
    services_of,
)


def rows(groups: list[Group]) -> list[tuple[str, str, list[str]]]:
    """(section, figure label, one cell per group) for every figure shown."""
    out: list[tuple[str, str, list[str]]] = []

    def add(section: str, figures: tuple[Figure, ...], service: str | None = None) -> None:
        for figure in figures:
            cells = [cell(g, figure, service) for g in groups]
            if all(c == "–" for c in cells):
                continue
            for i, mark in best(groups, figure, service).items():
                cells[i] = mark + cells[i]
            out.append((section, figure.label, cells))

    if has_batch(groups):
        add("batch", BATCH)
    for name in services_of(groups):
        add(f"service {name}", SERVICE, name)
    add("run cost (not a result)", COST)
    # how each run ended: a partial run's figures cover only what ended before its stop
    ended = [", ".join(sorted({_outputs(r) for r in g.runs})) for g in groups]
    if any(e != "complete" for e in ended):
        out.append(("run cost (not a result)", "outputs", ended))
    return out


def _outputs(run) -> str:  # type: ignore[no-untyped-def]
    outputs = run.manifest.get("outputs", "unknown")
    return "PARTIAL" if outputs == "partial" else str(outputs)


def print_table(groups: list[Group], stream: TextIO, title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    table.add_column("figure")
    for group in groups:
        runs = len(group.runs)
        table.add_column(group.label + (f" ({runs} runs)" if runs > 1 else ""), justify="right")
    section = None
    for sec, label, cells in rows(groups):
        if sec != section:
            table.add_row(f"[bold]{sec}[/bold]", *[""] * len(groups))
            section = sec
        table.add_row(f"  {label}", *cells)
    console = Console(file=stream, width=max(100, 34 + 26 * len(groups)))
    console.print(table)
    if sum(len(g.runs) for g in groups) > 1:
        for what, verdict in sameness(groups).items():
            print(f"{what}: {verdict}", file=stream)
    if len(groups) > 1:
        print(LEGEND if any(len(g.runs) > 1 for g in groups) else "★ best on the figure",
              file=stream)  # fmt: skip


LEGEND = (
    "★ best on the figure (a group of runs: its mean ± σ [lowest–highest] over the runs); "
    "(★) best mean, but within the spread: its range overlaps another column's"
)
