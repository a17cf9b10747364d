"""A program that finishes is not a crash (issue 25): exit 0 ends that process, the run
goes on and ends as usual; the manifest and summary say when it exited; a non-zero exit
still fails the run; `--scheduler-exit fail` makes any exit a failure."""

from __future__ import annotations

import json

from simrun import run_simulate

from simulator.testing import write_platform, write_workload

DEFAULT_LIKE = "python -m sample_schedulers.default_like --scheduler-name default"


def _inputs(tmp_path):
    platform = write_platform(tmp_path / "p.xml", 2, cores=1)
    profile = {"type": "delay", "delay": 300, "cpu": "1", "scheduler": "default"}
    jobs = [{"id": str(i), "subtime": 10 * i, "res": 1, "profile": "d"} for i in range(4)]
    return platform, write_workload(tmp_path / "w.json", jobs, {"d": profile})


def test_a_one_shot_drain_tool_exits_0_and_the_run_goes_on(tmp_path, subprocess_env):
    platform, workload = _inputs(tmp_path)
    out = tmp_path / "out"
    r = run_simulate(
        out, subprocess_env, DEFAULT_LIKE, platform, workload,
        "--scheduler", "python tests/programs/drain_node.py n000", "--check-determinism",
        quiet=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    assert "the two runs wrote the same bytes" in r.stderr
    log = (out / "scheduler-1.log").read_text().splitlines()
    assert log[0] == "cordoned n000" and log[-1] == "deleted node n000; done"
    assert any(line.startswith("evicted default/") for line in log)
    manifest = json.loads((out / "manifest.json").read_text())
    ended = manifest["processes"]["scheduler-1"]["ended"]
    assert ended["exit"] == 0 and ended["at_s"] >= 100
    assert "ended" not in manifest["processes"]["scheduler-0"]
    assert manifest["ok"] is True and manifest["outputs"] == "complete"
    assert "scheduler-1: " in r.stderr and "exited 0 at simulated t=" in r.stderr
    decisions = (out / "out_decisions.csv").read_text()
    assert ",scheduler-1,cordon,Node,,n000," in decisions
    assert ",scheduler-1,delete-node,Node,,n000," in decisions


def test_a_once_mode_program_and_the_fail_policy(tmp_path, subprocess_env):
    once = tmp_path / "once.py"
    once.write_text("import time\ntime.sleep(30)\nprint('checked once', flush=True)\n")
    platform, workload = _inputs(tmp_path)
    r = run_simulate(
        tmp_path / "go-on", subprocess_env, DEFAULT_LIKE, platform, workload,
        "--scheduler", f"python {once}",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    ended = json.loads((tmp_path / "go-on" / "manifest.json").read_text())["processes"]
    assert ended["scheduler-1"]["ended"] == {"exit": 0, "at_s": 30.0}
    r = run_simulate(
        tmp_path / "fail", subprocess_env, DEFAULT_LIKE, platform, workload,
        "--scheduler", f"python {once}", "--scheduler-exit", "fail",
    )  # fmt: skip
    assert r.returncode == 1
    assert "scheduler 'scheduler-1'" in r.stderr and "exited with code 0" in r.stderr


def test_a_non_zero_exit_still_fails_the_run(tmp_path, subprocess_env):
    crash = tmp_path / "crash.py"
    crash.write_text("import sys, time\ntime.sleep(30)\nsys.exit(3)\n")
    platform, workload = _inputs(tmp_path)
    r = run_simulate(
        tmp_path / "out", subprocess_env, DEFAULT_LIKE, platform, workload,
        "--scheduler", f"python {crash}",
    )  # fmt: skip
    assert r.returncode == 1
    assert "exited with code 3" in r.stderr
