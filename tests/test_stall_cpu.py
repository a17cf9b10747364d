"""The stall guard and processes that compute: a process out of its virtual waits that
keeps using CPU (importing a large client, a long computation, on a loaded machine) is
slow, not stuck. Before, the guard judged it stuck after ``--stall-timeout`` seconds of
wall time and advanced anyway — a non-deterministic advance that only the machine's load
caused (found as a flaky test: a scheduler started by hand imported ``CoreV1Api`` for more
than 10 s at load 15–20). It now gets the traffic limit (6 × the timeout) while it keeps
computing; one that stops computing, or spins for ever, is still reported.

The guard's wall clock and the processes' CPU are replaced by fakes: the tests decide
exactly what the guard sees, whatever the machine's load."""

from __future__ import annotations

import io
import os
import threading

import pytest

from broker.clock import stall
from broker.clock.registry import ProcessState, Registry

TIMEOUT_S = 10.0


class FakeWall:
    def __init__(self) -> None:
        self.t = 1000.0

    def monotonic(self) -> float:
        return self.t


class FakeTransport:
    """The clock thread's side: a stack dump is answered at once."""

    def __init__(self, procs: list[ProcessState]) -> None:
        self.procs = procs

    def give_back_locked(self) -> None:
        pass

    def write_locked(self, identity: bytes, frame: object) -> None:
        for proc in self.procs:
            if proc.identity == identity:
                proc.stacks = f'  File "{proc.name}.py", line 1, in compute'


class Judge:
    def quiescent_locked(self, proc: ProcessState) -> bool:
        return False

    def why_busy_locked(self, proc: ProcessState) -> list[str]:
        return ["running"]


@pytest.fixture
def world(monkeypatch):
    wall = FakeWall()
    cpu: dict[int, float | None] = {}
    monkeypatch.setattr(stall, "_wall", wall)
    monkeypatch.setattr(stall, "cpu_seconds", lambda pid: cpu.get(pid))
    cond = threading.Condition()
    proc = ProcessState("sched", identity=b"sched", pid=4321, busy=True, settled=True)
    guard = stall.StallGuard(
        cond,
        Registry(cond),
        FakeTransport([proc]),  # type: ignore[arg-type]
        stall_timeout=TIMEOUT_S,
        on_stall="stop",
        log=io.StringIO(),
    )
    return wall, cpu, proc, guard, cond


def _run(world, seconds: float, cpu_per_s: float | None) -> str | None:
    """Let ``seconds`` of wall time pass in the driver's checks (each as long as the
    guard asks, at most 0.5 s), the process using ``cpu_per_s`` of CPU per second (None:
    not readable). Returns the stall report if the guard stopped the run."""
    wall, cpu, proc, guard, cond = world
    end = wall.t + seconds
    with cond:
        while True:  # (a check at the end of the time too)
            try:
                wait = guard.check_locked([proc], Judge(), 7_000_000_000)
            except stall.ClockStall as exc:
                return str(exc)
            assert wait is not None and wait > 0
            if wall.t >= end:
                break
            step = min(wait, end - wall.t)
            wall.t += step
            if cpu_per_s is None:
                cpu[proc.pid] = None
            else:
                cpu[proc.pid] = (cpu.get(proc.pid) or 0.0) + cpu_per_s * step
    return None


def test_a_process_that_keeps_computing_past_the_timeout_is_not_called_stuck(world):
    """At load 20 on 2 CPUs a process gets a tenth of a CPU: its import or computation
    takes 10× its CPU in wall time. Silent for 5 × the timeout but computing: no report."""
    world[1][4321] = 0.0
    assert _run(world, 5 * TIMEOUT_S, cpu_per_s=0.1) is None
    assert world[3].nondeterministic_advances == 0


def test_a_process_that_spins_for_ever_is_reported_at_the_longer_limit(world):
    world[1][4321] = 0.0
    assert _run(world, 5.9 * TIMEOUT_S, cpu_per_s=1.0) is None
    report = _run(world, 1.0, cpu_per_s=1.0)
    assert report is not None
    assert "no virtual wait for 60 s of wall time, the processes using CPU all along" in report
    assert "'sched' (pid 4321)" in report and "in compute" in report
    assert world[3].nondeterministic_advances == 1


@pytest.mark.parametrize("cpu_per_s", [0.0, None], ids=["no CPU used", "CPU not readable"])
def test_a_process_stuck_without_computing_is_reported_at_the_timeout(world, cpu_per_s):
    """Stuck in a real wait (a real sleep, a lock, a socket): no CPU used. Reported at
    the stall timeout as before — at most half a timeout later, the time to judge."""
    world[1][4321] = 0.0
    assert _run(world, TIMEOUT_S - 0.01, cpu_per_s) is None
    report = _run(world, TIMEOUT_S / 2 + 0.5, cpu_per_s)
    assert report is not None and f"no progress for {TIMEOUT_S:g} s of wall time" in report


def test_a_process_that_stops_computing_is_reported_at_the_next_judgement(world):
    world[1][4321] = 0.0
    assert _run(world, 2 * TIMEOUT_S, cpu_per_s=0.5) is None  # computing: past the timeout
    report = _run(world, TIMEOUT_S / 2 + 0.5, cpu_per_s=0.0)  # then blocks in a real wait
    assert report is not None and "no progress for" in report


def test_activity_starts_the_judgement_again(world):
    """Computing, then a clock message (the process waited or asked something), then
    stuck: judged on the new stretch alone, not on the CPU used before the message."""
    wall, cpu, proc, guard, cond = world
    cpu[4321] = 0.0
    assert _run(world, 2 * TIMEOUT_S, cpu_per_s=1.0) is None
    with cond:
        guard.traffic_locked(0)
    assert _run(world, TIMEOUT_S - 0.01, cpu_per_s=0.0) is None
    report = _run(world, TIMEOUT_S / 2 + 0.5, cpu_per_s=0.0)
    assert report is not None and "no progress for" in report


def test_cpu_seconds_reads_this_process_and_knows_a_missing_one():
    spent = stall.cpu_seconds(os.getpid())
    assert spent is not None and spent > 0
    assert stall.cpu_seconds(None) is None
    assert stall.cpu_seconds(2**22 + 12345) is None  # above the kernel's pid_max
