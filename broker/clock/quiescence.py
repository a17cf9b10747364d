"""Quiescence: when every scheduler process waits, so that virtual time may move.

A process is quiescent when

- it said hello (a process the launcher expects but that never connected is not);
- its last ``state`` says no thread runs outside a virtual wait (``busy`` false);
- it acknowledged every ``fire``/``time``/``io`` message sent to it (wake-ups are the
  broker's own doing: from the moment a wake-up is sent, the process counts as running);
- every thread it reports blocked reading the API facade has consumed everything the
  facade wrote and the facade owes it nothing (the ``io_checker``).

In deterministic mode, when every process is idle but for API data to read, the readers
are let go one process at a time (``io`` messages), in process-name order like
simultaneous timers. While the driver waits, the stall guard (broker/clock/stall.py)
watches. Methods ending in ``_locked`` are called with the clock service's lock held;
the others take it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from broker.clock import relock
from broker.clock.registry import ProcessState, Registry
from broker.clock.stall import StallGuard
from broker.clock.transport import ClockTransport
from timewarp.wire import clockproto

# How often the driver looks again while a connection is "flushing" (frames queued that
# owe its client no byte: the end of an HTTP/1.0 stream, about to be closed). A poll,
# never a decision: the release waits for the facade, however long that takes.
FLUSH_POLL_S = 0.02
_UNBOUNDED = 1 << 62  # the reading limit when the facade's byte counts are not known
# API connection states that leave a reader durably blocked: nothing owed now ("held": a
# response kept back until a virtual deadline, see broker/drivers/pacing.py)
_PARKED = frozenset({"idle", "held"})
_IO_STATE_WORDS = {
    "idle": "parked",
    "busy": "a request is in flight",
    "ready": "a response waiting",
    "streaming": "watch events waiting",
    "flushing": "watch events being written",
    "held": "a response held back until a virtual deadline",
}

IoChecker = Callable[[int, int, int], bool]
# the checker's answers for all of a report's ``[port, sent, consumed, seq]`` rows at once
IoStates = Callable[[list[list[int]]], list[str]]


class Quiescence:
    """Who keeps time from moving, who may read next, and the driver's wait for it."""

    def __init__(
        self,
        cond: threading.Condition,
        registry: Registry,
        transport: ClockTransport,
        guard: StallGuard,
        *,
        deterministic: bool,
        now: Callable[[], int],
    ) -> None:
        self._cond = cond
        self._procs = registry.procs
        self._transport = transport
        self._guard = guard
        self._deterministic = deterministic
        self._now = now
        self._io_checker: IoChecker | None = None
        self._io_written: Callable[[int], int] | None = None
        self._io_states: IoStates | None = None
        self._before_io_release: Callable[[], bool] | None = None
        self._hook_pending: Callable[[], bool] | None = None
        self._wait_listeners: list[Callable[[str], None]] = []
        self._flushing = False  # a connection owes no byte yet but will close: poll
        self.driver_waiting = False  # the driver waits in wait_locked, its work done
        # the driver's waits read the runtimes' connections (ClockTransport.wait_reading_locked)
        self.read_while_waiting = False
        self.io_releases = 0

    # ------------------------------------------------------------ the broker's hooks
    def set_io_checker(
        self,
        checker: IoChecker | None,
        written: Callable[[int], int] | None = None,
        states: IoStates | None = None,
    ) -> None:
        """``checker(port, sent, consumed)`` says how a connection to the facade stands:
        ``"idle"`` (parked: nothing owed either way), ``"busy"`` (a request in flight) or
        ``"ready"`` (data for the client, nothing being handled). A checker returning a
        bool means idle (True) or busy (False). ``written(port)``: the bytes the facade
        wrote on that connection so far — a thread let go may read that far (without it,
        as far as it likes). ``states(rows)``: the checker's (string) answers for all of a
        state report's rows, asked at once (one question per report, not per connection:
        the facade's ledger takes its lock once); without it, the checker row by row."""
        with self._cond:
            self._io_checker = checker
            self._io_written = written
            self._io_states = states

    def set_before_io_release(
        self, hook: Callable[[], bool] | None, pending: Callable[[], bool] | None = None
    ) -> None:
        """Deterministic mode: ``hook()`` runs in the thread waiting in
        ``ClockService.wait_quiescent`` (without the lock) each time every process is idle
        but for API data, before a thread is let go to read it. It returns whether it
        changed anything (then the choice is made again). The broker reacts there to what
        the schedulers just did — a binding becomes a running pod — so that the scheduler
        reads the consequences with the data it is let go for, not one round later.

        ``pending()`` (quick, called with the service's lock held) says whether ``hook``
        has anything to do. When it has not, the thread that receives the state report
        making a release possible lets the readers go itself, without waking the driver
        first: the same decision, one thread hand-off sooner."""
        with self._cond:
            self._before_io_release = hook
            self._hook_pending = pending

    def add_wait_listener(self, fn: Callable[[str], None]) -> None:
        """``fn(name)`` is called (the service's lock held: keep it quick, take no lock of
        the service's) each time process ``name`` reports itself idle with every API
        connection parked and nothing held back for it: it waits of its own accord (a
        virtual wait, a parked watch), as opposed to waiting on a response the broker
        keeps back. (broker/drivers/pacing.py counts busy polling between such waits.)"""
        with self._cond:
            self._wait_listeners.append(fn)

    # ------------------------------------------------------------------ judging
    def _io_state_locked(self, port: int, sent: int, consumed: int) -> str:
        checker = self._io_checker
        if checker is None:
            return "busy"
        state = checker(port, sent, consumed)
        if state is True:
            return "idle"
        if state is False:
            return "busy"
        return state

    def _io_states_locked(self, rows: list[list[int]]) -> list[str]:
        """:meth:`_io_state_locked` of each ``[port, sent, consumed, seq]`` row."""
        if not rows:
            return []
        if self._io_states is not None:
            return self._io_states(rows)
        return [self._io_state_locked(row[0], row[1], row[2]) for row in rows]

    def quiescent_locked(self, proc: ProcessState) -> bool:
        if proc.gone:
            return True
        if not proc.connected or proc.busy or proc.ack != proc.sent:
            return False
        return all(self._io_state_locked(*item[:3]) in _PARKED for item in proc.io)

    def held_by_a_process_locked(self) -> bool:
        """Some process keeps time from moving whatever the facade does: it did not
        connect yet, it runs, or it did not acknowledge a wake-up. Neither a wait for
        quiescence nor a release of readers can end before its next message."""
        for proc in self._procs.values():
            if not proc.gone and (not proc.connected or proc.busy or proc.ack != proc.sent):
                return True
        return False

    def all_quiescent_locked(self) -> bool:
        return all(self.quiescent_locked(p) for p in self._procs.values())

    def why_busy_locked(self, proc: ProcessState) -> list[str]:
        """What keeps a connected process from being quiescent, in words."""
        why = []
        if proc.busy:
            why.append(
                f"a thread runs outside any virtual wait ({proc.runnable} runnable, "
                f"{proc.blocked} blocked in virtual waits)"
            )
        if proc.ack != proc.sent:
            why.append(f"{proc.sent - proc.ack} wake-up(s) not yet acknowledged")
        for port, sent, consumed, _seq in proc.io:
            state = self._io_state_locked(port, sent, consumed)
            why.append(
                f"API connection from port {port}: sent {sent} B, consumed {consumed} B "
                f"({_IO_STATE_WORDS[state]})"
            )
        return why

    def report_locked(self, proc: ProcessState, msg: dict) -> None:
        """A state report: what decides whether ``proc`` is quiescent (busy, acks, the API
        connections its threads block reading) and, when it waits of its own accord with
        every connection parked, the wait listeners hear of it."""
        proc.busy, proc.ack, proc.io = msg["busy"], msg["ack"], msg["io"]
        proc.runnable, proc.blocked = msg["runnable"], msg["blocked"]
        if proc.detached != msg["detached"]:
            self._guard.progressed_locked()
        proc.detached = msg["detached"]
        if not proc.busy:
            proc.settled = True
            if self._wait_listeners and all(
                state == "idle" for state in self._io_states_locked(proc.io)
            ):
                for fn in self._wait_listeners:
                    fn(proc.name)

    # ---------------------------------------------------------- letting readers go
    def _next_release_locked(self) -> tuple[ProcessState, list[int]] | None:
        """Deterministic mode: when every process is idle but for threads whose API data
        is there (and no request is being handled anywhere), the ones to let go — those of
        the first process by name, responses before watch events, then in connection
        opening order, like simultaneous timers."""
        if not self._deterministic:
            return None
        candidates = []
        flushing = False
        for proc in self._procs.values():
            if proc.gone:
                continue
            if not proc.connected or proc.busy or proc.ack != proc.sent:
                return None
            for (port, _sent, _consumed, seq), state in zip(
                proc.io, self._io_states_locked(proc.io), strict=True
            ):
                if state == "busy":
                    return None
                if state == "flushing":
                    flushing = True
                if state in ("ready", "streaming", "flushing"):
                    # responses before watch events, as a real API server's would
                    # usually arrive: a scheduler binding a backlog reads each
                    # binding's answer at once and its watch once, at the end
                    candidates.append((proc.name, state != "ready", seq, port, proc))
        # Watch events queued but not yet written are owed to their client all the same
        # (the facade's ledger counts them: ``written``), so a reader let go reads them
        # whether or not the facade's thread wrote them yet — how much it reads never
        # depends on the wall clock. Only frames that owe no byte ("flushing": a stream
        # about to be closed) are waited for.
        self._flushing = flushing
        if flushing:
            return None
        if not candidates:
            return None
        return _first_process(candidates)

    def survey_locked(
        self,
    ) -> tuple[list[ProcessState], tuple[ProcessState, list[int]] | None]:
        """The processes not quiescent and the readers to let go next, in one pass over
        the processes and their API connections: what ``[p for p in procs if not
        quiescent_locked(p)]`` and :meth:`_next_release_locked` answer (and its
        ``_flushing`` note) asking the facade about each connection once, not twice (the
        driver's wait asks both on every wake-up)."""
        busy: list[ProcessState] = []
        candidates = []
        flushing = False
        open_ = self._deterministic  # a release is still possible
        io_states = self._io_states_locked
        for proc in self._procs.values():
            if proc.gone:
                continue
            if not proc.connected or proc.busy or proc.ack != proc.sent:
                busy.append(proc)
                open_ = False
                continue
            parked = True
            # (each process's rows in one question: answers are pure reads of the ledger)
            for (port, _sent, _consumed, seq), state in zip(
                proc.io, io_states(proc.io), strict=True
            ):
                if state in _PARKED:
                    continue
                parked = False
                if not open_:
                    break  # this process is busy, and no release is possible: enough
                if state == "busy":
                    open_ = False
                    break
                if state == "flushing":
                    flushing = True
                if state in ("ready", "streaming", "flushing"):
                    candidates.append((proc.name, state != "ready", seq, port, proc))
            if not parked:
                busy.append(proc)
        if not open_:
            return busy, None
        self._flushing = flushing
        if flushing or not candidates:
            return busy, None
        return busy, _first_process(candidates)

    def release_next_locked(self) -> bool:
        """Let the next readers go (an ``io`` message); False when there are none."""
        return self._send_release_locked(self._next_release_locked())

    def _send_release_locked(self, release: tuple[ProcessState, list[int]] | None) -> bool:
        if release is None:
            return False
        proc, ports = release
        written = self._io_written
        upto = [[port, written(port) if written else _UNBOUNDED] for port in ports]
        self._transport.send_locked(proc, clockproto.io_release(upto, self._now()))
        self.io_releases += 1
        return True

    def release_for_driver_locked(self) -> bool:
        """A state report made a release possible while the driver waits with nothing
        for its hook to do: let the readers go from here, as the driver would on waking."""
        if not self.driver_waiting:
            return False
        if self._before_io_release is not None:
            pending = self._hook_pending
            if pending is None or pending():
                return False
        return self.release_next_locked()

    def wait_locked(self) -> None:
        """Block until every process is quiescent (or gone), letting readers go and
        running the broker's hook on the way; the stall guard applies."""
        self._guard.restart_locked()
        if not self.read_while_waiting:
            self._wait_locked()
            return
        # the runtimes' frames are read by this thread until the wait ends: the one that
        # ends it wakes this thread only (ClockTransport.wait_reading_locked)
        try:
            self._transport.lend_locked()
            self._wait_locked()
        finally:
            self._transport.give_back_locked()

    def _wait_locked(self) -> None:
        while True:
            busy, release = self.survey_locked()
            if not busy:
                return
            hook = self._before_io_release
            if hook is not None and release is not None:
                try:
                    relock.let_go(self._cond)  # held once: see ClockService.wait_quiescent
                    changed = hook()
                finally:
                    relock.take_back(self._cond)  # a stop signal meanwhile: raised once held
                if changed:
                    continue
                release = self._next_release_locked()  # the lock was let go: ask again
            if self._send_release_locked(release):
                continue
            wait = self._guard.check_locked(busy, self, self._now())
            if wait is None:
                return  # a stall was reported: advance anyway
            if self._flushing:
                wait = min(wait, FLUSH_POLL_S)
            self.driver_waiting = True
            try:
                if self.read_while_waiting:
                    self._transport.wait_reading_locked(wait)
                else:
                    self._cond.wait(wait)
            finally:
                self.driver_waiting = False


def _first_process(
    candidates: list[tuple[str, bool, int, int, ProcessState]],
) -> tuple[ProcessState, list[int]]:
    """The first process (by name) lets every reader with data go, in one message: its
    runtime queues them in this order before any of them runs."""
    candidates.sort(key=lambda c: c[:3])
    name, proc = candidates[0][0], candidates[0][4]
    return proc, [c[3] for c in candidates if c[0] == name]
