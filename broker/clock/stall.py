"""The stall guard: a hang is never silent.

When some process stays non-quiescent with no clock traffic for ``stall_timeout`` wall
seconds, the guard asks it for its threads' stacks, reports them, and counts a
non-deterministic advance; with ``on_stall="stop"`` it raises :class:`ClockStall`
instead. Traffic is not progress: a process that keeps talking (API requests, clock
messages) while virtual time stands still and nothing changes — no advance, no write to
the cluster (the ``progress_probe``), no process arriving or going — is reported the same
way after ``TRAFFIC_STALL_FACTOR`` times as long. (API polling is normally charged
virtual time long before that: ``broker/drivers/pacing.py``.) The broker's own work is
watched too: rounds of the cluster (controllers, kubelet) that keep doing something at
one virtual instant for as long, in wall time spent in them, are a busy loop of the
broker — reported, naming who kept acting, and the run stops (there is no process to
let go and advance past; :meth:`StallGuard.broker_round`). A process that stays out of
its virtual waits but keeps using CPU (a large import, a long computation on a loaded
machine) is working, not stuck: it gets the traffic limit too before it is reported, so
that a loaded machine does not turn a slow step into a wall-clock decision. Methods
ending in ``_locked`` are called with the clock service's lock held; the others take it.
"""

from __future__ import annotations

import collections
import threading
import time as _wall
from collections.abc import Callable
from typing import Protocol, TextIO

from broker.clock.registry import ProcessState, Registry
from broker.clock.transport import ClockTransport
from timewarp.wire import clockproto, procstat

# A process that never waited yet is starting up (importing a large client can take many
# seconds on a loaded machine): the stall guard gives it at least this long.
STARTUP_GRACE_S = 60.0
# Traffic without progress (requests and clock messages at one virtual instant, nothing
# changing) is a stall too, after this many stall timeouts: a legitimately heavy reader at
# one instant gets a while before it is called stuck (60 s with the default 10 s).
TRAFFIC_STALL_FACTOR = 6


