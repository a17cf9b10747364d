"""The Dask worker plugin ``timewarp sweep`` registers: a closing worker stops its runs.

Without it, closing a cluster (Ctrl-C on the sweep) would kill workers with their runs'
process trees still going. With it, each run gets SIGINT (simulate stops its scheduler and
simulator), its directory stays unfinished (no result.json), and a resumed sweep redoes it.
"""

from __future__ import annotations

from distributed import WorkerPlugin

from commands.sweeping.runner import accept_runs, stop_all_runs


class StopRunsOnClose(WorkerPlugin):
    name = "timewarp-sweep-stop-runs"

    def setup(self, worker) -> None:  # type: ignore[no-untyped-def]
        accept_runs()

    def teardown(self, worker) -> None:  # type: ignore[no-untyped-def]
        stop_all_runs()
