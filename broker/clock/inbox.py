"""What each message from a runtime does to the clock service.

Frames come from the transport's thread (broker/clock/transport.py): decoded (a malformed
one is answered with an error), counted as traffic, a hello's token checked, then applied;
the driver is woken only for what can end its wait.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from broker.clock.quiescence import Quiescence
from broker.clock.registry import ProcessState, Registry
from broker.clock.stall import StallGuard
from broker.clock.timers import TimerQueue
from broker.clock.transport import ClockTransport
from timewarp.wire import clockproto


class Clock(Protocol):
    """What the inbox uses of the clock service (broker/clock/service.py)."""

    mode: str
    epoch_ns: int
    mono_ns: int
    autopilot: bool
    registry: Registry
    timers: TimerQueue
    quiescence: Quiescence
    stall: StallGuard
    transport: ClockTransport

    def current_locked(self) -> int: ...

    def mark_gone_locked(self, proc: ProcessState, returncode: int | None = None) -> None: ...


_WAKES_DRIVER = frozenset({"state", "hello", "stacks", "figures", "bye"})
_PROGRESS = frozenset({"hello", "bye", "stacks"})  # arrivals, departures, stack dumps


class Inbox:
    """The clock service's side of the clock protocol (timewarp/wire/clockproto.py)."""

    def __init__(self, service: Clock, cond: threading.Condition, now: Callable[[], int]) -> None:
        """``now()``: the time as it stands for the processes (not free-running)."""
        self._service = service
        self._cond = cond
        self._now = now
        self._registry = service.registry
        self._timers = service.timers
        self._quiescence = service.quiescence
        self._guard = service.stall
        self._transport = service.transport
        self.messages_in = 0

    def receive(self, identity: bytes, frame: bytes) -> bool:
        """One frame from connection ``identity``; True when that connection must close:
        a frame that is not a clock message, a refused hello (never registered: no
        process to mark gone, none to blame), a message before the hello."""
        write = self._transport.write_locked
        try:
            msg = clockproto.decode_to_broker(frame)
        except clockproto.ProtocolError as exc:
            self._guard.log.write(f"timewarp: broker: {exc}; connection closed\n")
            with self._cond:
                write(identity, clockproto.error(str(exc)))
            return True  # not our runtime's (it never sends such a frame): close it
        with self._cond:
            self.messages_in += 1
            self._guard.traffic_locked(0)
            op = msg["op"]
            if op in _PROGRESS:
                self._guard.progressed_locked()
            if op == "hello":
                refusal = self._registry.refusal_locked(msg)
                if refusal is not None:
                    self._registry.refused_hellos += 1
                    self._guard.log.write(f"timewarp: broker: {refusal}\n")
                    write(identity, clockproto.error(refusal))
                    return True
                self._registry.admit_locked(identity, msg)
                service = self._service
                write(
                    identity,
                    clockproto.welcome(
                        self._now(), service.epoch_ns, service.mono_ns, service.mode
                    ),
                )
            else:
                proc = self._registry.by_identity.get(identity)
                if proc is None:
                    text = f"clock message {op!r} from a process that did not say hello"
                    write(identity, clockproto.error(text))
                    return True
                self._apply_locked(proc, identity, msg)
            # Wake the driver only for what can end its waits (a state report: idle, acks;
            # arrivals and departures; stacks): a timer or a now() cannot, and each wake-up
            # is a thread fighting the loop for the GIL. Under autopilot the loop itself
            # acts on state reports.
            if op in _WAKES_DRIVER and (not self._service.autopilot or op != "state"):
                if op != "state" or not self._quiescence.release_for_driver_locked():
                    self._cond.notify_all()
        return False

    def _apply_locked(self, proc: ProcessState, identity: bytes, msg: dict) -> None:
        """One message of a process that said hello: a question (``now``), a timer set or
        cancelled, its state, its stacks, its last words."""
        op = msg["op"]
        if op == "state":
            self._quiescence.report_locked(proc, msg)
        elif op == "timer":
            # The runtime never asks for a past deadline; a stale one fires at once.
            deadline = max(msg["deadline"], self._now())
            self._timers.add_wait(proc, msg["id"], deadline, msg["key"], msg.get("slack", False))
        elif op == "harden":
            self._timers.harden(proc.name, msg["id"])
        elif op == "now":
            t = self._service.current_locked()
            self._transport.write_locked(identity, clockproto.now_reply(msg["rid"], t))
        elif op == "cancel":
            self._timers.cancel_wait(proc.name, msg["id"])
        elif op == "stacks":
            proc.stacks = msg["text"]
        elif op == "figures":
            proc.figures = {k: v for k, v in msg.items() if k != "op"}
        elif op == "woke":
            cause = f"{proc.name!r} at t={self._now() / 1e9:.9f} s: {msg['cause']}"
            self._guard.count_locked(cause)
            self._guard.log.write(f"timewarp: non-deterministic advance: {cause}\n")
            self._guard.log.flush()
        elif op == "bye":
            proc.said_bye = True
            self._service.mark_gone_locked(proc)

    def dropped_locked(self, identity: bytes) -> None:
        """Connection ``identity`` ended: its process (if it said hello) is gone."""
        proc = self._registry.by_identity.pop(identity, None)
        if proc is not None:
            self._service.mark_gone_locked(proc)
