"""A server inside the program does not stall the run (issue 25, item 4): a thread waiting
only on server sockets (a listening socket, a connection accepted from one) is idle in
the quiescence ledger, its own timeout is virtual, and a real connection that wakes it
is a non-deterministic advance reported with its cause (timewarp/_core/servers.py).

Each run uses `--on-stall stop`: a server thread counted busy fails the test (within the
stall timeout) instead of passing after a non-deterministic advance. The timeout is 60 s,
the stall guard's start-up grace, not a few seconds: 5 s was a wall-clock bound a loaded
machine reaches — with the guard scaled to a 5x slower machine, both --check-determinism
tests below were stopped by it, the stacks taken right after showing every thread
waiting (the program was slow, not stuck)."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

from simrun import ROOT, placements, run_simulate

from simulator.testing import write_platform, write_workload

STRICT = ("--stall-timeout", "60", "--on-stall", "stop")
PROGRAM = "tests/programs/server_threads.py"


def _standalone(*argv: str) -> list[str]:
    return [sys.executable, "-m", "timewarp", "run", "--standalone", *STRICT, "--", "python",
            PROGRAM, *argv]  # fmt: skip


def test_a_server_threads_polls_never_move_time_and_it_never_holds_the_run(subprocess_env):
    """serve_forever's 0.5 s poll, a bare accept() with a 2 s socket timeout and a thread
    sleeping an hour at a time, nothing connecting; the main thread sleeps 9 s. The polls'
    timeouts are slack: time goes straight to 9 s, where each fires once (17 polls and 4
    accept timeouts if they were ordinary timers). shutdown() then waits for the server
    thread's next poll, which comes at its instant, 9.5 s (without hardening: at the
    hourly sleeper's 3600 s)."""
    r = subprocess.run(
        _standalone("poll"), cwd=ROOT, env=subprocess_env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert "polls: 1, accept timeouts: 1, t=9.0\nshut down at t=9.5\n" in r.stdout, r.stdout
    assert "stall guard" not in r.stderr
    assert "0 non-deterministic advances" in r.stderr


def test_a_slack_timeout_alone_still_comes(subprocess_env):
    """An accept() with a 2 s timeout and nothing else pending: time goes to its deadline
    rather than standing still (a deadlock report)."""
    r = subprocess.run(
        _standalone("alone"), cwd=ROOT, env=subprocess_env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout == "accept timed out at t=2.0\n"
    assert "0 non-deterministic advances" in r.stderr


def _serve_one_request(command: list[str], env: dict) -> tuple[int, str]:
    """Start a program that prints its port, GET / from outside, wait for its end:
    (port, stderr)."""
    proc = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = proc.stdout.readline()  # blocks until the program printed its port
        assert line.startswith("port "), line + proc.stderr.read()
        port = int(line.split()[1])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=60) as response:
            assert response.read() == b"ok\n"
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err[-3000:]
    assert "served" in out
    assert "stall guard" not in err
    return port, err


def test_a_real_connection_wakes_the_server_thread_and_is_reported(subprocess_env):
    port, err = _serve_one_request(_standalone("serve"), subprocess_env)
    assert (
        "non-deterministic advance: 'main' at t=" in err
        and f"input from outside the simulation (listening socket 127.0.0.1:{port}, "
        "thread 'metrics')"
        in err
    ), err


def test_a_real_connection_to_an_event_loops_server_is_reported(subprocess_env):
    command = [sys.executable, "-m", "timewarp", "run", "--standalone", *STRICT, "--",
               "python", "tests/programs/aio_server.py"]  # fmt: skip
    port, err = _serve_one_request(command, subprocess_env)
    assert f"input from outside the simulation (listening socket 127.0.0.1:{port}, " in err, err


def _inputs(tmp_path):
    """A sparse workload: 8 jobs over 7 minutes of simulated time."""
    platform = write_platform(tmp_path / "p.xml", 4, cores=2)
    profile = {"type": "delay", "delay": 30, "cpu": "1", "scheduler": "default"}
    jobs = [{"id": str(i), "subtime": 60 * i, "res": 1, "profile": "d"} for i in range(8)]
    return platform, write_workload(tmp_path / "w.json", jobs, {"d": profile})


def _check_determinism(tmp_path, env, server: str):
    platform, workload = _inputs(tmp_path)
    scheduler = (
        f"python tests/programs/metrics_scheduler.py --server {server} --scheduler-name default"
    )
    r = run_simulate(
        tmp_path / "out", env, scheduler, platform, workload, "--check-determinism", *STRICT
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "the two runs wrote the same bytes" in r.stderr
    assert "stall guard" not in r.stderr
    figures = json.loads((tmp_path / "out" / "manifest.json").read_text())["figures"]
    assert figures["nondeterministic_advances"] == 0
    assert "nondeterministic_causes" not in figures
    # the server's 0.5 s polls are slack: they fire when time moves for another reason,
    # never moving it themselves (as ordinary timers: > 900 fires over 7.5 minutes)
    assert figures["simulated_s"] >= 450
    assert figures["timer_fires"] < 150, figures["timer_fires"]
    return placements(tmp_path / "out")


def test_a_prometheus_metrics_thread_leaves_the_run_deterministic(tmp_path, subprocess_env):
    jobs = _check_determinism(tmp_path, subprocess_env, "prometheus")
    assert len(jobs) == 8


def test_an_http_server_thread_leaves_the_run_deterministic(tmp_path, subprocess_env):
    jobs = _check_determinism(tmp_path, subprocess_env, "http")
    assert len(jobs) == 8