# CPU time a busy process must have used over a judged stretch to count as working (a
# few clock ticks: the kernel accounts CPU in ticks of 1/SC_CLK_TCK s).
WORKING_CPU_S = 0.03


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds of process ``pid`` (all its threads), or None where
    unknown (no /proc, the process gone, a pid of another host)."""
    times = procstat.cpu_times(pid) if pid is not None else None
    return None if times is None else times[0] + times[1]


class ClockStall(RuntimeError):
    """A process stayed busy past the stall guard and the policy is to stop."""


class Judge(Protocol):
    """What the guard asks of quiescence (broker/clock/quiescence.py)."""

    def quiescent_locked(self, proc: ProcessState) -> bool: ...

    def why_busy_locked(self, proc: ProcessState) -> list[str]: ...


class StallGuard:
    """Wall-clock activity and progress, and what is done when neither comes
    (``on_stall``: "advance" or "stop")."""

    def __init__(
        self,
        cond: threading.Condition,
        registry: Registry,
        transport: ClockTransport,
        *,
        stall_timeout: float,
        on_stall: str,
        log: TextIO,
    ) -> None:
        self._cond = cond
        self._registry = registry
        self._transport = transport
        self.stall_timeout = stall_timeout
        self.on_stall = on_stall
        self.log = log
        self.last_activity = _wall.monotonic()
        self._last_progress = self.last_activity
        self._progress_probe: Callable[[], object] | None = None
        self._progress_seen: object = None
        self._traffic = [0, 0]  # clock messages, facade notifications since the last progress
        # figures for reports and benchmarks: every decision wall time made, one line each
        self.nondeterministic_advances = 0
        self.nondeterministic_causes: list[str] = []  # in the manifest and the summary
        self.stall_reports: list[str] = []
        # the broker's own rounds at one virtual instant (see broker_round)
        self._rounds_at: int | None = None
        self._rounds_wall = 0.0
        self._rounds: collections.Counter[str] = collections.Counter()
        # busy processes' CPU seconds at the start of the stretch being judged (see
        # _working_locked): wall time of that start, CPU by process name
        self._cpu_mark_at: float | None = None
        self._cpu_mark: dict[str, float | None] = {}
        self._working: bool | None = None  # their verdict: None until judged

    def count_locked(self, cause: str) -> None:
        """Wall time (or input from outside), not the simulation, decided when something
        happened: a non-deterministic advance; ``cause`` says which, where and when."""
        self.nondeterministic_advances += 1
        self.nondeterministic_causes.append(cause)

    def set_progress_probe(self, probe: Callable[[], object] | None) -> None:
        """``probe()`` (quick, called with the service's lock held) returns a value that
        changes whenever the world the schedulers act on changed (the facade store's
        resource version): a change is progress for the stall guard, mere traffic is not."""
        with self._cond:
            self._progress_probe = probe
            self._progress_seen = probe() if probe is not None else None

    def traffic_locked(self, source: int) -> None:
        """Something was heard: a clock message (``source`` 0) or an API notification (1)."""
        self.last_activity = _wall.monotonic()
        self._traffic[source] += 1

    def progressed_locked(self) -> None:
        self._last_progress = self.last_activity = _wall.monotonic()
        self._traffic = [0, 0]

    def restart_locked(self) -> None:
        """The driver is on to something new: the traffic limit counts from now."""
        self._last_progress = _wall.monotonic()
        self._traffic = [0, 0]

    def broker_round(self, now_ns: int, wall_s: float, actors: list[str]) -> None:
        """The broker did another round of its own work at virtual ``now_ns`` (``wall_s``
        seconds of it; ``actors``: who did something). Rounds that keep coming at one
        instant for ``TRAFFIC_STALL_FACTOR`` × ``stall_timeout`` wall seconds spent in
        them are a busy loop: reported, and :class:`ClockStall` raised whatever
        ``on_stall`` says."""
        with self._cond:
            if now_ns != self._rounds_at:
                self.broker_at_rest_locked()
                self._rounds_at = now_ns
            self._rounds_wall += wall_s
            self._rounds.update(actors or ["(nobody named)"])
            limit = TRAFFIC_STALL_FACTOR * self.stall_timeout
            if self._rounds_wall < limit:
                return
            total = sum(self._rounds.values())
            who = ", ".join(f"{name} ({n} rounds)" for name, n in self._rounds.most_common())
            report = (
                f"timewarp: stall at t={now_ns / 1e9:.9f} s: the broker itself kept working "
                f"at this instant for {self._rounds_wall:.1f} s of wall time ({total} rounds "
                f"that each changed something, time never moving), by: {who}. A controller "
                "that never settles is a bug in it; the run stops here"
            )
            self.stall_reports.append(report)
            self.count_locked(f"stall guard at t={now_ns / 1e9:.9f} s: the broker's own loop")
            self.log.write(report + "\n")
            self.log.flush()
            self.broker_at_rest_locked()
            raise ClockStall(report)

    def broker_at_rest(self) -> None:
        """A round of the broker did nothing: its busy loop, if any, ended."""
        with self._cond:
            self.broker_at_rest_locked()

    def broker_at_rest_locked(self) -> None:
        self._rounds_at = None
        self._rounds_wall = 0.0
        self._rounds.clear()

    def check_locked(self, busy: list[ProcessState], judge: Judge, now_ns: int) -> float | None:
        """``busy`` keep the driver waiting: how long it may wait before asking again, or
        None once a stall was reported (the driver advances anyway)."""
        probe = self._progress_probe
        if probe is not None:
            value = probe()
            if value != self._progress_seen:
                self._progress_seen = value
                self.progressed_locked()
        now = _wall.monotonic()
        idle_for = now - self.last_activity
        limit = self.stall_timeout
        if not all(p.settled for p in busy):
            limit = max(limit, STARTUP_GRACE_S)
        # talking without progress: a longer limit, then the same report
        traffic_limit = max(limit, TRAFFIC_STALL_FACTOR * self.stall_timeout)
        stalled_for = now - self._last_progress
        if idle_for < limit / 2:
            self._forget_cpu_locked()  # (activity since: judge CPU from a fresh start)
        elif self._cpu_mark_at is None:
            self._mark_cpu_locked(busy, now)
        if (
            limit <= idle_for
            and stalled_for < traffic_limit  # (idle_for <= stalled_for)
            and self._working_locked(busy, now) is not False
        ):
            # silent but computing (a large import on a loaded machine), or not judged
            # yet: the longer limit
            return min(0.5, traffic_limit - idle_for, traffic_limit - stalled_for)
        if idle_for >= limit or stalled_for >= traffic_limit:
            if idle_for >= limit and self._working:
                traffic = (idle_for, -1, -1)  # silent, busy on CPU the whole time
            else:
                traffic = None if idle_for >= limit else (stalled_for, *self._traffic)
            self._forget_cpu_locked()
            self._handle_locked(busy, limit, traffic, judge, now_ns)
            return None
        return min(0.5, limit - idle_for, traffic_limit - stalled_for)

    def _forget_cpu_locked(self) -> None:
        self._cpu_mark_at = None
        self._working = None

    def _mark_cpu_locked(self, busy: list[ProcessState], now: float) -> None:
        self._cpu_mark_at = now
        self._cpu_mark = {p.name: cpu_seconds(p.pid) for p in busy if p.connected}

    def _working_locked(self, busy: list[ProcessState], now: float) -> bool | None:
        """Did every busy process use CPU over the last judged stretch (half the stall
        timeout or more, from a mark)? None until a first stretch is long enough. A
        process whose CPU cannot be read, or that never connected, is not known to work."""
        mark_at = self._cpu_mark_at
        if mark_at is None or now - mark_at < self.stall_timeout / 2:
            return self._working
        mark = self._cpu_mark
        working = bool(busy)
        for proc in busy:
            before = mark.get(proc.name)
            after = cpu_seconds(proc.pid) if proc.connected else None
            if before is None or after is None or after - before < WORKING_CPU_S:
                working = False
        self._working = working
        self._mark_cpu_locked(busy, now)
        return working

    def _handle_locked(
        self,
        busy: list[ProcessState],
        limit: float,
        traffic: tuple[float, int, int] | None,
        judge: Judge,
        now_ns: int,
    ) -> None:
        """Report the stuck threads, then advance anyway (or raise :class:`ClockStall`).
        ``traffic``: (seconds, clock messages, API notifications) when the processes kept
        talking without progress rather than fell silent."""
        self._transport.give_back_locked()  # the stacks and reports come through the loop
        self._gather_stacks_locked(busy)
        report = _report(busy, limit, traffic, judge.why_busy_locked, now_ns)
        self.stall_reports.append(report)
        self.count_locked(
            f"stall guard at t={now_ns / 1e9:.9f} s: "
            + ", ".join(repr(p.name) for p in busy)
            + " not in a virtual wait"
        )
        self.log.write(report + "\n")
        self.log.flush()
        self.progressed_locked()
        if self.on_stall == "stop":
            raise ClockStall(report)
        self.log.write("timewarp: advancing anyway (counted as a non-deterministic advance)\n")
        # The runtime detached the stuck thread from its baton; if that made the process
        # idle we go on normally, otherwise force this one advance.
        give_up = _wall.monotonic() + 1.0
        while _wall.monotonic() < give_up:
            if all(judge.quiescent_locked(p) for p in busy):
                return
            self._cond.wait(0.05)

    def _gather_stacks_locked(self, busy: list[ProcessState]) -> None:
        """Ask every connected stuck process for its threads' stacks; wait up to 2 s."""
        for proc in busy:
            proc.stacks = None
            if proc.connected:
                self._transport.write_locked(proc.identity, clockproto.dump())
        deadline = _wall.monotonic() + 2.0
        while any(p.connected and p.stacks is None and not p.gone for p in busy):
            left = deadline - _wall.monotonic()
            if left <= 0:
                break
            self._cond.wait(left)

    def collect_stacks(self, name: str, timeout_s: float = 2.0) -> str:
        """Ask process ``name`` for its threads' stacks (deadlock and stall reports)."""
        with self._cond:
            proc = self._registry.procs.get(name)
            if proc is None or not proc.connected or proc.gone:
                return "(process not connected)"
            proc.stacks = None
            self._transport.write_locked(proc.identity, clockproto.dump())
            deadline = _wall.monotonic() + timeout_s
            while proc.stacks is None and not proc.gone:
                left = deadline - _wall.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return proc.stacks or "(no stacks received)"


def _report(
    busy: list[ProcessState],
    limit: float,
    traffic: tuple[float, int, int] | None,
    why_busy: Callable[[ProcessState], list[str]],
    now_ns: int,
) -> str:
    """The stall guard's report: since when, and for each stuck process why it is not
    quiescent, with its stacks."""
    if traffic is None:
        head = f"no progress for {limit:g} s of wall time"
    elif traffic[1] < 0:
        head = (
            f"no virtual wait for {traffic[0]:.0f} s of wall time, the processes using CPU "
            "all along (a busy loop, or a computation longer than the limit)"
        )
    else:
        seconds, messages, api = traffic
        head = (
            f"no progress for {seconds:.0f} s of wall time while generating traffic "
            f"({messages} clock messages, {api} API responses and events; virtual time "
            "stood still and the cluster did not change)"
        )
    lines = [
        f"timewarp: stall guard: {head} at virtual t={now_ns / 1e9:.9f} s; these "
        "processes are not in a virtual wait:"
    ]
    for proc in busy:
        if not proc.connected:
            lines.append(
                f"- process {proc.name!r} never connected to the clock service "
                "(not run under `timewarp run`, or its runtime did not start)"
            )
        else:
            why = why_busy(proc)
            lines.append(f"- process {proc.name!r} (pid {proc.pid}): {'; '.join(why)}")
            lines.append(proc.stacks or "  (no stacks received)")
    return "\n".join(lines)
