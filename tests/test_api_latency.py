"""API latency in virtual time (issue 19, class 2): a busy-polling scheduler is charged
virtual time per request after a threshold counted in requests, and says so; the stall
guard catches traffic without progress; ``--api-latency`` charges every request."""

from __future__ import annotations

import json

import pytest
from simrun import (
    ROOT,
    delay_profiles,
    one_core_jobs,
    placements,
    run_simulate,
    run_twice,
    write_inputs,
)
from test_launch_commands import PROFILES as STEADY_PROFILES

from simulator.testing import write_platform, write_workload

BUSY = "python tests/programs/busy_poll_binder.py"
JOBS = one_core_jobs((0, "j"), (0, "j"), (3, "j"))
PROFILES = delay_profiles(j=10)


@pytest.fixture
def inputs(tmp_path):
    return write_inputs(tmp_path, JOBS, PROFILES)


def test_a_busy_poller_is_charged_per_request_and_the_summary_says_so(
    tmp_path, subprocess_env, inputs
):
    """It never sleeps: without the charge virtual time would stand still at 0 forever.
    After 200 requests without a wait each request costs 250 ms: list, list, list, bind —
    the first binding comes at 1 s, the next 250 ms later; job 3 waits for a node."""
    platform, workload = inputs
    out, r = run_twice(
        tmp_path, subprocess_env, BUSY, platform, workload,
        "--poll-threshold", "200", "--poll-latency", "250ms",
    )  # fmt: skip
    # (real Batsim 4.2.1 places job 3 at 11.25 too: tests/test_batsim_real.py's timing)
    assert placements(out) == {
        "1": ("0", "1.000000", "11.000000"),
        "2": ("1", "1.250000", "11.250000"),
        "3": ("0", "11.250000", "21.250000"),
    }
    assert (
        "timewarp: busy polling: scheduler-0 made 200 API requests at virtual t=0 s without "
        "waiting" in r.stderr
    )
    assert (
        "timewarp simulate: busy polling: scheduler-0 made 200 API requests without waiting "
        "(no sleep, no parked watch) at virtual t=0 s; from then on it was charged for 86 "
        "requests, 21.5 s of simulated time" in r.stderr
    )
    figures = json.loads((out / "manifest.json").read_text())["figures"]["api_latency"]
    assert figures["busy_polling"] == [
        {
            "process": "scheduler-0",
            "since_s": 0.0,
            "charged_requests": 86,
            "charged_s": 21.5,
            "episodes": 1,
        }
    ]
    assert figures["poll_threshold"] == 200 and figures["api_latency_s"] == 0.0


def test_without_the_charge_the_stall_guard_catches_traffic_without_progress(
    tmp_path, subprocess_env, inputs
):
    """--poll-threshold 0 turns the charge off: the poller then talks forever at t=0. Every
    request used to reset the stall guard's clock (a silent hang); now it is reported and
    (here) stopped. Which report comes first depends on the machine (a second without a
    message on a loaded one, or 6 s of traffic without progress): both name the process.
    The traffic rule itself is pinned, timing-free, in test_traffic_is_not_progress."""
    platform, workload = inputs
    r = run_simulate(
        tmp_path / "out", subprocess_env, BUSY, platform, workload,
        "--poll-threshold", "0", "--stall-timeout", "1", "--on-stall", "stop",
    )  # fmt: skip
    assert r.returncode == 1, r.stderr[-3000:]
    assert "stopped by the stall guard" in r.stderr
    assert "timewarp: stall guard: no progress for" in r.stderr
    assert "process 'scheduler-0'" in r.stderr


