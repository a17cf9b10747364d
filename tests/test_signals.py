"""Stopping from outside never loses outputs (issue 15 items 5 and 6, issue 17 item 10):
the first SIGINT/SIGTERM stops the run, a second one — Ctrl-C twice, or `timeout`, which
signals the child and then its whole process group — is noted while the clean-up runs
to its end: manifest, partial CSVs and summary written, temporary folders removed, exit
128 + the first signal, in every command that runs something (simulate, sim, run,
sweep)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from simulator.testing import write_platform, write_workload

ROOT = Path(__file__).resolve().parent.parent
POLLER = "python tests/programs/polling_scheduler.py --interval 5"
JOBS = [
    {"id": "1", "subtime": 0, "res": 1, "profile": "short"},
    {"id": "2", "subtime": 0, "res": 1, "profile": "short"},
    {"id": "3", "subtime": 0, "res": 1, "profile": "endless"},  # keeps the run going
]
PROFILES = {
    "short": {"type": "delay", "delay": 10, "cpu": "1", "scheduler": "default-scheduler"},
    "endless": {"type": "delay", "delay": 10**7, "cpu": "1", "scheduler": "default-scheduler"},
}


def wait_for(predicate, what: str, timeout: float = 120.0) -> None:
    """Poll a file-system condition with a bound (a process outside this one: there is
    nothing to wait on but its files)."""
    deadline = time.monotonic() + timeout
    done = threading.Event()
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        done.wait(0.1)


def own_tmpdir(tmp_path: Path, env: dict) -> tuple[Path, dict]:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    return tmp, {**env, "TMPDIR": str(tmp)}


def send(
    proc: subprocess.Popen, first: int, second: int, how: str, gate: Path | None = None
) -> None:
    """The first signal, then the second: at once to the whole group (what `timeout -s
    SIG` does), or to the child alone once the clean-up is known to be under way — the
    scheduler started with ``--stop-gate gate`` made ``gate.stopping`` on the SIGTERM that
    ends the run and holds the clean-up until ``gate`` exists, whatever the machine's
    speed."""
    os.kill(proc.pid, first)
    if how == "group":
        os.killpg(proc.pid, second)
    else:
        assert gate is not None, "a second signal during the clean-up needs a gate"
        stopping = gate.with_name(gate.name + ".stopping")
        wait_for(stopping.exists, "the scheduler's clean-up to begin", timeout=60)
        os.kill(proc.pid, second)
    if gate is not None:
        gate.touch()


@pytest.mark.parametrize(
    ("first", "second", "how"),
    [
        (signal.SIGINT, signal.SIGINT, "twice"),
        (signal.SIGTERM, signal.SIGTERM, "group"),
        (signal.SIGTERM, signal.SIGINT, "twice"),
    ],
    ids=["ctrl-c-twice", "timeout-sigterm", "sigterm-then-ctrl-c"],
)
def test_simulate_keeps_its_outputs_through_a_second_signal(
    tmp_path, subprocess_env, first, second, how
):
    platform = write_platform(tmp_path / "p.xml", 2, 1)
    workload = write_workload(tmp_path / "w.json", JOBS, PROFILES)
    out = tmp_path / "out"
    tmp, env = own_tmpdir(tmp_path, subprocess_env)
    gate = tmp_path / "gate"
    proc = subprocess.Popen(
        [sys.executable, "-m", "timewarp", "simulate", "--no-plots", "--scheduler",
         f"{POLLER} --stop-gate {gate}",
         "-p", str(platform), "-w", str(workload), "-o", str(out)],
        cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        log = out / "scheduler-0.log"  # cycle 6 at t=25 s: jobs 1 and 2 ended at 15 s
        wait_for(lambda: log.exists() and "cycle 6:" in log.read_text(), "the 6th cycle")
        send(proc, first, second, how, gate)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + first, err
    if how != "group":  # back to back, the kernel may merge two of one signal into one
        assert f"{signal.Signals(second).name} noted; finishing the clean-up" in err
    assert "PARTIAL outputs" in err  # the summary
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["ok"] is False and manifest["outputs"] == "partial"
    assert manifest["reason"] == f"interrupted by {signal.Signals(first).name}"
    rows = (out / "out_jobs.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["1", "2"]
    assert not list(tmp.iterdir()), "temporary folders left behind"
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_run_standalone_passes_the_signal_on_and_exits_128_plus_it(tmp_path, subprocess_env):
    prog = tmp_path / "prog.py"
    prog.write_text("import time\nprint('started', flush=True)\nwhile True:\n    time.sleep(1)\n")
    tmp, env = own_tmpdir(tmp_path, subprocess_env)
    proc = subprocess.Popen(
        [sys.executable, "-m", "timewarp", "run", "--standalone", "-q", "--", "python",
         str(prog)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        assert proc.stdout.readline().strip() == "started"
        send(proc, signal.SIGTERM, signal.SIGTERM, "group")
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    assert "interrupted by SIGTERM" in err
    assert not list(tmp.iterdir()), "temporary folders left behind"


def test_a_daemon_a_scheduler_started_with_setsid_does_not_outlive_the_run(
    tmp_path, subprocess_env
):
    """Killing the scheduler's process group is not enough: a daemon (fork, setsid, fork)
    is in another session; the run's environment tag finds it (issue 17 item 15)."""
    from simrun import run_simulate

    platform = write_platform(tmp_path / "p.xml", 2, 1)
    jobs = [{"id": "1", "subtime": 0, "res": 1, "profile": "short"}]
    short = {"short": {**PROFILES["short"], "scheduler": "default"}}
    workload = write_workload(tmp_path / "w.json", jobs, short)
    pidfile = tmp_path / "daemon.pid"
    r = run_simulate(
        tmp_path / "out", subprocess_env,
        f"python tests/programs/daemonizing_scheduler.py --pidfile {pidfile}"
        " --scheduler-name default",
        platform, workload, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    pid = int(pidfile.read_text())
    wait_for(lambda: not alive(pid), f"the daemon {pid} to be gone", timeout=30)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return state[state.rfind(b")") + 2 :][:1] != b"Z"


def test_sweep_writes_its_tables_through_a_second_signal(tmp_path, subprocess_env):
    """`timeout -s TERM` on a sweep: the signal reaches the sweep and, through the process
    group, its Dask workers; the sweep still writes runs.csv and summary.csv and exits 143."""
    pytest.importorskip("dask.distributed")
    import yaml

    platform = write_platform(tmp_path / "p.xml", 2, 1)
    workload = write_workload(tmp_path / "w.json", JOBS, PROFILES)
    spec = tmp_path / "sweep.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "root": str(ROOT),
                "timeout": 600,
                "schedulers": {"poller": POLLER},
                "platforms": {"p": str(platform)},
                "workloads": {"w": str(workload)},
                "modes": {"deterministic": {}},
            }
        )
    )
    results = tmp_path / "results"
    tmp, env = own_tmpdir(tmp_path, subprocess_env)
    proc = subprocess.Popen(
        [sys.executable, "-m", "timewarp", "sweep", str(spec), "-o", str(results),
         "--workers", "1", "--no-plots"],
        cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:

        def running() -> bool:
            logs = list(results.glob("runs/*/scheduler-0.log"))
            return bool(logs) and "cycle 2:" in logs[0].read_text()

        wait_for(running, "the run's second scheduling cycle", timeout=240)
        send(proc, signal.SIGTERM, signal.SIGTERM, "group")
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 143, err[-3000:]
    assert "interrupted; finished runs are kept" in err
    assert "0 ok, 0 failed, 1 not run" in err
    assert (results / "runs.csv").exists() and (results / "summary.csv").exists()
    # Dask's scratch space (dask-scratch-space/, its lock files) was left in TMPDIR by
    # every sweep, stopped or not: it is now a folder of the sweep's, removed with it
    assert not list(tmp.iterdir()), "temporary folders left behind"
