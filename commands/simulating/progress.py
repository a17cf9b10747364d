"""The progress bar of a run (rich), off under ``-q`` or without a terminal."""

from __future__ import annotations

import sys
import time as _wall


class ProgressView:
    """A rich progress bar: simulated time, jobs done/total, wall time, speed-up. Its
    last frame shows the figures of the summary (:meth:`finish`)."""

    def __init__(self, total_jobs: int, disabled: bool, started: float, prog: str) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.console = Console(stderr=True)
        self.disabled = disabled or not self.console.is_terminal
        self.progress = Progress(
            TextColumn("[bold]simulated {task.fields[now]}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("jobs"),
            TextColumn("{task.fields[wall]} wall"),
            TextColumn("{task.fields[speedup]}"),
            console=self.console,
            disable=self.disabled,
        )
        self.task = self.progress.add_task(
            "sim", total=total_jobs or None, now="0 s", wall="0.0 s", speedup=""
        )
        self.total_jobs = total_jobs
        self.started = started  # the simulation's start, as for the summary's wall time
        self.jobs_dynamic = 0
        self.prog = prog

    def __enter__(self):  # type: ignore[no-untyped-def]
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):  # type: ignore[no-untyped-def]
        self.progress.__exit__(*exc)

    def update(self, p) -> None:  # type: ignore[no-untyped-def]
        if self.disabled:  # -q or no terminal: runs after every Batsim message, shows nothing
            return
        self.jobs_dynamic = p.jobs_dynamic
        self._show(p.now_s, _wall.perf_counter() - self.started, completed=p.jobs_done)

    def finish(self, now_s: float, wall_s: float) -> None:
        """The last frame: the end of the simulation and the wall time the summary uses."""
        self._show(now_s, wall_s)

    def _show(self, now_s: float, wall_s: float, completed: int | None = None) -> None:
        from commands.report import format_speedup, speedup

        total = (self.total_jobs + self.jobs_dynamic) or None  # controller-made pods too
        fields = {"now": f"{now_s:,.0f} s", "wall": f"{wall_s:.1f} s"}
        fields["speedup"] = format_speedup(speedup(now_s, wall_s))
        if completed is not None:
            fields["completed"] = completed
        self.progress.update(self.task, total=total, **fields)  # type: ignore[arg-type]

    def warn(self, text: str) -> None:
        """A warning above the bar (or on stderr when there is no bar)."""
        if self.disabled:
            print(f"{self.prog}: WARNING: {text}", file=sys.stderr, flush=True)
        else:
            from rich.markup import escape

            self.progress.console.print(f"[yellow]{self.prog}: WARNING:[/] {escape(text)}")
