"""Lockstep mode: Batkube's time synchronisation, for side-by-side comparisons.

Each Batsim message at time T0 opens a *listening window*: virtual time follows the wall
clock from T0 (1 s of wall time = 1 s of virtual time, as in Batkube) while the scheduler
runs freely (its runtime is in free mode: ``now()`` asks the clock service, which answers
``T0 + wall time elapsed``). Timers fire at their exact deadlines as the window passes
them. The window closes

- as soon as a decision (binding, eviction, deletion) arrived and ``min_delay`` of wall
  time passed, or
- after ``timeout`` of wall time without a decision (Batkube's silence heuristic),

and the reply's ``now`` is the virtual time the window closed at (``T0 + elapsed``);
decisions are stamped at the virtual time the kubelet admitted them. Between windows
virtual time stands still. Then Batsim is asked to call back after a *timestep*: the
timestep starts at ``base_timestep``, is multiplied by ``backoff_multiplier`` after each
window without a decision (up to ``max_timestep``), and is reset by a decision. With
``fast_forward_on_no_pending_jobs`` no timestep is requested while no job is pending,
so Batsim jumps to its next event. Independently, a pending timer earlier than all that
is requested with CALL_ME_LATER at its deadline, so timers never fire late.

With ``detect_scheduler_deadlock``, the run fails when the scheduler had to decide (some
job pending, none running) but made no decision for ``scheduler_crash_timeout`` of wall
time.

Time at Batsim's precision, as in deterministic mode (``protocol.instant_end_ns``): a
REQUESTED_CALL answers the earliest CALL_ME_LATER sent whatever time it prints (Batsim
prints to the microsecond, often rounding down), timers that print as the message's time
are due at it, and a call is never asked for within the current instant.

Honest limits: results depend on the machine's speed and load (that is the point of
comparing with deterministic mode); a decision made while Batsim holds the turn is
delivered at the next window, stamped then.
"""

from __future__ import annotations

import bisect
import threading
import time as _wall

from broker.drivers.engine import Broker
from broker.drivers.lockstep_params import LockstepParams, parse_duration_ns  # noqa: F401 (re-exported)
from broker.processes.launcher import SchedulerFailed
from simulator import protocol as p


def process_settled(facade, cluster) -> bool:  # type: ignore[no-untyped-def]
    """``cluster.process()`` while no binding, eviction or deletion is half-done.

    The facade calls its ``on_bind`` hook (which records the binding) before it commits
    ``spec.nodeName``; the kubelet model drops a binding it cannot see committed. In the
    deterministic mode this runs only at quiescence; in the free-running modes a request
    may be in flight, so take the facade's policy lock (held across hook and commit).
    Reaches into ``Api._policy_lock``: a public hook for this would be cleaner."""
    with facade.api._policy_lock:
        return cluster.process()


class SchedulerDeadlock(SchedulerFailed):
    """Lockstep's crash detection: the scheduler had to decide and did not."""


