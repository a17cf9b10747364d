"""``timewarp sweep``: parameter studies and replicates, each run a ``timewarp simulate`` on Dask.

    timewarp sweep experiments/smoke.yaml -o results/smoke --workers 2
    timewarp sweep study.yaml -o /shared/results --scheduler-address tcp://10.0.0.5:8786

The sweep file (see ``commands.sweeping.spec``) expands into points × replicates. Each run
is submitted to Dask (a ``LocalCluster`` of ``--workers`` processes, or the cluster at
``--scheduler-address``); a run lands in ``RESULTS/runs/<hash of its inputs>/`` and is
never recomputed once its ``result.json`` exists, so an interrupted sweep resumes where it
stopped. A failed run is recorded with its error; the others go on. At the end (and after
each interruption) ``runs.csv``, ``summary.csv`` and ``plots/`` are rewritten from every
finished run, whatever signal comes meanwhile (a second Ctrl-C is noted, not obeyed: see
``commands.stopping``). Exit 0 if every run succeeded, 1 if some failed, 2 for a bad sweep
file or arguments, 128 + the signal when stopped (130 on Ctrl-C, 143 on SIGTERM).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import shutil
import sys
from pathlib import Path
from typing import Any

from commands.outfiles import OutputDirError, check_output_dir, write_text_atomically
from commands.stopping import Interrupted, StopSignals
from commands.sweeping.plan import POINT_FILE, RESULT_FILE, Run, finished_result, plan_runs
from commands.sweeping.spec import SpecError, Sweep, load_sweep
from timewarp.wire.stophold import critical


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", metavar="SPEC", help="sweep file (.yaml, .yml or .toml)")
    parser.add_argument(
        "-o", "--output", required=True, metavar="RESULTS", help="results directory"
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--workers",
        type=_positive_int,
        default=None,
        metavar="N",
        help="LocalCluster worker processes, one run each at a time (default: CPU count)",
    )
    where.add_argument(
        "--scheduler-address",
        metavar="ADDR",
        help="use an existing Dask cluster (tcp://host:8786); results must be on a shared filesystem",
    )
    parser.add_argument("--rerun", action="store_true", help="recompute every run, finished or not")
    parser.add_argument(
        "--rerun-failed", action="store_true", help="recompute the runs that failed before"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="list the runs and whether they would run; run none"
    )
    parser.add_argument("--no-plots", action="store_true", help="write the tables, skip plots/")
    parser.add_argument(
        "--report",
        action="store_true",
        help="also write RESULTS/report.html: timewarp compare's report of the grid, one "
        "column per point (its replicates summed up as median [lowest–highest])",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print only warnings and errors: no progress bar, no plan or result line when "
        "every run succeeded (failed runs are still listed)",
    )


def _fail(message: str, code: int = 2) -> int:
    print(f"timewarp sweep: {message}", file=sys.stderr)
    return code


def run(args: argparse.Namespace) -> int:
    try:
        sweep = load_sweep(args.spec)
    except SpecError as exc:
        return _fail(str(exc))
    results = Path(args.output)
    try:
        check_output_dir(results)
    except OutputDirError as exc:
        return _fail(str(exc))
    try:
        runs = plan_runs(sweep, results)
    except SpecError as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"-o {results}: cannot write there ({exc.strerror or exc})")

    pending = [r for r in runs if _needs_run(r, args)]
    if args.dry_run:
        to_run = {r.run_id for r in pending}
        for r in runs:
            state = "run" if r.run_id in to_run else "done"
            print(f"{r.run_id}  {state:4}  {json.dumps(r.point.factors)} replicate={r.replicate}")
        print(f"{len(runs)} runs, {len(pending)} to run", file=sys.stderr)
        return 0
    _write_plan(sweep, runs, results)
    if not args.quiet:
        print(
            f"timewarp sweep: {len(sweep.points)} points x {sweep.replicates} replicates = "
            f"{len(runs)} runs; {len(runs) - len(pending)} already finished, "
            f"{len(pending)} to run",
            file=sys.stderr,
        )
    with StopSignals("timewarp sweep") as signals:
        if pending:
            try:
                _execute(pending, sweep, args, total=len(runs))
            except Interrupted:
                print("timewarp sweep: interrupted; finished runs are kept", file=sys.stderr)
            except _ClusterError as exc:
                return _fail(str(exc), 2)
        try:  # (the runs have ended: a first signal met at this call is only noted)
            signals.shield()  # the tables of the finished runs are written whatever comes now
        except Interrupted:
            print("timewarp sweep: interrupted; finished runs are kept", file=sys.stderr)
        # the exit status says whether the runs were interrupted: a signal noted while
        # the tables are written (whole, whatever comes) changes nothing
        interrupted = signals.exit_code
        rows = _collect(sweep, runs, results, plots=not args.no_plots)
        if args.report:
            _report(sweep, runs, rows, results)
    ok = sum(r["status"] == "ok" for r in rows)
    failed = [r for r in rows if r["status"] == "failed"]
    if not args.quiet or failed or interrupted:
        print(
            f"timewarp sweep: {ok} ok, {len(failed)} failed, {len(rows) - ok - len(failed)} "
            f"not run; tables in {results}/runs.csv and summary.csv",
            file=sys.stderr,
        )
    for r in failed[:10]:
        print(f"  FAILED {r['run_id']} {_factors_text(sweep, r)}: {r['error']}", file=sys.stderr)
    if len(failed) > 10:
        print(f"  ... and {len(failed) - 10} more (see runs.csv)", file=sys.stderr)
    if interrupted:
        return interrupted
    return 1 if failed else 0


def _factors_text(sweep: Sweep, row: dict) -> str:
    parts = [f"{c}={row[c]}" for c in sweep.factor_columns if row[c] != ""]
    return " ".join([*parts, f"replicate={row['replicate']}"])


def _needs_run(run: Run, args: argparse.Namespace) -> bool:
    if args.rerun:
        return True
    result = finished_result(run.directory)
    if result is None:
        return True
    return args.rerun_failed and result.get("status") != "ok"


def _write_plan(sweep: Sweep, runs: list[Run], results: Path) -> None:
    shutil.copyfile(sweep.source, results / f"sweep{sweep.source.suffix}")
    plan = {
        "name": sweep.name,
        "source": str(sweep.source.resolve()),
        "factor_columns": sweep.factor_columns,
        "runs": [r.record() for r in runs],
    }
    write_text_atomically(results / "plan.json", json.dumps(plan, indent=2) + "\n")


CONNECT_TIMEOUT = "10s"


class _ClusterError(RuntimeError):
    pass


def _execute(pending: list[Run], sweep: Sweep, args: argparse.Namespace, total: int) -> None:
    """Submit every pending run to Dask and record each result as it arrives."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as exc:
        raise _ClusterError(
            f"dask.distributed is not installed ({exc}); pip install 'timewarp[sweep]'"
        ) from None
    from commands.sweeping.worker_plugin import StopRunsOnClose

    for name in ("distributed", "distributed.worker", "distributed.nanny", "distributed.scheduler"):
        logging.getLogger(name).setLevel(logging.ERROR)
    cluster = client = scratch = None
    futures = {}
    try:
        try:
            # each made and recorded in one critical block (timewarp.wire.stophold): a stop
            # signal while the cluster starts (seconds: worker processes) is raised once
            # it is recorded, and the finally below closes it
            if args.scheduler_address:
                with critical:
                    client = Client(args.scheduler_address, timeout=CONNECT_TIMEOUT)
            else:
                import os
                import tempfile

                workers = args.workers or os.cpu_count() or 1
                with critical:  # the workers' scratch space, removed with the cluster
                    scratch = tempfile.mkdtemp(prefix="timewarp-dask-")
                import dask

                with critical, dask.config.set({"temporary-directory": scratch}):
                    cluster = LocalCluster(
                        n_workers=workers,
                        threads_per_worker=1,
                        processes=True,
                        host="127.0.0.1",
                        dashboard_address=None,
                        worker_dashboard_address=None,
                        # Dask's scheduler serves its HTTP routes (health, metrics) even without
                        # a dashboard, on port 8787 unless told: a free loopback port instead
                        scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                        silence_logs=logging.ERROR,
                        local_directory=scratch,
                    )
                with critical:
                    client = Client(cluster)
            client.register_plugin(StopRunsOnClose())
        except (OSError, TimeoutError, ValueError) as exc:
            where = args.scheduler_address or "a LocalCluster"
            raise _ClusterError(
                f"cannot start or reach the Dask cluster ({where}): {exc}"
            ) from None
        _run_all(pending, futures, sweep, args, total, client)
    finally:
        steps = [  # (built without a call: a signal is checked for at calls)
            lambda: [fut.cancel() for fut in futures],
            lambda: client is not None and client.close(),
            lambda: cluster is not None and cluster.close(),
            lambda: scratch is not None and shutil.rmtree(scratch, ignore_errors=True),
        ]
        # (a first stop signal met half-way through raises there: the second pass does
        # what the first skipped — a step is dropped only once done, so none is skipped
        # and none done again after the next has run)
        try:
            _run_steps(steps)
        except Interrupted:
            _run_steps(steps)
            raise


