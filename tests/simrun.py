"""Run `timewarp simulate` as a user would, for the end-to-end tests (one place)."""

import subprocess
import sys
from pathlib import Path

import pytest

from experiments._common import BATKUBE

ROOT = Path(__file__).resolve().parent.parent
needs_batkube_data = pytest.mark.skipif(
    not BATKUBE.is_dir(), reason=f"Batkube data not found at {BATKUBE}"
)


def run_module(env, module, *argv, timeout=60):
    """`python -m module argv…` from the checkout's root; returns the finished process."""
    return subprocess.run(
        [sys.executable, "-m", module, *argv],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_simulate(out, env, scheduler, platform, workload, *extra, timeout=240, quiet=True):
    """`timewarp simulate [-q] --no-plots` from the checkout's root; returns the process.
    (-q: only warnings, errors and the summary of a failed or partial run.)"""
    return subprocess.run(
        [sys.executable, "-m", "timewarp", "simulate", *(["-q"] if quiet else []), "--no-plots",
         "--scheduler", scheduler, "-p", str(platform), "-w", str(workload), "-o", str(out),
         *extra],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


OUT_CSVS = ("out_jobs.csv", "out_schedule.csv", "out_machine_states.csv")


def run_twice(
    tmp_path, env, scheduler, platform, workload, *extra, cwd=None, timeout=240, quiet=True
):
    """`timewarp simulate` twice on the same inputs (into ``tmp_path/run1`` and
    ``run2``); both must succeed with byte-identical CSVs. Returns (first run's outputs
    directory, its process). ``cwd``: where the command runs (default the checkout).
    ``quiet`` (-q): only warnings and errors on stderr, no summary of a good run."""
    runs = []
    for n in (1, 2):
        out = tmp_path / f"run{n}"
        r = subprocess.run(
            [sys.executable, "-m", "timewarp", "simulate", *(["-q"] if quiet else []),
             "--no-plots", "--scheduler", scheduler, "-p", str(platform), "-w", str(workload),
             "-o", str(out), *extra],
            cwd=cwd or ROOT, env=env, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        assert r.returncode == 0, f"run {n}: {r.stderr[-4000:]}"
        runs.append((out, r))
    (out1, r1), (out2, _) = runs
    base1 = out1 if out1.is_absolute() else Path(cwd or ROOT) / out1
    base2 = out2 if out2.is_absolute() else Path(cwd or ROOT) / out2
    for name in OUT_CSVS:
        assert (base1 / name).read_bytes() == (base2 / name).read_bytes(), f"{name} differs"
    return base1, r1


def placements(out) -> dict[str, tuple[str, str, str]]:
    """job id -> (allocated resources, start, finish) from ``out_jobs.csv``."""
    import csv

    with open(Path(out) / "out_jobs.csv", newline="") as f:
        return {
            row["job_id"]: (row["allocated_resources"], row["starting_time"], row["finish_time"])
            for row in csv.DictReader(f)
        }


def one_core_jobs(*arrivals: tuple[float, str]) -> list[dict]:
    """Batsim jobs of one resource each, ids "1", "2", … in order: ``arrivals`` are
    (submission time, profile name)."""
    return [
        {"id": str(i), "subtime": subtime, "res": 1, "profile": profile}
        for i, (subtime, profile) in enumerate(arrivals, 1)
    ]


def delay_profiles(scheduler: str = "default", **delays: float) -> dict[str, dict]:
    """Delay profiles of one cpu each, for pods of ``scheduler``: profile name -> seconds."""
    return {
        name: {"type": "delay", "delay": delay, "cpu": "1", "scheduler": scheduler}
        for name, delay in delays.items()
    }


def write_inputs(tmp_path, jobs, profiles, nodes: int = 2, cores: int = 1):
    """``tmp_path/p.xml`` (``nodes`` nodes of ``cores`` cores) and ``tmp_path/w.json``;
    returns (platform, workload)."""
    from simulator.testing import write_platform, write_workload

    return (
        write_platform(tmp_path / "p.xml", nodes, cores),
        write_workload(tmp_path / "w.json", jobs, profiles),
    )