class LockstepBroker(Broker):
    """The Broker with Batkube's window/timestep algorithm instead of quiescence."""

    def __init__(self, *, params: LockstepParams, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(**kwargs)
        self.params = params
        self.timestep_ns = params.base_timestep_ns
        self._wake = threading.Event()
        self._calls: list[float] = []  # CALL_ME_LATER times sent, not yet come back (sorted)
        self._must_decide_since: float | None = None
        self.windows = 0
        self.startup_timeout_s = 120.0
        self._driven_ns = self.clock.now_ns
        self.windows_with_decision = 0
        self.facade.store.add_listener(self._on_store_change, ("pods",))

    def _on_store_change(self, key: str, _event: str, _obj: object) -> None:
        if key == "pods":  # a binding or deletion committed: the window may close
            self._wake.set()

    # ------------------------------------------------------------------ cycle
    def step(self, message: p.Message) -> p.Message:
        events = message.events
        if self.progress.messages == 0:
            events = self._begin_first(message)
            self._await_ready()
        self.progress.messages += 1
        t_ns = max(round(message.now * 1e9), self._driven_ns)
        # each REQUESTED_CALL answers the earliest CALL_ME_LATER sent: its time is due
        for _ in range(sum(isinstance(e.data, p.RequestedCall) for e in message.events)):
            if self._calls and p.answers_call(self._calls[0], message.now):
                t_ns = max(t_ns, round(self._calls.pop(0) * 1e9))
        self._catch_up(t_ns, due_ns=p.instant_end_ns(message.now))
        for event in events:
            self._apply(event.data)  # refreshes metrics too
        stamped, decided = self._listen(t_ns)
        now_ns = self.clock.now_ns
        now = max(now_ns / 1e9, message.now)
        events = [p.Event(min(ts, now), d) for ts, d in stamped]
        self._backoff(decided)
        self._check_deadlock(decided)
        call = self._next_call(message.now, now, len(events))
        if call is not None:
            when, stamp, first = call
            bisect.insort(self._calls, when)
            self.add_call(events, when, stamp, first)
        self._report_progress()
        return p.Message(now, events)

    def _await_ready(self) -> None:
        """Before the first window: every scheduler process connected and waiting (in a
        virtual wait or an API read), as Batkube's scheduler was up before Batsim began.
        Otherwise its start-up (imports, first lists) would eat many windows."""
        start = _wall.perf_counter()
        while True:
            self.launcher.check()
            procs = self.clock.registry.processes()
            if all(q.gone or (q.connected and not q.busy) for q in procs):
                return
            waited = _wall.perf_counter() - start
            if waited >= self.startup_timeout_s:
                names = ", ".join(
                    q.name for q in procs if not (q.gone or q.connected and not q.busy)
                )
                raise SchedulerFailed(
                    f"lockstep: scheduler process(es) {names} not ready (connected and waiting) "
                    f"after {waited:.0f} s of wall time"
                )
            self._wake.wait(0.01)

    def _catch_up(self, t_ns: int, due_ns: int = 0) -> None:
        """Advance to ``t_ns``, firing timers due by then (or by ``due_ns``: the end of
        Batsim's instant) at their own deadlines.

        ``clock.now_ns`` may run ahead while the window is open (it follows the wall);
        ``_driven_ns`` is how far the clock service's timers were actually driven."""
        due_ns = max(due_ns, t_ns)
        while True:
            deadline = self.clock.next_deadline()
            try:
                if deadline is not None and deadline <= due_ns:
                    self._drive(deadline)
                    self.clock.release_due(wait=False)
                    continue
                self._drive(t_ns)
                return
            except ValueError:
                continue  # a scheduler thread just asked for an earlier timer: fire it first

    def _drive(self, t_ns: int) -> None:
        if t_ns > self._driven_ns:
            self.clock.advance_to(t_ns)
            self._driven_ns = t_ns

    def _listen(self, t0_ns: int) -> tuple[list[tuple[float, object]], bool]:
        """One window (see the module docstring). Returns stamped decisions and whether
        the scheduler decided anything."""
        params = self.params
        self.windows += 1
        start = _wall.perf_counter()

        def virtual_now() -> int:
            return t0_ns + round((_wall.perf_counter() - start) * 1e9)

        stamped: list[tuple[float, object]] = []
        decided = False
        self.clock.run_free(virtual_now)
        try:
            while True:
                self._wake.clear()
                elapsed = round((_wall.perf_counter() - start) * 1e9)
                self._catch_up(t0_ns + elapsed)
                if self._collect(stamped):
                    decided = True
                self.launcher.check()
                if elapsed >= params.min_delay_ns and (decided or elapsed >= params.timeout_ns):
                    break
                limit = (
                    params.min_delay_ns if decided else max(params.timeout_ns, params.min_delay_ns)
                )
                wait_ns = limit - elapsed
                deadline = self.clock.next_deadline()
                if deadline is not None:
                    wait_ns = min(wait_ns, deadline - (t0_ns + elapsed))
                self._wake.wait(max(wait_ns, 0) / 1e9)
        finally:
            frozen = self.clock.freeze()
        self._catch_up(frozen)
        if self._collect(stamped):
            decided = True
        if decided:
            self.windows_with_decision += 1
        return stamped, decided

    def _collect(self, stamped: list[tuple[float, object]]) -> bool:
        """Let the kubelet model admit what was bound; stamp the resulting decisions."""
        if not process_settled(self.facade, self.cluster):
            return False
        now = self.clock.now_ns / 1e9
        stamped.extend((now, d) for d in self.cluster.take_decisions())
        return True

    def _backoff(self, decided: bool) -> None:
        if decided:
            self.timestep_ns = self.params.base_timestep_ns
        else:
            self.timestep_ns = min(
                round(self.timestep_ns * self.params.backoff_multiplier),
                self.params.max_timestep_ns,
            )

    def _pending_jobs(self) -> int:
        return sum(1 for j in self.cluster.jobs.values() if j.state == "pending")

    def _running_jobs(self) -> int:
        return sum(1 for j in self.cluster.jobs.values() if j.state in ("running", "killed"))

    def _next_call(
        self, sent_now: float, now: float, events: int = 0
    ) -> tuple[float, float, bool] | None:
        """The CALL_ME_LATER of a reply stamped ``now`` to a message stamped ``sent_now``
        (``Broker.free_running_call``: time, stamp, first in the reply), or None."""
        if self._exhausted():
            return None
        candidates = []
        if not (self.params.fast_forward_on_no_pending_jobs and self._pending_jobs() == 0):
            candidates.append(now + self.timestep_ns / 1e9)
        deadline = self.clock.next_deadline()
        if deadline is not None:
            candidates.append(deadline / 1e9)
        if not candidates:
            return None
        # a time within this instant is due at the next message: ask for a later one
        call = self.free_running_call(sent_now, now, events, min(candidates))
        if self._calls and self._calls[0] <= call[0]:
            return None  # Batsim already calls us back by then
        return call

    def _check_deadlock(self, decided: bool) -> None:
        if not self.params.detect_scheduler_deadlock:
            return
        if decided or self._running_jobs() > 0 or self._pending_jobs() == 0:
            self._must_decide_since = None
            return
        now = _wall.perf_counter()
        if self._must_decide_since is None:
            self._must_decide_since = now
            return
        stuck = now - self._must_decide_since
        if stuck >= self.params.scheduler_crash_timeout_ns / 1e9:
            raise SchedulerDeadlock(
                f"scheduler deadlock detected (--detect-scheduler-deadlock): {self._pending_jobs()} "
                f"job(s) pending and none running, and no decision for {stuck:.1f} s of wall time "
                f"(--scheduler-crash-timeout {self.params.scheduler_crash_timeout_ns / 1e9:g}s), "
                f"at virtual t={self.clock.now_ns / 1e9:.3f} s"
            )

    def _result(self, ok: bool, reason: str = ""):  # type: ignore[no-untyped-def]
        result = super()._result(ok, reason)
        result.stats["lockstep_windows"] = self.windows
        result.stats["lockstep_windows_with_decision"] = self.windows_with_decision
        return result
