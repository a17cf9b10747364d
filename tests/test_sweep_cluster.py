"""`timewarp sweep` end to end on Dask: a 2 x 2 x 2 sweep of tiny simulations on a 2-worker
LocalCluster, plus a deliberately broken scheduler, then a resume on an existing cluster."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SWEEP_TIMEOUT_S = 300

SPEC = {
    "name": "test-2x2x2",
    "root": str(ROOT),
    "replicates": 2,
    "base_seed": 3,
    "timeout": 120,
    # a loaded CI machine must not turn a slow thread into a non-deterministic advance
    "simulate_args": ["--stall-timeout", "60"],
    "schedulers": {
        "tiny": "python tests/programs/tiny_scheduler.py --scheduler-name default-scheduler",
        "broken": "python -c \"raise SystemExit('deliberately broken scheduler')\"",
    },
    "platforms": {"c16": "examples/inputs/cluster16.xml"},
    "workloads": {
        "burst": {"generator": "burst", "count": [2, 4], "delay": [20, 40]},
        "one": {"generator": "burst", "count": 1, "delay": 5},
    },
    "modes": {"deterministic": {}},
    "grid": {"scheduler": ["tiny"], "workload": ["burst"]},
    "rows": [{"scheduler": "broken", "workload": "one"}],
}


def sweep_cmd(spec: Path, out: Path, *extra: str) -> list[str]:
    # not -q: the tests read the plan and result lines a good run prints
    return [sys.executable, "-m", "timewarp", "sweep", str(spec), "-o", str(out), *extra]


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def finished(tmp_path_factory, subprocess_env):
    base = tmp_path_factory.mktemp("sweep")
    spec = base / "sweep.yaml"
    spec.write_text(yaml.safe_dump(SPEC, sort_keys=False))
    out = base / "results"
    proc = subprocess.run(
        sweep_cmd(spec, out, "--workers", "2"),
        capture_output=True,
        text=True,
        env=subprocess_env,
        timeout=SWEEP_TIMEOUT_S,
    )
    return spec, out, proc


def test_every_run_is_recorded_and_a_failing_point_does_not_stop_the_others(finished):
    _spec, out, proc = finished
    assert proc.returncode == 1, proc.stderr  # some runs failed
    assert "8 ok, 2 failed, 0 not run" in proc.stderr
    assert "deliberately broken scheduler" in proc.stderr or "exited with code 1" in proc.stderr
    rows = read_csv(out / "runs.csv")
    assert len(rows) == 10
    tiny = [r for r in rows if r["scheduler"] == "tiny"]
    broken = [r for r in rows if r["scheduler"] == "broken"]
    assert [r["status"] for r in tiny] == ["ok"] * 8, [r["error"] for r in tiny]
    assert [r["status"] for r in broken] == ["failed"] * 2
    assert all("scheduler" in r["error"] for r in broken)
    for r in rows:
        run_dir = out / "runs" / r["run_id"]
        assert json.loads((run_dir / "result.json").read_text())["status"] == r["status"]
    assert {(r["count"], r["delay"]) for r in tiny} == {
        ("2", "20"),
        ("2", "40"),
        ("4", "20"),
        ("4", "40"),
    }
    assert sorted(r["seed"] for r in tiny) == ["3"] * 4 + ["4"] * 4


def test_runs_have_the_simulation_figures(finished):
    _spec, out, _proc = finished
    for r in read_csv(out / "runs.csv"):
        if r["scheduler"] != "tiny":
            continue
        # a burst that fits on 16 one-core nodes finishes after one job's delay
        assert float(r["makespan"]) == float(r["delay"])
        assert float(r["mean_waiting_time"]) == 0.0
        assert int(r["nb_jobs_success"]) == int(r["count"])
        assert float(r["utilisation"]) == pytest.approx(int(r["count"]) / 16, abs=0.01)
        assert r["nondeterministic_advances"] == "0"
        assert float(r["wall_s"]) > 0 and float(r["speedup"]) > 0
        assert float(r["peak_rss_mb"]) > 10 and int(r["result_bytes"]) > 0


def test_summary_has_one_row_per_point_with_statistics(finished):
    _spec, out, _proc = finished
    summary = read_csv(out / "summary.csv")
    assert len(summary) == 5
    for s in summary:
        if s["scheduler"] == "tiny":
            assert (s["n_runs"], s["n_ok"], s["n_failed"]) == ("2", "2", "0")
            assert float(s["makespan_mean"]) == float(s["delay"])
            assert float(s["makespan_sd"]) == 0.0 and float(s["makespan_ci95"]) == 0.0
            assert float(s["wall_s_mean"]) > 0
        else:
            assert (s["n_runs"], s["n_ok"], s["n_failed"]) == ("2", "0", "2")
            assert s["makespan_mean"] == ""
    plots = {p.name for p in (out / "plots").iterdir()}
    results = {"count.png", "delay.png", "scheduler.png", "workload.png"}
    # the run costs (wall time, speed-up) apart from the results
    assert results | {p.replace(".png", "-cost.png") for p in results} == plots


def test_deterministic_replicates_are_identical(finished):
    _spec, out, _proc = finished
    by_point: dict[tuple, list[dict]] = {}
    for r in read_csv(out / "runs.csv"):
        if r["scheduler"] == "tiny":
            by_point.setdefault((r["count"], r["delay"]), []).append(r)
    assert len(by_point) == 4
    for reps in by_point.values():
        a, b = reps
        assert a["run_id"] != b["run_id"]
        for metric in ("makespan", "mean_waiting_time", "mean_slowdown", "utilisation"):
            assert a[metric] == b[metric]
        for name in ("out_jobs.csv", "out_schedule.csv"):
            assert (out / "runs" / a["run_id"] / name).read_bytes() == (
                out / "runs" / b["run_id"] / name
            ).read_bytes()


def test_resume_on_an_existing_cluster_runs_only_the_unfinished_run(
    finished, tmp_path, subprocess_env
):
    from dask.distributed import LocalCluster

    spec, out, _proc = finished
    copy = tmp_path / "results"
    shutil.copytree(out, copy)
    rows = read_csv(copy / "runs.csv")
    lost = next(r for r in rows if r["scheduler"] == "tiny")
    (copy / "runs" / lost["run_id"] / "result.json").unlink()  # as if interrupted mid-run
    before = {
        r["run_id"]: (copy / "runs" / r["run_id"] / "result.json").stat().st_mtime_ns
        for r in rows
        if r["run_id"] != lost["run_id"]
    }
    with LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=False,
        protocol="tcp",  # reachable from the sweep process (in-process clusters default to inproc)
        host="127.0.0.1",
        dashboard_address=None,
        worker_dashboard_address=None,  # else the worker's tries port 8787, maybe taken
        # Dask's scheduler serves its HTTP routes (health, metrics) even without
        # a dashboard, on port 8787 unless told: a free loopback port instead
        scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
    ) as cluster:
        proc = subprocess.run(
            sweep_cmd(spec, copy, "--scheduler-address", cluster.scheduler_address, "--no-plots"),
            capture_output=True,
            text=True,
            env=subprocess_env,
            timeout=SWEEP_TIMEOUT_S,
        )
    assert "9 already finished, 1 to run" in proc.stderr, proc.stderr
    assert "8 ok, 2 failed" in proc.stderr
    after = {r["run_id"]: r for r in read_csv(copy / "runs.csv")}
    assert after[lost["run_id"]]["status"] == "ok"
    assert after[lost["run_id"]]["makespan"] == lost["makespan"]
    for run_id, mtime in before.items():
        assert (copy / "runs" / run_id / "result.json").stat().st_mtime_ns == mtime


def test_dry_run_lists_failed_runs_as_done_unless_asked_to_rerun_them(finished, subprocess_env):
    spec, out, _proc = finished

    def listing(*extra: str) -> list[str]:
        proc = subprocess.run(
            sweep_cmd(spec, out, "--dry-run", *extra),
            capture_output=True,
            text=True,
            env=subprocess_env,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        return [line.split()[1] for line in proc.stdout.splitlines()]

    assert listing() == ["done"] * 10
    assert listing("--rerun-failed").count("run") == 2
    assert listing("--rerun") == ["run"] * 10


def test_an_unusable_cluster_address_is_a_usage_error(tmp_path, subprocess_env):
    spec = tmp_path / "sweep.yaml"
    spec.write_text(yaml.safe_dump(SPEC, sort_keys=False))
    proc = subprocess.run(
        sweep_cmd(spec, tmp_path / "r", "--scheduler-address", "nonsense://nowhere"),
        capture_output=True,
        text=True,
        env=subprocess_env,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "cannot start or reach the Dask cluster (nonsense://nowhere)" in proc.stderr
    assert not (tmp_path / "r" / "runs").exists()  # nothing ran