def _run_steps(steps: list) -> None:
    """Run and drop each step in turn (what is left stays, for a second pass). Each is a
    critical block (timewarp.wire.stophold): Dask's close cut by a signal half-way left
    the cluster half closed, and closing it again waited forever (a sweep stopped as it
    ended hung; scripts/signal_stress.py found it)."""
    while steps:
        with critical:
            steps[0]()
            del steps[0]


def _run_all(
    pending: list[Run],
    futures: dict,
    sweep: Sweep,
    args: argparse.Namespace,
    total: int,
    client: Any,
) -> None:
    """Submit the pending runs to ``client`` and record each result as it arrives
    (``futures``: the caller cancels what is left)."""
    from dask.distributed import as_completed
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from commands.sweeping.runner import RunInterrupted, run_point

    console = Console(stderr=True)
    progress = Progress(
        TextColumn("[bold]runs"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[failed]} failed"),
        TimeElapsedColumn(),
        console=console,
        disable=args.quiet or not console.is_terminal,
    )
    with progress:
        bar = progress.add_task("runs", total=total, completed=total - len(pending), failed=0)
        failed = 0
        for r in pending:
            fut = client.submit(run_point, r.task(sweep), key=_task_key(r), pure=False)
            futures[fut] = r
        for fut in as_completed(list(futures)):
            r = futures[fut]
            try:
                result = fut.result()
            except RunInterrupted:  # a worker closed under it: left unfinished, redone later
                progress.update(bar, advance=1, failed=failed)
                continue
            except Exception as exc:  # e.g. KilledWorker: record it like any failure
                result = _record_lost_run(r, exc)
            if result.get("status") != "ok":
                failed += 1
            progress.update(bar, advance=1, failed=failed)


