"""The broker's clock service: owns simulated time and decides when it may move.

Virtual time is an integer number of nanoseconds since the simulation started. It moves
only through :meth:`ClockService.advance_to`, called by a driver (the standalone runner,
or the Batsim side of the broker) once :meth:`ClockService.wait_quiescent` said every
scheduler process is quiescent. The service is this module (time, releasing due timers,
the autopilot) over five parts sharing its one lock:

- ``broker/clock/timers.py``: the timer heap, in (deadline, owner, key) order;
- ``broker/clock/registry.py``: the processes, their tokens and their reported state;
- ``broker/clock/quiescence.py``: when every process waits, and who reads API data next;
- ``broker/clock/stall.py``: the stall guard (a hang is reported, never silent);
- ``broker/clock/transport.py`` and ``broker/clock/inbox.py``: the runtimes' sockets and
  what each of their messages does.

A process's timers due at one instant go out in one ``fire`` message (its runtime runs the
woken threads one at a time, in that order); owners are released one at a time, waiting
for quiescence in between.
"""

from __future__ import annotations

import sys
import threading
import time as _wall
from collections.abc import Callable
from typing import TextIO

from broker.clock.inbox import Inbox
from broker.clock.quiescence import Quiescence
from broker.clock.registry import ProcessState, Registry
from broker.clock.stall import ClockStall, StallGuard
from broker.clock.timers import Timer, TimerQueue
from broker.clock.transport import ClockTransport
from timewarp.wire import clockproto

__all__ = ["ClockService", "ClockStall", "FacadeClock", "ProcessState"]

DEFAULT_EPOCH_NS = 1_767_225_600 * 1_000_000_000  # 2026-01-01T00:00:00Z
DEFAULT_MONO_NS = 1_000 * 1_000_000_000  # monotonic clocks start at 1000 s


