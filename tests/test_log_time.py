"""Log records carry virtual time (issue 19, class 7): `logging`'s %(asctime)s, loguru's
and structlog's timestamps, under a broker and standalone, by default (no
--freeze-unpatched, no rewriting of the libraries); without a broker, the real clock."""

from __future__ import annotations

import re
import subprocess
import sys
import time

from simrun import ROOT, placements, run_twice

from simulator.testing import write_platform, write_workload


def test_standalone_logs_say_simulated_time(subprocess_env):
    env = {**subprocess_env, "TZ": "UTC"}
    r = subprocess.run(
        [sys.executable, "-m", "timewarp", "run", "--standalone", "-q", "--",
         "python", "tests/programs/logs_three_ways.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "2026-01-01 00:00:00,000 std binding 0",
        "2026-01-01 00:00:00.000 loguru binding 0 (0:00:00)",
        "timestamp='2026-01-01T00:00:00Z' unix=1767225600.0 event='binding 0'",
        "relative 0 ms",
        "2026-01-01 00:02:50,000 std binding 1",
        "2026-01-01 00:02:50.000 loguru binding 1 (0:02:50)",
        "timestamp='2026-01-01T00:02:50Z' unix=1767225770.0 event='binding 1'",
        "relative 170000 ms",
    ]


def test_without_a_broker_logs_keep_the_real_clock(subprocess_env):
    code = (
        "import logging, sys, time\n"
        "from timewarp import vtime\n"  # the runtime imported, no broker: passthrough
        "logging.basicConfig(stream=sys.stdout, format='%(created)f')\n"
        "logging.warning('x')\n"
    )
    before = time.time()
    r = subprocess.run(
        [sys.executable, "-c", code], env=subprocess_env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert before - 1 <= float(r.stdout) <= time.time() + 1


def test_a_scheduler_logging_with_logging_and_loguru_logs_simulated_time(tmp_path, subprocess_env):
    """Pods 170 simulated seconds apart (two-core nodes, the fewest pods first): the log
    says 170 s apart, and the simulation is reproducible."""
    env = {**subprocess_env, "TZ": "UTC"}
    platform = write_platform(tmp_path / "p.xml", 2, 2)
    jobs = [
        {"id": "1", "subtime": 0, "res": 1, "profile": "j"},
        {"id": "2", "subtime": 170, "res": 1, "profile": "j"},
        {"id": "3", "subtime": 170, "res": 1, "profile": "j"},
    ]
    profiles = {"j": {"type": "delay", "delay": 200, "cpu": "1", "scheduler": "default"}}
    workload = write_workload(tmp_path / "w.json", jobs, profiles)
    out, _ = run_twice(
        tmp_path, env, "python tests/programs/loguru_scheduler.py", platform, workload
    )
    assert placements(out) == {
        "1": ("0", "0.000000", "200.000000"),
        "2": ("1", "170.000000", "370.000000"),
        "3": ("0", "170.000000", "370.000000"),
    }
    log = (out / "scheduler-0.log").read_text()
    assert "2026-01-01 00:00:00 | INFO | bound w0.1 to n000" in log
    assert "2026-01-01 00:02:50 | INFO | bound w0.2 to n001" in log
    assert "2026-01-01 00:03:20 | INFO | w0.1 finished on n000" in log
    stamps = re.findall(r"^(\S+ \S+) sched (\d) pods running$", log, re.M)
    assert stamps == [
        ("2026-01-01 00:00:00,000", "1"),
        ("2026-01-01 00:02:50,000", "2"),
        ("2026-01-01 00:02:50,000", "3"),
    ]
