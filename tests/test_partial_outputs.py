"""Runs that do not end normally keep what happened so far: partial Batsim CSVs (the jobs
that ended, the machine states so far), marked as partial, never half-written."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest
import zmq
from simrun import delay_profiles, one_core_jobs, run_simulate, write_inputs

from simulator import protocol as p
from simulator.fcfs import Fcfs
from simulator.outputs import PARTIAL_SUFFIX
from simulator.testing import free_endpoint, write_platform

ROOT = Path(__file__).resolve().parent.parent
JOBS = one_core_jobs((0, "short"), (0, "short"), (0, "long"))
PROFILES = delay_profiles(short=10, long=100)


def read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


class StallingDecisionProcess:
    """FCFS until simulated time reaches ``stall_at``; that message is never answered."""

    def __init__(self, endpoint: str, stall_at: float, decide=None) -> None:
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.REP)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.bind(endpoint)
        self.stall_at = stall_at
        self.decide = decide or Fcfs()
        self.stalled = threading.Event()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        decide = self.decide
        while not self.done.is_set():
            if not self.socket.poll(100):
                continue
            message = p.decode(self.socket.recv(), "batsim")
            if message.now >= self.stall_at:
                self.stalled.set()
                return
            self.socket.send_string(p.encode(decide(message)))

    def close(self) -> None:
        self.done.set()
        self.thread.join(5)
        self.socket.close(0)
        self.context.term()


@pytest.fixture
def inputs(tmp_path):
    return write_inputs(tmp_path, JOBS, PROFILES)


@contextmanager
def sim_against(tmp_path, inputs, *extra, **decision_options):
    """``timewarp sim`` against a StallingDecisionProcess; yields (sim, decision) and
    leaves neither behind."""
    endpoint = free_endpoint()
    decision = StallingDecisionProcess(endpoint, **decision_options)
    sim = start_sim(tmp_path, inputs, endpoint, *extra)
    try:
        yield sim, decision
    finally:
        sim.kill()
        decision.close()


def start_sim(tmp_path, inputs, endpoint, *extra):
    platform, workload = inputs
    return subprocess.Popen(
        [sys.executable, "-m", "timewarp", "sim", "-q", "-p", str(platform), "-w", str(workload),
         "-e", str(tmp_path / "out" / "run"), "-s", endpoint, *extra],
        cwd=ROOT, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def assert_partial_after_two_short_jobs(prefix: Path) -> None:
    rows = read(Path(f"{prefix}_jobs.csv"))
    assert [(r["job_id"], r["final_state"], r["finish_time"]) for r in rows] == [
        ("1", "COMPLETED_SUCCESSFULLY", "10.000000"),
        ("2", "COMPLETED_SUCCESSFULLY", "10.000000"),
    ]  # job 3 had not ended: not reported
    [schedule] = read(Path(f"{prefix}_schedule.csv"))
    assert schedule["batsim_version"].endswith(PARTIAL_SUFFIX)
    assert schedule["nb_jobs"] == "2" and schedule["makespan"] == "10.000000"
    # two machines computing from 0 to 10, then idle until the stop at 10
    assert float(schedule["time_computing"]) == pytest.approx(20.0)
    machine_rows = read(Path(f"{prefix}_machine_states.csv"))
    assert machine_rows and machine_rows[-1]["time"] == "10"
    assert not list(prefix.parent.glob("*.tmp"))  # nothing half-written


def test_sigterm_writes_partial_outputs_and_exits_143(tmp_path, subprocess_env, inputs):
    with sim_against(tmp_path, inputs, stall_at=10) as (sim, decision):
        assert decision.stalled.wait(60), "the simulation never reached t=10"
        sim.send_signal(signal.SIGTERM)
        _, err = sim.communicate(timeout=30)
    assert sim.returncode == 143, err
    assert "SIGTERM" in err and "partial outputs written (2 of 3 jobs ended by t=10 s)" in err
    assert_partial_after_two_short_jobs(tmp_path / "out" / "run")


def test_a_reply_timeout_also_leaves_partial_outputs(tmp_path, subprocess_env, inputs):
    with sim_against(tmp_path, inputs, "--reply-timeout", "1", stall_at=10) as (sim, _):
        _, err = sim.communicate(timeout=60)
    assert sim.returncode == 1, err
    assert "no reply from the decision process" in err and "partial outputs written" in err
    assert_partial_after_two_short_jobs(tmp_path / "out" / "run")


@pytest.mark.parametrize(
    ("how", "extra", "reason"),
    [
        ("crash", [], "exited with code 5"),
        ("hang", ["--stall-timeout", "2", "--on-stall", "stop"], "stopped by the stall guard"),
    ],
)
def test_a_scheduler_crash_or_stall_leaves_partial_csvs_marked_partial(
    tmp_path, subprocess_env, inputs, how, extra, reason
):
    """`timewarp simulate`: the scheduler dies (or blocks where the broker cannot see) at
    t=50 s; jobs 1 and 2 ended at 10 s, job 3 was running. An earlier run's outputs in the
    directory do not survive."""
    platform, workload = inputs
    platform = write_platform(tmp_path / "p2.xml", 2, 2)  # job 3 runs beside the others
    out = tmp_path / "out"
    out.mkdir()
    (out / "out_jobs.csv").write_text("stale,from,an,earlier,run\n")
    r = run_simulate(
        out, subprocess_env,
        f"python tests/programs/crash_later_scheduler.py --after 50 --how {how}"
        " --scheduler-name default",
        platform, workload, *extra, timeout=120,
    )  # fmt: skip
    assert r.returncode == 1, r.stderr[-3000:]
    assert reason in r.stderr
    assert "PARTIAL outputs" in r.stderr
    rows = read(out / "out_jobs.csv")
    assert [(row["job_id"], row["finish_time"]) for row in rows] == [
        ("1", "10.000000"),
        ("2", "10.000000"),
    ]
    [schedule] = read(out / "out_schedule.csv")
    assert schedule["batsim_version"].endswith(PARTIAL_SUFFIX)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["ok"] is False and manifest["outputs"] == "partial"
    assert manifest["figures"]["outputs"] == "partial" and manifest["figures"]["nb_jobs"] == 2
    assert "partial outputs written" in (out / "simulator.log").read_text()


def test_a_complete_run_says_complete(tmp_path, subprocess_env, inputs):
    platform, workload = inputs
    out = tmp_path / "out"
    r = run_simulate(
        out, subprocess_env, "python tests/programs/tiny_scheduler.py --scheduler-name default",
        platform, workload, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads((out / "manifest.json").read_text())["outputs"] == "complete"
    [schedule] = read(out / "out_schedule.csv")
    assert not schedule["batsim_version"].endswith(PARTIAL_SUFFIX)
    assert "PARTIAL" not in r.stderr
    assert len(read(out / "out_jobs.csv")) == 3


def test_a_deadlock_leaves_partial_outputs_too(tmp_path, subprocess_env, inputs):
    """A decision process that starts job 1 only: once it ends, nothing can happen."""

    def only_job_1(message):
        events = [
            p.Event(message.now, p.ExecuteJob("w0!1", p.ProcSet(0)))
            for e in message.events
            if isinstance(e.data, p.JobSubmitted) and e.data.job_id == "w0!1"
        ]
        return p.Message(message.now, events)

    with sim_against(tmp_path, inputs, stall_at=float("inf"), decide=only_job_1) as (sim, _):
        _, err = sim.communicate(timeout=60)
    assert sim.returncode == 1, err
    assert "deadlock" in err and "partial outputs written (1 of 3 jobs ended by t=10 s)" in err
    rows = read(tmp_path / "out" / "run_jobs.csv")
    assert [(r["job_id"], r["final_state"]) for r in rows] == [("1", "COMPLETED_SUCCESSFULLY")]
