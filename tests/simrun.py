"""Run `timewarp simulate` as a user would, for the end-to-end tests (one place)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_simulate(out, env, scheduler, platform, workload, *extra, timeout=240):
    """`timewarp simulate -q --no-plots` from the checkout's root; returns the process."""
    return subprocess.run(
        [sys.executable, "-m", "timewarp", "simulate", "-q", "--no-plots",
         "--scheduler", scheduler, "-p", str(platform), "-w", str(workload), "-o", str(out),
         *extra],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


OUT_CSVS = ("out_jobs.csv", "out_schedule.csv", "out_machine_states.csv")


def run_twice(tmp_path, env, scheduler, platform, workload, *extra, cwd=None, timeout=240):
    """`timewarp simulate` twice on the same inputs (into ``tmp_path/run1`` and
    ``run2``); both must succeed with byte-identical CSVs. Returns (first run's outputs
    directory, its process). ``cwd``: where the command runs (default the checkout)."""
    runs = []
    for n in (1, 2):
        out = tmp_path / f"run{n}"
        r = subprocess.run(
            [sys.executable, "-m", "timewarp", "simulate", "-q", "--no-plots",
             "--scheduler", scheduler, "-p", str(platform), "-w", str(workload),
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
