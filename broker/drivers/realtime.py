"""Real-time mode: the emulation baseline ("reality", as k3s was for Batkube).

Virtual time is the wall clock, scaled: ``now = (wall - start) * speed``. Nothing is
patched: schedulers run as ordinary processes with a KUBECONFIG to the facade, and their
own sleeps and timeouts take real time (so at ``speed`` 10 a ``sleep(1)`` lasts 10 s of
virtual time — the price of running faster than real time unpatched). The facade's clock
(timestamps, watch ``timeoutSeconds``, bookmarks) follows the same scaled wall clock.

The broker paces Batsim: a message at time t is held until the scaled wall clock reaches
t; then its events are applied, bindings made meanwhile are admitted, and the reply goes
out at once with ``now`` = the scaled wall clock (Batsim advances to it) and a
CALL_ME_LATER one *step* of wall time later, so Batsim never runs ahead of the wall clock
and a decision reaches it at most one step (plus a round trip) after it was made.

Honest limit: the decision times are quantised to the step (``step_ns * speed`` of
virtual time); a loaded machine delays everything, as it would a real cluster.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import threading
import time as _wall
from collections.abc import Callable

from broker.cluster.cluster import Cluster
from broker.drivers.engine import Broker
from broker.drivers.lockstep import process_settled
from broker.processes.launcher import SchedulerFailed
from simulator import protocol as p


class _Timer:
    __slots__ = ("fn", "cancelled")

    def __init__(self, fn: Callable[[], None]) -> None:
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ScaledWallClock:
    """The facade's clock in real-time mode: ``now_ns() = (wall - start) * speed``.

    The clock stands at 0 until :meth:`start` (the broker starts it once the schedulers
    are up, as a real cluster's scheduler is up before jobs arrive). Callbacks given to
    ``call_at`` run in the clock's own thread once ``now_ns()`` reaches their deadline,
    in (deadline, registration) order. Invariant: ``now_ns`` never goes back
    (``perf_counter`` is monotonic)."""

    def __init__(self, speed: float = 1.0, epoch_ns: int = 0) -> None:
        if not (speed > 0 and math.isfinite(speed)):
            raise ValueError(f"speed must be a positive number, got {speed!r}")
        self.speed = speed
        self.epoch_ns = epoch_ns
        self._start: float | None = None
        self._heap: list[tuple[int, int, _Timer]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(
            target=self._loop, name="timewarp-realtime-clock", daemon=True
        )
        self._thread.start()

    def start(self) -> None:
        with self._cond:
            if self._start is None:
                self._start = _wall.perf_counter()
                self._cond.notify()

    @property
    def started(self) -> bool:
        return self._start is not None

    def now_ns(self) -> int:
        start = self._start
        if start is None:
            return 0
        return round((_wall.perf_counter() - start) * self.speed * 1e9)

    def wall_epoch_ns(self) -> int:
        return self.epoch_ns

    def wall_seconds_until(self, t_ns: int) -> float:
        return (t_ns - self.now_ns()) / self.speed / 1e9

    def call_at(self, deadline_ns: int, fn: Callable[[], None]) -> _Timer:
        timer = _Timer(fn)
        with self._cond:
            heapq.heappush(self._heap, (deadline_ns, next(self._seq), timer))
            self._cond.notify()
        return timer

    def _loop(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._closed:
                        return
                    while self._heap and self._heap[0][2].cancelled:
                        heapq.heappop(self._heap)
                    if self._heap and self._start is not None:
                        left = self.wall_seconds_until(self._heap[0][0])
                        if left <= 0:
                            _, _, timer = heapq.heappop(self._heap)
                            break
                        self._cond.wait(left)
                    else:
                        self._cond.wait()
            try:
                timer.fn()
            except Exception as exc:  # a facade callback failing must not stop the clock
                import sys

                print(f"timewarp: realtime clock: callback failed: {exc!r}", file=sys.stderr)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(2)


class RealtimeBroker(Broker):
    """The Broker paced by a :class:`ScaledWallClock` (see the module docstring)."""

    def __init__(self, *, rt_clock: ScaledWallClock, step_ns: int = 5_000_000, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(**kwargs)
        if step_ns <= 0:
            raise ValueError("the real-time step must be positive")
        self.rt_clock = rt_clock
        self.step_ns = step_ns
        self.cluster = Cluster(
            self.facade,
            rt_clock.now_ns,
            terminated_pod_gc_threshold=self.cluster.terminated_pod_gc_threshold,
        )
        self.cluster.services = self.services
        self._calls: list[float] = []  # CALL_ME_LATER times sent, not yet come back (sorted)
        self.settle_s = 0.2
        self.startup_timeout_s = 120.0
        self.late_s = (
            0.0  # wall seconds: how late (behind the scaled clock) a message came, at most
        )

    def step(self, message: p.Message) -> p.Message:
        events = message.events
        if not self.rt_clock.started:
            events = self._begin_first(message)
            self._await_ready()
            self.rt_clock.start()
        self.progress.messages += 1
        t_ns = round(message.now * 1e9)
        # each REQUESTED_CALL answers the earliest CALL_ME_LATER sent (Batsim prints its
        # time to the microsecond, maybe below the time asked for: the same instant)
        for _ in range(sum(isinstance(e.data, p.RequestedCall) for e in message.events)):
            if self._calls and p.answers_call(self._calls[0], message.now):
                self._calls.pop(0)
        self._hold_until(t_ns)
        self.late_s = max(self.late_s, -self.rt_clock.wall_seconds_until(t_ns))
        for event in events:
            self._apply(event.data)
        process_settled(self.facade, self.cluster)
        now = max(self.rt_clock.now_ns() / 1e9, message.now)
        self._follow(round(now * 1e9))
        events = [p.Event(now, d) for d in self.cluster.take_decisions()]
        if not self._exhausted():
            step_s = self.step_ns * self.rt_clock.speed / 1e9
            when, stamp, first = self.free_running_call(message.now, now, len(events), now + step_s)
            if not (self._calls and self._calls[0] <= when):
                bisect.insort(self._calls, when)
                self.add_call(events, when, stamp, first)
        self._report_progress()
        return p.Message(now, events)

    def _await_ready(self) -> None:
        """Every scheduler made its first API requests and then went quiet (nothing in
        flight, no new request) for ``settle_s`` of wall time: it is up and waiting."""
        start = _wall.perf_counter()
        last: tuple = ()
        quiet_since = start
        while True:
            self.launcher.check()
            stats = [self.facade.token_stats(proc.name) for proc in self.launcher.processes]
            now = _wall.perf_counter()
            snapshot = tuple((s.requests, s.in_flight) for s in stats)
            if snapshot != last:
                last, quiet_since = snapshot, now
            up = all(s.requests > 0 and s.in_flight == 0 for s in stats)
            if up and now - quiet_since >= self.settle_s:
                return
            if now - start >= self.startup_timeout_s:
                late = [
                    p.name
                    for p, s in zip(self.launcher.processes, stats, strict=True)
                    if s.requests == 0
                ]
                raise SchedulerFailed(
                    f"realtime: scheduler process(es) {', '.join(late) or '(all)'} not up and "
                    f"quiet after {now - start:.0f} s of wall time (no API request yet, or never idle)"
                )
            _wall.sleep(0.01)

    def _hold_until(self, t_ns: int) -> None:
        while True:
            left = self.rt_clock.wall_seconds_until(t_ns)
            if left <= 0:
                return
            self.launcher.check()
            _wall.sleep(min(left, 0.2))

    def _follow(self, t_ns: int) -> None:
        """Keep the clock service (progress, reports) in step; it holds no timers here."""
        if t_ns > self.clock.now_ns and self.clock.next_deadline() is None:
            self.clock.advance_to(t_ns)

    def _result(self, ok: bool, reason: str = ""):  # type: ignore[no-untyped-def]
        result = super()._result(ok, reason)
        result.stats["realtime_max_lag_s"] = round(self.late_s, 6)
        return result