class ClockService:
    """Owns virtual time; see the module docstring for when it may move.

    Its parts, for the broker's wiring and reports: ``registry`` (processes, tokens),
    ``quiescence`` (the facade's hooks), ``stall`` (the guard and its figures),
    ``timers``, ``transport`` (the ``endpoint``), ``inbox``."""

    def __init__(
        self,
        *,
        endpoint: str | None = None,
        mode: str = "deterministic",
        epoch_ns: int = DEFAULT_EPOCH_NS,
        mono_ns: int = DEFAULT_MONO_NS,
        stall_timeout: float = 10.0,
        on_stall: str = "advance",
        log: TextIO | None = None,
    ) -> None:
        if on_stall not in ("advance", "stop"):
            raise ValueError(f"on_stall must be 'advance' or 'stop', got {on_stall!r}")
        self.mode = mode
        self.epoch_ns = epoch_ns
        self.mono_ns = mono_ns
        log = log or sys.stderr
        self._now = 0
        # Free-running time (lockstep windows): now = max(_now, _floor, _source()).
        self._source: Callable[[], int] | None = None
        self._floor = 0
        self._cond = _Condition()
        self.autopilot = False
        # figures for reports and benchmarks
        self.fires = 0
        self.advances = 0
        self.timers = TimerQueue()
        self.transport = ClockTransport(
            endpoint,
            self._cond,
            log,
            receive=lambda identity, frame: self.inbox.receive(identity, frame),
            dropped=lambda identity: self.inbox.dropped_locked(identity),
            after_round=self._autopilot_step_locked,
        )
        self.endpoint = self.transport.endpoint
        self._cond.on_notify = self.transport.notified_locked
        self.registry = Registry(self._cond)
        self.stall = StallGuard(
            self._cond,
            self.registry,
            self.transport,
            stall_timeout=stall_timeout,
            on_stall=on_stall,
            log=log,
        )
        self.quiescence = Quiescence(
            self._cond,
            self.registry,
            self.transport,
            self.stall,
            deterministic=mode == "deterministic",
            now=lambda: self._now,
        )
        # deterministic mode: the driver's waits read the runtimes' frames themselves
        # (ClockTransport.wait_reading_locked); the autopilot's loop acts on them instead
        self.quiescence.read_while_waiting = mode == "deterministic"
        self.inbox = Inbox(self, self._cond, now=lambda: self._now)
        self.transport.start()

    # ------------------------------------------------------------------ time
    @property
    def now_ns(self) -> int:
        if self._source is None:
            return max(self._now, self._floor)
        with self._cond:
            return self.current_locked()

    def current_locked(self) -> int:
        """The time anyone may be told now (free-running time included)."""
        if self._source is not None:
            self._floor = max(self._floor, self._source())
        return max(self._now, self._floor)

    def run_free(self, source: Callable[[], int]) -> None:
        """Let ``now`` follow ``source`` (a monotonic virtual-ns function, e.g. the wall
        clock) until :meth:`freeze`. Timers still fire only through ``release_due``;
        the driver must advance to each deadline as ``source`` passes it."""
        with self._cond:
            self._source = source

    def freeze(self) -> int:
        """Stop following the source; returns the last time anyone was told (``now``
        never goes back). The driver then advances to it."""
        with self._cond:
            t = self.current_locked()
            self._source = None
            return t

    def wall_epoch_ns(self) -> int:
        return self.epoch_ns

    def next_deadline(self) -> int | None:
        """When the next timer is due (a slack one only once time reached it: see
        ``broker/clock/timers.py``)."""
        with self._cond:
            first = self.timers.first(self._now)
            return first.deadline if first is not None else None

    def advance_to(self, t_ns: int) -> None:
        """Move virtual time forward to ``t_ns`` (never past a pending timer)."""
        with self._cond:
            if t_ns < self._now:
                raise ValueError(f"virtual time cannot go back: now={self._now}, asked {t_ns}")
            first = self.timers.first(self._now)
            if first is not None and first.deadline < t_ns:
                raise ValueError(f"advance_to({t_ns}) would skip a timer due at {first.deadline}")
            if t_ns == self._now:
                return
            pushed = self._move_time_locked(t_ns)
            self._cond.notify_all()
            timeout = self.stall.stall_timeout
            give_up = _wall.monotonic() + timeout
            while any(not p.gone and p.ack != p.sent for p in pushed):
                left = give_up - _wall.monotonic()
                if left <= 0:
                    self.stall.log.write(
                        "timewarp: a process did not acknowledge the new time in "
                        f"{timeout:g} s; going on (a non-deterministic advance)\n"
                    )
                    late = ", ".join(repr(p.name) for p in pushed if not p.gone and p.ack != p.sent)
                    self.stall.count_locked(
                        f"time not acknowledged at t={t_ns / 1e9:.9f} s by {late} "
                        f"within {timeout:g} s of wall time"
                    )
                    break
                self._cond.wait(min(left, 0.5))

    def _move_time_locked(self, t_ns: int) -> list[ProcessState]:
        """Set the time; returns the processes told, whose acknowledgement must come
        before anyone is woken. A process whose threads may be woken by facade I/O without
        the broker's go (free modes, or threads the stall guard let go) needs the new time
        first, or such a thread could read the old time; in deterministic mode the
        ``fire`` and ``io`` messages that wake everyone else carry the time."""
        self._now = t_ns
        self.advances += 1
        self.stall.progressed_locked()
        pushed = []
        gated = self.mode == "deterministic"
        for proc in self.registry.procs.values():
            if proc.connected and not proc.gone and proc.io and (not gated or proc.detached):
                self.transport.send_locked(proc, clockproto.time_update(t_ns))
                pushed.append(proc)
        return pushed

    def call_at(
        self, deadline_ns: int, fn: Callable[[], None], *, key: tuple[str, int] | None = None
    ) -> Timer:
        """A broker-side timer: ``fn`` runs in the driver's thread during release_due.
        Broker-side timers due at one instant run in the order they were set, unless
        ``key`` (a process name and its own sequence number) orders them: timers set by
        concurrent facade threads for different processes must not be ordered by who
        came first."""
        with self._cond:
            timer = self.timers.add_callback(deadline_ns, fn, key)
            self._cond.notify_all()
            return timer

    def _release_one_owner_locked(self) -> tuple[int, Callable[[], None] | None]:
        """Pop the first due timer and its owner's other timers due now; a process's go
        out in one ``fire``. Returns (timers fired, broker-side callback to run)."""
        first, ids = self.timers.pop_owner(self._now)
        if first.proc is not None:
            self.transport.send_locked(first.proc, clockproto.fire(ids, self._now))
        n = max(1, len(ids))
        self.fires += n
        return n, first.fn

    def release_due(self, wait: bool = True) -> int:
        """Fire every timer due at or before now, one owner at a time, waiting for
        quiescence after each (``wait=False``: free-running modes, no waiting).
        Returns how many timers fired."""
        fired = 0
        while True:
            with self._cond:
                first = self.timers.first(self._now)
                if first is None or first.deadline > self._now:
                    return fired
                n, fn = self._release_one_owner_locked()
                fired += n
            if fn is not None:
                fn()
            if wait:
                self.wait_quiescent()

    # ------------------------------------------------------------- autopilot
    def engage_autopilot(self) -> None:
        """Standalone driving done by the service's own loop: whenever every process is
        quiescent, advance to the next deadline and release its first owner's timers —
        the same steps as ``advance_to`` + ``release_due``, without a hop through a driver
        thread. Only process timers are handled (no ``call_at``); the driver waits in
        :meth:`wait_settled` for what only it can decide (exit, deadlock)."""
        with self._cond:
            self.autopilot = True
            self.quiescence.read_while_waiting = False  # the loop must see every frame
        self.transport.poke()

    def collect_figures(self, timeout_s: float = 10.0) -> dict[str, dict]:
        """At the end of a run, ask every connected process what the runtime cost it (and
        to write its ``--profile``); name -> its figures, for those that answered within
        ``timeout_s`` (``timewarp/_core/selftime.py``). Figures only: nothing decides on
        them, and the processes' answers move no time."""
        with self._cond:
            asked = [p for p in self.registry.procs.values() if p.connected and not p.gone]
            for proc in asked:
                proc.figures = None
                self.transport.send_locked(proc, clockproto.report())
            deadline = _wall.monotonic() + timeout_s
            while any(p.figures is None and p.connected and not p.gone for p in asked):
                left = deadline - _wall.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return {p.name: p.figures for p in asked if p.figures is not None}

    def wait_settled(self) -> None:
        """Autopilot: block until every process is quiescent and no timer is pending
        (stall guard applied, as in :meth:`wait_quiescent`)."""
        with self._cond:
            while True:
                self.quiescence.wait_locked()
                if self.timers.first(self._now) is None and self.timers.first_slack() is None:
                    return
                self._cond.wait(0.5)

    def _autopilot_step_locked(self) -> None:
        """After each round of the transport's loop: one step of the autopilot, if on."""
        if not self.autopilot:
            return
        if not self.quiescence.all_quiescent_locked():
            self.quiescence.release_next_locked()
            return
        # nothing else pending: the first slack timer decides (a program alone with a
        # server thread's poll, or an accept with a timeout: time would stand still)
        first = self.timers.first(self._now) or self.timers.first_slack()
        if first is None or first.proc is None:
            self._cond.notify_all()
            return
        t = first.deadline
        if t > self._now and self._move_time_locked(t):
            return  # released once the new time is acknowledged
        self._release_one_owner_locked()

    # ------------------------------------------------------------- processes
    def expect(self, name: str, token: str | None = None) -> str:
        """A launcher is about to start process ``name`` (see ``Registry.expect``)."""
        return self.registry.expect(name, token)

    def process_gone(self, name: str, returncode: int | None = None) -> None:
        with self._cond:
            proc = self.registry.procs.get(name)
            if proc is not None:
                self.mark_gone_locked(proc, returncode)

    def mark_gone_locked(self, proc: ProcessState, returncode: int | None = None) -> None:
        """``proc`` exited, said bye or lost its connection: its timers will not fire and
        nobody waits for it any more."""
        if returncode is not None:
            proc.returncode = returncode
        if proc.gone:
            return
        proc.gone = True
        proc.gone_at_ns = self._now  # time stood still while it ran: this is its instant
        self.timers.cancel_all_of(proc.name)
        self._cond.notify_all()
        if self.autopilot:
            self.transport.poke()  # the others may be quiescent now

    def notify(self) -> None:
        """Something outside (the facade) may have made a process quiescent: re-check —
        unless a process runs, owes an acknowledgement or has not connected, which only
        its own message can change (that message wakes the waiters: ``Inbox.receive``).
        The facade calls this after every response and watch frame, mostly while the
        scheduler that reads them runs: each needless wake-up was a thread switch and a
        walk of the processes in the driver (and the transport's loop, under autopilot)."""
        with self._cond:
            self.stall.traffic_locked(1)
            if self.quiescence.held_by_a_process_locked():
                return
            # A response written may be what lets a reader go: while the driver waits with
            # nothing for its hook to do, let it go from here, as the driver would on
            # waking (the same decision, from the same state: every process idle, no
            # request in flight) — one wake-up of the driver fewer; the reader's next
            # report wakes it. Otherwise wake it to decide.
            if self.quiescence.release_for_driver_locked():
                return
            self._cond.notify_all()
            if self.autopilot:
                self.transport.poke()

    def quiescent(self) -> bool:
        with self._cond:
            return self.quiescence.all_quiescent_locked()

    def wait_quiescent(self) -> None:
        """Block until every process is quiescent (or gone). Applies the stall guard."""
        with self._cond:
            self.quiescence.wait_locked()

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> ClockService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Condition(threading.Condition):
    """The service's lock and condition; a notification also wakes a driver that waits
    reading the runtimes' connections rather than on the condition (``on_notify``)."""

    def __init__(self) -> None:
        super().__init__()
        self.on_notify: Callable[[], None] | None = None

    def notify(self, n: int = 1) -> None:  # notify_all calls it too
        super().notify(n)
        if self.on_notify is not None:
            self.on_notify()


class FacadeClock:
    """The facade's view of the clock service (virtual time, broker-side timers)."""

    def __init__(self, clock: ClockService) -> None:
        self._clock = clock

    def now_ns(self) -> int:
        return self._clock.now_ns

    def wall_epoch_ns(self) -> int:
        return self._clock.epoch_ns

    def call_at(self, deadline_ns: int, fn: Callable[[], None], *, key=None):  # type: ignore[no-untyped-def]
        return self._clock.call_at(max(deadline_ns, self._clock.now_ns), fn, key=key)
