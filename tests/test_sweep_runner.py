"""One run on a worker (runner.run_point), called directly: every ending leaves a result.json
with the reason, and nothing of the run keeps running."""

from __future__ import annotations

import json
import os
from pathlib import Path

import psutil
import pytest

from commands.sweeping.runner import accept_runs, run_point

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _importable_checkout(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    # these tests are the worker: an in-process cluster closed by an earlier test in this
    # process (test_sweep_cluster's resume test) must not leave it refusing runs
    accept_runs()


def task(tmp_path: Path, argv: list[str], timeout: float = 120) -> dict:
    directory = tmp_path / "run"
    return {
        "run_id": "r1",
        "directory": str(directory),
        "simulate_argv": [*argv, "-q", "--no-plots", "-o", str(directory)],
        "cwd": str(ROOT),
        "timeout": timeout,
        "record": {"run_id": "r1", "factors": {}, "replicate": 0, "seed": 0},
    }


def test_a_usage_error_of_simulate_is_the_recorded_reason(tmp_path):
    result = run_point(task(tmp_path, ["--mode", "warp"]))
    assert result["status"] == "failed"
    assert "argument --mode: invalid choice: 'warp'" in result["error"]
    on_disk = json.loads((tmp_path / "run" / "result.json").read_text())
    assert on_disk["status"] == "failed" and on_disk["error"] == result["error"]
    assert (tmp_path / "run" / "point.json").exists()


def test_a_run_past_its_timeout_is_stopped_with_its_whole_process_tree(tmp_path):
    argv = [
        "--scheduler",
        # a scheduler that never binds: the simulation cannot end on its own
        'python -c "import select; select.select([], [], [])"',
        "-p",
        "examples/inputs/cluster16.xml",
        "-w",
        "examples/inputs/burst_40_delay170.json",
    ]
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    result = run_point(task(tmp_path, argv, timeout=4))
    assert result["status"] == "failed"
    assert result["error"] == "timed out after 4 s (wall clock)"
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert [p.cmdline() for p in left if p.is_running()] == []


def test_an_interrupted_attempt_is_wiped_before_the_run(tmp_path):
    stale = tmp_path / "run" / "out_jobs.csv"
    stale.parent.mkdir()
    stale.write_text("half-written\n")
    result = run_point(task(tmp_path, ["--mode", "warp"]))
    assert result["status"] == "failed"
    assert not stale.exists()