def _task_key(run: Run) -> str:
    """Unique per run *and* results directory: two sweeps sharing a cluster never merge."""
    where = hashlib.sha256(str(run.directory.resolve()).encode()).hexdigest()[:8]
    return f"timewarp-run-{run.run_id}-{where}"


def _record_lost_run(run: Run, exc: BaseException) -> dict[str, Any]:
    """A run whose worker died or whose task errored outside run_point's own handling."""
    result = {
        "run_id": run.run_id,
        "status": "failed",
        "error": f"lost on the Dask cluster: {type(exc).__name__}: {exc}",
    }
    run.directory.mkdir(parents=True, exist_ok=True)
    (run.directory / POINT_FILE).write_text(json.dumps(run.record(), indent=2) + "\n")
    write_text_atomically(run.directory / RESULT_FILE, json.dumps(result, indent=2) + "\n")
    return result


def _collect(sweep: Sweep, runs: list[Run], results: Path, plots: bool) -> list[dict]:
    from commands.comparing.runs import service_figures
    from commands.sweeping import results as tables

    columns = sweep.factor_columns
    rows, seen = [], []
    for r in runs:
        result = finished_result(r.directory)
        services = service_figures(r.directory) if result else {}
        seen += services
        rows.append(tables.run_row(r.record(), result, columns, services))
    services = tables.service_columns(seen)
    tables.write_csv(results / "runs.csv", tables.runs_columns(columns, services), rows)
    summary = tables.summarise(rows, columns, services)
    tables.write_csv(results / "summary.csv", tables.summary_columns(columns, services), summary)
    plot_dir = results / "plots"
    if not plots:
        return rows
    if plot_dir.exists():
        shutil.rmtree(plot_dir)
    try:
        tables.plot_summary(summary, columns, plot_dir, services)
    except Exception as exc:  # plots are a bonus: the tables are already written
        print(f"timewarp sweep: plots skipped ({exc})", file=sys.stderr)
    return rows


def _report(sweep: Sweep, runs: list[Run], rows: list[dict], results: Path) -> None:
    """``RESULTS/report.html``: one group per point, of its successful runs."""
    from commands.comparing.html import render
    from commands.comparing.sweep_groups import groups_of_rows

    directories = [run.directory for run in runs]
    shown, failed = groups_of_rows(rows, directories, sweep.factor_columns)
    if not shown:
        print("timewarp sweep: no run succeeded: no report", file=sys.stderr)
        return
    title = f"timewarp sweep {sweep.source.name}: {len(shown)} points"
    if failed:
        title += f" ({len(failed)} where every run failed: {', '.join(failed)})"
    try:
        write_text_atomically(results / "report.html", render(shown, title))
    except OSError as exc:  # the tables are written: the report is a bonus
        print(f"timewarp sweep: report not written ({exc.strerror or exc})", file=sys.stderr)
        return
    print(f"timewarp sweep: report in {results}/report.html", file=sys.stderr)