class _FakeWall:
    """``time`` for the clock service's stall guard: advances only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_traffic_is_not_progress(monkeypatch):
    """A settled process that never goes quiescent while API notifications keep coming
    (each 0.1 s apart on a fake wall clock): the quiet-stall limit is never reached, and
    after 6 stall timeouts of traffic without progress the guard reports it.

    The process is parked in a virtual wait with a socket read the facade keeps feeding
    but that never drains (no io checker: its read counts as busy): each notification may
    have made it quiescent, so each wakes the driver, which judges on the fake clock. (A
    process that *runs* is not re-judged on notifications — only its own message can
    change it — and the driver's own 0.5 s wake-ups judge it on the real clock.)"""
    import io
    import threading

    from broker.clock import stall
    from broker.clock.service import ClockService, ClockStall

    wall = _FakeWall()
    monkeypatch.setattr(stall, "_wall", wall)
    log = io.StringIO()
    with ClockService(stall_timeout=1.0, on_stall="stop", log=log) as clock:
        clock.expect("poller")
        with clock._cond:  # a connected process, never quiescent (no runtime needed)
            proc = clock.registry.procs["poller"]
            proc.identity, proc.settled, proc.gone = b"test", True, False
            proc.busy, proc.io = False, [[1, 1, 0, 0]]  # parked; a read never drained
        stop = threading.Event()
        judged = threading.Semaphore(0)  # the fake wall moves once per judgment: no race
        guard = clock.quiescence._guard
        check = guard.check_locked

        def counted(*args):  # type: ignore[no-untyped-def]
            try:
                return check(*args)
            finally:
                judged.release()

        monkeypatch.setattr(guard, "check_locked", counted)

        def chatter() -> None:
            while not stop.is_set():
                if judged.acquire(timeout=0.05):
                    wall.now += 0.1
                    clock.notify()
                elif wall.now - guard._last_progress >= 6.0:
                    wall.now += 0.5  # reported: the guard waits for stacks on this clock

        thread = threading.Thread(target=chatter, daemon=True)
        thread.start()
        try:
            with pytest.raises(ClockStall) as stalled:
                clock.wait_quiescent()
        finally:
            stop.set()
            thread.join(10)
    report = str(stalled.value)
    assert "no progress for 6 s of wall time while generating traffic" in report
    assert "process 'poller'" in report


def test_api_latency_charges_every_request(tmp_path, subprocess_env):
    """The polling scheduler of test_launch_commands (a second between rounds; 4 requests
    a round at most) with --api-latency 100ms: every list and binding takes 100 ms."""
    platform = write_platform(tmp_path / "p.xml", 3, 1)
    jobs = [
        {"id": "1", "subtime": 0, "res": 1, "profile": "short"},
        {"id": "2", "subtime": 0, "res": 1, "profile": "short"},
        {"id": "3", "subtime": 0, "res": 1, "profile": "short"},
        {"id": "4", "subtime": 5, "res": 1, "profile": "long"},
    ]
    workload = write_workload(tmp_path / "w.json", jobs, STEADY_PROFILES)
    out, r = run_twice(
        tmp_path, subprocess_env, "env PYTHONPATH=deps python sched.py", platform, workload,
        "--api-latency", "100ms", cwd=ROOT / "tests" / "programs" / "with_deps",
    )  # fmt: skip
    # A response is decided when its request arrives and delivered 100 ms later. Round 1:
    # list nodes at t=0 (answered at 0.1: the simulation's first pods arrive meanwhile),
    # list pods at 0.1 (answered at 0.2, three pending), bindings at 0.2, 0.3, 0.4 (each pod
    # starts when its binding arrives), answered at 0.5; then rounds of two lists and a
    # second of sleep (1.2 s) from 1.5 on: the one at 11.1 binds the long job at 11.3
    assert placements(out) == {
        "1": ("0", "0.200000", "10.200000"),
        "2": ("1", "0.300000", "10.300000"),
        "3": ("2", "0.400000", "10.400000"),
        "4": ("0", "11.300000", "31.300000"),
    }
    assert "busy polling" not in r.stderr


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--api-latency", "10"], "--api-latency: expected a duration with a unit"),
        (["--poll-latency=-1s"], "--poll-latency: expected a duration"),
        (["--poll-threshold", "many"], "--poll-threshold: expected a whole number"),
        (["--poll-latency", "0"], "--poll-latency 0 would let a busy-polling process"),
        (["--mode", "lockstep", "--api-latency", "5ms"], "only apply in deterministic mode"),
    ],
)
def test_bad_latency_options_are_refused(tmp_path, subprocess_env, inputs, extra, message):
    platform, workload = inputs
    r = run_simulate(tmp_path / "o", subprocess_env, BUSY, platform, workload, *extra)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr
