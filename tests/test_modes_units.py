"""Lockstep and realtime modes, piece by piece: durations, parameters, the lockstep cycle
driven message by message (no simulator, no scheduler process), the scaled wall clock,
and the clock service's free-running ``now``."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from procset import ProcSet

from broker.clock.service import ClockService, FacadeClock
from broker.drivers.lockstep import (
    LockstepBroker,
    LockstepParams,
    SchedulerDeadlock,
    parse_duration_ns,
)
from broker.drivers.realtime import ScaledWallClock
from broker.facade import Facade
from broker.processes.launcher import Launcher
from simulator import protocol as p
from simulator.testing import simulation_begins

MS = 10**6


# --------------------------------------------------------------------------- durations
@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("20ms", 20 * MS),
        ("0ms", 0),
        ("0", 0),
        ("5s", 5 * 10**9),
        ("1m30s", 90 * 10**9),
        ("1.5s", 1_500 * MS),
        ("250us", 250_000),
        ("2h", 7200 * 10**9),
    ],
)
def test_go_style_durations_parse(text, ns):
    assert parse_duration_ns(text) == ns


@pytest.mark.parametrize("text", ["20", "", "ms", "5 s", "-1s", "1d", "20msx"])
def test_durations_without_a_valid_unit_are_refused_with_the_expected_form(text):
    with pytest.raises(ValueError, match="like 20ms"):
        parse_duration_ns(text)


@given(
    st.lists(
        st.tuples(st.integers(0, 10_000), st.sampled_from(["ns", "us", "ms", "s", "m", "h"])),
        min_size=1,
        max_size=4,
    )
)
def test_a_duration_is_the_sum_of_its_parts(parts):
    unit_ns = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
    text = "".join(f"{n}{u}" for n, u in parts)
    assert parse_duration_ns(text) == sum(n * unit_ns[u] for n, u in parts)


def test_parameters_are_checked_together():
    with pytest.raises(ValueError, match="--max-simulation-timestep must be at least"):
        LockstepParams(base_timestep_ns=200 * MS, max_timestep_ns=100 * MS)
    with pytest.raises(ValueError, match="--backoff-multiplier must be a number >= 1"):
        LockstepParams(backoff_multiplier=0.5)
    with pytest.raises(ValueError, match="--base-simulation-timestep must be positive"):
        LockstepParams(base_timestep_ns=0)


# ------------------------------------------------------------------ lockstep cycle
PLATFORM = [
    {"id": i, "name": f"node{i}", "state": "idle", "properties": {"core": "1"}} for i in range(2)
]


def _begins() -> p.SimulationBegins:
    return simulation_begins(
        PLATFORM, {"d": {"type": "delay", "delay": 10, "cpu": "1"}}, sharing=True
    )


def _submit(job_id: str) -> p.JobSubmitted:
    return p.JobSubmitted(job_id, {"id": job_id, "subtime": 0, "res": 1, "profile": "d"})


class Rig:
    """A lockstep broker with a real clock service and facade but no processes: the
    tests play Batsim (``send``) and the scheduler (``bind``)."""

    def __init__(self, tmp_path: Path, params: LockstepParams) -> None:
        self.clock = ClockService(mode="lockstep")
        self.facade = Facade(FacadeClock(self.clock)).start()
        launcher = Launcher(clock=self.clock, facade=self.facade, out_dir=tmp_path)
        self.broker = LockstepBroker(
            params=params,
            endpoint="tcp://127.0.0.1:*",
            clock=self.clock,
            facade=self.facade,
            launcher=launcher,
        )

    def send(self, now: float, *payloads) -> p.Message:  # type: ignore[no-untyped-def]
        return self.broker.step(p.Message(now, [p.Event(now, x) for x in payloads]))

    def bind(self, job_id: str, node: str) -> None:
        jp = self.broker.cluster.jobs[job_id]
        self.facade.hooks.on_bind(jp.namespace, jp.name, node)
        self.facade.store.bind(jp.namespace, jp.name, node)

    def close(self) -> None:
        self.broker.close()
        self.facade.stop()
        self.clock.close()


@pytest.fixture
def rig(tmp_path, request):
    params = getattr(request, "param", None) or LockstepParams()
    r = Rig(tmp_path, params)
    yield r
    r.close()


def _calls(reply: p.Message) -> list[float]:
    return [e.data.timestamp for e in reply.events if isinstance(e.data, p.CallMeLater)]


def _kinds(reply: p.Message) -> list[str]:
    return [type(e.data).__name__ for e in reply.events]


def test_without_decisions_the_timestep_backs_off_up_to_the_maximum(rig):
    rig.broker.params = LockstepParams(
        timeout_ns=1 * MS, base_timestep_ns=100 * MS, max_timestep_ns=1000 * MS
    )
    rig.broker.timestep_ns = 100 * MS
    reply = rig.send(0.0, _begins(), _submit("w0!1"))
    steps = []
    for _ in range(6):
        (call,) = _calls(reply)
        steps.append(round(call - reply.now, 6))
        reply = rig.send(call, p.RequestedCall())
    assert steps == [0.2, 0.4, 0.8, 1.0, 1.0, 1.0]


def test_a_window_lasts_the_timeout_and_time_follows_the_wall_clock_meanwhile(rig):
    rig.broker.params = LockstepParams(timeout_ns=150 * MS)
    start = time.perf_counter()
    reply = rig.send(10.0, _begins())
    wall = time.perf_counter() - start
    assert wall >= 0.15
    assert 10.15 <= reply.now <= 10.0 + wall + 1e-6


def test_a_decision_closes_the_window_at_once_is_stamped_and_resets_the_timestep(rig):
    rig.broker.params = LockstepParams(timeout_ns=5000 * MS)
    rig.broker.timestep_ns = 3200 * MS
    threading.Timer(0.05, rig.bind, args=("w0!1", "node1")).start()
    start = time.perf_counter()
    reply = rig.send(0.0, _begins(), _submit("w0!1"))
    assert time.perf_counter() - start < 2.5  # far less than the 5 s timeout
    assert _kinds(reply) == ["ExecuteJob", "CallMeLater"]
    execute = reply.events[0]
    assert execute.data.job_id == "w0!1" and execute.data.alloc == ProcSet(1)
    # stamped when the decision came: ~0.05 s into the window (the timer started a
    # little before the window opened), and the window closed right after it
    assert 0 < execute.timestamp <= reply.now < 2.5
    assert _calls(reply) == [pytest.approx(reply.now + 0.1)]  # back to the base timestep


def test_min_delay_keeps_the_window_open_after_a_decision(rig):
    rig.broker.params = LockstepParams(timeout_ns=0, min_delay_ns=120 * MS)
    rig.send(0.0, _begins(), _submit("w0!1"))
    rig.bind("w0!1", "node0")
    start = time.perf_counter()
    reply = rig.send(1.0, p.RequestedCall())
    assert time.perf_counter() - start >= 0.12
    assert _kinds(reply)[0] == "ExecuteJob" and reply.now >= 1.12


def test_fast_forward_asks_no_timestep_while_no_job_is_pending(rig):
    rig.broker.params = LockstepParams(timeout_ns=1 * MS, fast_forward_on_no_pending_jobs=True)
    reply = rig.send(0.0, _begins(), _submit("w0!1"))
    assert len(_calls(reply)) == 1  # a pending job: keep calling back
    rig.bind("w0!1", "node0")
    reply = rig.send(reply.now + 0.05, p.RequestedCall())
    assert _kinds(reply) == ["ExecuteJob"]  # running, nothing pending: Batsim may jump


def test_timers_get_a_call_back_at_their_exact_deadline_and_fire_there(rig):
    rig.broker.params = LockstepParams(timeout_ns=1 * MS, fast_forward_on_no_pending_jobs=True)
    seen = []
    rig.clock.call_at(7_250_000_000, lambda: seen.append(rig.clock.now_ns))
    reply = rig.send(0.0, _begins())
    assert _calls(reply) == [7.25]
    reply = rig.send(7.25, p.RequestedCall())
    assert seen == [7_250_000_000]


def test_a_requested_call_printed_to_the_microsecond_clears_its_call(rig):
    """Batsim prints times to the microsecond, half the time rounding down (a call for
    0.1023454321 comes back at 0.102345): the call it answers must not stay listed, or
    every later CALL_ME_LATER was suppressed until Batsim had an event of its own (nodes
    sat idle for minutes of simulated time)."""
    rig.broker.params = LockstepParams(timeout_ns=1 * MS)
    reply = rig.send(0.0, _begins(), _submit("w0!1"))
    rounded_down = 0
    while rounded_down < 3:
        (call,) = _calls(reply)
        printed = p.wire_time(call)
        rounded_down += printed < call
        reply = rig.send(printed, p.RequestedCall())
        assert len(_calls(reply)) == 1, "the next timestep must be asked for"


def test_deadlock_detection_fails_when_pending_jobs_get_no_decision(rig):
    rig.broker.params = LockstepParams(
        timeout_ns=1 * MS, detect_scheduler_deadlock=True, scheduler_crash_timeout_ns=100 * MS
    )
    reply = rig.send(0.0, _begins(), _submit("w0!1"))
    deadline = time.perf_counter() + 5
    with pytest.raises(SchedulerDeadlock, match=r"1 job\(s\) pending and none running"):
        while time.perf_counter() < deadline:
            reply = rig.send(_calls(reply)[0], p.RequestedCall())


def test_without_deadlock_detection_a_silent_scheduler_is_waited_for(rig):
    rig.broker.params = LockstepParams(timeout_ns=1 * MS, scheduler_crash_timeout_ns=1 * MS)
    reply = rig.send(0.0, _begins(), _submit("w0!1"))
    for _ in range(20):
        reply = rig.send(_calls(reply)[0], p.RequestedCall())


# ----------------------------------------------------------------- clock service
def test_free_running_now_follows_its_source_and_never_goes_back():
    with ClockService(mode="lockstep") as clock:
        source = [5_000]
        clock.run_free(lambda: source[0])
        assert clock.now_ns == 5_000
        source[0] = 9_000
        assert clock.now_ns == 9_000
        source[0] = 7_000  # a source that steps back does not move now back
        assert clock.now_ns == 9_000
        assert clock.freeze() == 9_000
        source[0] = 50_000
        assert clock.now_ns == 9_000  # frozen
        clock.advance_to(9_000)
        assert clock.now_ns == 9_000


# -------------------------------------------------------------------- realtime clock
def test_scaled_wall_clock_stands_still_until_started_then_runs_speed_times_faster():
    clock = ScaledWallClock(speed=50.0)
    try:
        assert clock.now_ns() == 0
        fired = threading.Event()
        when = []
        clock.call_at(2_000_000_000, lambda: (when.append(clock.now_ns()), fired.set()))
        assert not fired.wait(0.1)  # not started: no time passes
        start = time.perf_counter()
        clock.start()
        assert fired.wait(5)
        wall = time.perf_counter() - start
        assert when[0] >= 2_000_000_000
        assert wall >= 2.0 / 50
    finally:
        clock.close()


def test_scaled_wall_clock_fires_in_deadline_order_and_skips_cancelled():
    clock = ScaledWallClock(speed=100.0)
    try:
        order = []
        done = threading.Event()
        clock.call_at(3_000_000_000, lambda: (order.append(3), done.set()))
        clock.call_at(1_000_000_000, lambda: order.append(1))
        clock.call_at(2_000_000_000, lambda: order.append(2)).cancel()
        clock.start()
        assert done.wait(5)
        assert order == [1, 3]
    finally:
        clock.close()


def test_speed_must_be_positive():
    with pytest.raises(ValueError, match="speed must be a positive number"):
        ScaledWallClock(speed=0)


# ------------------------------------------------- free-mode runtime under lockstep
FREE_PROGRAM = """
import threading, time
cond = threading.Condition()
t0 = time.monotonic()
with cond:
    cond.wait(0.25)   # a timed wait: its deadline needs now(), a round trip in free mode
print("waited", round(time.monotonic() - t0, 3), flush=True)
"""


def test_a_timed_condition_wait_works_in_free_mode_with_time_following_the_wall(
    tmp_path, subprocess_env
):
    import os
    import signal
    import subprocess
    import sys

    from timewarp.wire import clockproto

    program = tmp_path / "prog.py"
    program.write_text(FREE_PROGRAM)
    with ClockService(mode="lockstep") as clock:
        env = dict(subprocess_env)
        env[clockproto.ENV_TOKEN] = clock.expect("p")
        env[clockproto.ENV_ENDPOINT] = clock.endpoint
        env[clockproto.ENV_NAME] = "p"
        env[clockproto.ENV_BROKER_PID] = str(os.getpid())
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "timewarp",
                "run",
                "--name",
                "p",
                "--",
                sys.executable,
                str(program),
            ],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,  # the program runs in a child of `timewarp run`
        )
        try:
            start = time.perf_counter()
            clock.run_free(lambda: round((time.perf_counter() - start) * 1e9))
            driven = 0
            while proc.poll() is None and time.perf_counter() - start < 30:
                target = round((time.perf_counter() - start) * 1e9)
                deadline = clock.next_deadline()
                if deadline is not None and deadline <= target:
                    if deadline > driven:
                        clock.advance_to(deadline)
                        driven = deadline
                    clock.release_due(wait=False)
                    continue
                if target > driven:
                    try:
                        clock.advance_to(target)
                        driven = target
                    except ValueError:
                        continue  # a timer just came in before target: fire it first
                threading.Event().wait(0.001)
            out, _ = proc.communicate(timeout=10)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # no orphan, even after a failure
            except ProcessLookupError:
                pass
            proc.wait()
    assert proc.returncode == 0
    waited = float(out.split()[-1])
    assert 0.25 <= waited < 5  # the timeout fired at its deadline, not never
