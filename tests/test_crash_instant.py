"""A scheduler that dies mid-run stops the simulation at that virtual instant, every run
(issue 19, class 5): its daemon threads do not run on in virtual time while the
interpreter winds down, and the partial CSVs are byte-identical across runs — whether the
main thread raises, calls sys.exit or os._exit, the process is killed by SIGKILL, or a
thread's sys.exit ends the program through the main thread's join."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest
from simrun import OUT_CSVS, ROOT

from simulator.testing import write_platform, write_workload

# one job every 10 s, 15 s long, on two single-core nodes: the binder (polling every
# second) keeps both nodes busy; the program dies at 47.5 s
JOBS = [{"id": str(i), "subtime": 10 * i, "res": 1, "profile": "j"} for i in range(12)]
PROFILES = {"j": {"type": "delay", "delay": 15, "cpu": "1", "scheduler": "default"}}
CRASH_AT = 47.5


def simulate(tmp_path, env, how, n):
    out = tmp_path / f"{how}-{n}"
    platform = write_platform(tmp_path / "p.xml", 2, 1)
    workload = write_workload(tmp_path / "w.json", JOBS, PROFILES)
    r = subprocess.run(
        [sys.executable, "-m", "timewarp", "simulate", "-q", "--no-plots", "--scheduler",
         f"python tests/programs/crash_midrun.py --crash-after {CRASH_AT} --how {how}",
         "-p", str(platform), "-w", str(workload), "-o", str(out),
         # exit 0 ends only its process by default (a one-shot tool): here it is a crash
         *(["--scheduler-exit", "fail"] if how == "thread-sys-exit" else [])],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    return out, r


@pytest.mark.parametrize(
    ("how", "ending"),
    [
        ("raise", "exited with code 1"),
        ("sys-exit", "exited with code 3"),
        ("os-exit", "exited with code 4"),
        ("sigkill", "was killed by signal 9"),
        ("thread-sys-exit", "exited with code 0"),
    ],
)
def test_a_crash_stops_the_run_at_its_virtual_instant_every_time(
    tmp_path, subprocess_env, how, ending
):
    outs = []
    for n in (1, 2):
        out, r = simulate(tmp_path, subprocess_env, how, n)
        assert r.returncode == 1, r.stderr[-3000:]
        assert "scheduler 'scheduler-0'" in r.stderr and ending in r.stderr, r.stderr[-3000:]
        assert "PARTIAL outputs" in r.stderr
        outs.append(out)
    for name in OUT_CSVS:
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), name
    with open(outs[0] / "out_jobs.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    # the jobs that ended by the crash, and nothing started after it by the daemon binder
    # (a job submitted at 10 s is in the same instant as the binder's poll at 10 s: Batsim
    # tells both in one message, the poll sees the pod — real Batsim 4.2.1 gives the same)
    assert [(r["job_id"], r["starting_time"]) for r in rows] == [
        ("0", "1.000000"),
        ("1", "10.000000"),
        ("2", "20.000000"),
        ("3", "30.000000"),
    ]
    with open(outs[0] / "out_schedule.csv", newline="") as f:
        [schedule] = list(csv.DictReader(f))
    # the simulation stopped at the crash: two machines' time accounted up to 47.5 s
    stopped_at = (float(schedule["time_computing"]) + float(schedule["time_idle"])) / 2
    assert stopped_at == CRASH_AT
    manifest = json.loads((outs[0] / "manifest.json").read_text())
    assert manifest["outputs"] == "partial" and not manifest["ok"]
    log = (outs[0] / "scheduler-0.log").read_text()
    assert f"giving up ({how})" in log
    after = log[log.index("giving up") :]
    assert " bound " not in after  # the daemon binder did not run on
