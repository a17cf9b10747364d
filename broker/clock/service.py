"""The broker's clock service: owns simulated time and decides when it may move.

Virtual time is an integer number of nanoseconds since the simulation started. It moves
only through :meth:`ClockService.advance_to`, called by a driver (the standalone runner,
or the Batsim side of the broker) once :meth:`wait_quiescent` said every scheduler process
is quiescent:

- it said hello (a process the launcher expects but that never connected is not);
- its last ``state`` says no thread runs outside a virtual wait (``busy`` false);
- it acknowledged every ``fire``/``time`` message sent to it (wake-ups are the broker's
  own doing: from the moment a wake-up is sent, the process counts as running);
- every thread it reports blocked reading the API facade has consumed everything the
  facade wrote and the facade owes it nothing (the ``io_checker``).

Timers are ordered by (deadline, owner, key): the broker's own timers first, then each
process's in process-name order and, within a process, by the waiting thread's place in
the thread tree and its wait counter — never by arrival order, so simultaneous wake-ups
are released in the same order every run. A process's timers due at one instant go out in
one ``fire`` message (its runtime runs the woken threads one at a time, in that order);
processes are released one at a time, waiting for quiescence in between.

Stall guard: when some process stays non-quiescent with no clock traffic for
``stall_timeout`` wall seconds, the service asks it for its threads' stacks, reports them,
and counts a non-deterministic advance; with ``on_stall="stop"`` it raises
:class:`ClockStall` instead. Traffic is not progress: a process that keeps talking (API
requests, clock messages) while virtual time stands still and nothing changes — no
advance, no write to the cluster (the ``progress_probe``), no process arriving or going —
is reported the same way after ``TRAFFIC_STALL_FACTOR`` times as long. (API polling is
normally charged virtual time long before that: ``broker/drivers/pacing.py``.)
"""

from __future__ import annotations

import heapq
import hmac
import os
import secrets
import selectors
import shutil
import socket
import sys
import tempfile
import threading
import time as _wall
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count
from typing import TextIO

from timewarp.wire import clocknet, clockproto
from timewarp.wire.wakeup import Wakeup

DEFAULT_EPOCH_NS = 1_767_225_600 * 1_000_000_000  # 2026-01-01T00:00:00Z
DEFAULT_MONO_NS = 1_000 * 1_000_000_000  # monotonic clocks start at 1000 s
# A process that never waited yet is starting up (importing a large client can take many
# seconds on a loaded machine): the stall guard gives it at least this long.
STARTUP_GRACE_S = 60.0
# How long a thread's API data may stay "being written" (queued watch events) before it
# is let go to read anyway: the writer may be stuck on a full socket buffer.
FLUSH_GRACE_S = 0.02
_UNBOUNDED = 1 << 62  # the reading limit when the facade's byte counts are not known
MAX_MESSAGE_BYTES = 64 << 20  # a longer line is not a clock message (stacks are ~100 kB)
# Traffic without progress (requests and clock messages at one virtual instant, nothing
# changing) is a stall too, after this many stall timeouts: a legitimately heavy reader at
# one instant gets a while before it is called stuck (60 s with the default 10 s).
TRAFFIC_STALL_FACTOR = 6
# A Unix socket path must fit in sockaddr_un (108 bytes on Linux): a long TMPDIR gets a
# private directory in /tmp instead, and only if that fails too, loopback TCP (where every
# hello must carry the process's token: any local user can reach a TCP port).
_MAX_SOCKET_PATH = 100
_SHORT_SOCKET_DIRS = ("/tmp", "/dev/shm")


class _Connection:
    """One runtime's connection: what was read of a message so far, what is still to be
    written (the socket is non-blocking: a runtime that does not read cannot stall us)."""

    __slots__ = ("sock", "identity", "unpacker", "pending", "want_write")

    def __init__(self, sock: socket.socket, identity: bytes) -> None:
        self.sock = sock
        self.identity = identity
        self.unpacker = clockproto.Unpacker()
        self.pending = b""
        self.want_write = False


_WAKES_DRIVER = frozenset({"state", "hello", "stacks", "bye"})
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


class ClockStall(RuntimeError):
    """A process stayed busy past the stall guard and the policy is to stop."""


IoChecker = Callable[[int, int, int], bool]


@dataclass(eq=False)
class ProcessState:
    name: str
    identity: bytes | None = None
    pid: int | None = None
    busy: bool = True
    ack: int = 0
    sent: int = 0  # fire/time messages sent, to be acknowledged
    io: list[list[int]] = field(default_factory=list)
    runnable: int = 0
    blocked: int = 0
    detached: int = 0
    settled: bool = False  # has been idle at least once (start-up is over)
    gone: bool = False
    said_bye: bool = False  # gone by its own word (exiting), not a dropped connection
    returncode: int | None = None
    stacks: str | None = None

    @property
    def connected(self) -> bool:
        return self.identity is not None


@dataclass(order=True)
class _Timer:
    sort_key: tuple
    proc: ProcessState | None = field(compare=False)
    timer_id: int = field(compare=False)
    fn: Callable[[], None] | None = field(compare=False, default=None)
    cancelled: bool = field(compare=False, default=False)

    @property
    def deadline(self) -> int:
        return self.sort_key[0]

    def cancel(self) -> None:
        self.cancelled = True


class ClockService:
    """Owns virtual time; see the module docstring for when it may move."""

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
        self.stall_timeout = stall_timeout
        self.on_stall = on_stall
        self.log = log or sys.stderr
        self._now = 0
        # Free-running time (lockstep windows): now = max(_now, _floor, _source()).
        self._source: Callable[[], int] | None = None
        self._floor = 0
        self._cond = threading.Condition()
        self._procs: dict[str, ProcessState] = {}
        self._by_identity: dict[bytes, ProcessState] = {}
        self._heap: list[_Timer] = []
        self._timers: dict[tuple[str, int], _Timer] = {}
        self._seq = count()
        self._io_checker: IoChecker | None = None
        self._io_written: Callable[[int], int] | None = None
        self._before_io_release: Callable[[], bool] | None = None
        self._hook_pending: Callable[[], bool] | None = None
        self._driver_waiting = False  # the driver waits in wait_quiescent, its work done
        self._flushing_since: float | None = None
        self._last_activity = _wall.monotonic()
        self._last_progress = self._last_activity
        self._progress_probe: Callable[[], object] | None = None
        self._progress_seen: object = None
        self._traffic = [0, 0]  # clock messages, facade notifications since the last progress
        self._wait_listeners: list[Callable[[str], None]] = []
        self._closed = False
        self._autopilot = False
        self._loop_ident: int | None = None
        # figures for reports and benchmarks
        self.fires = 0
        self.advances = 0
        self.nondeterministic_advances = 0
        self.io_releases = 0
        self.stall_reports: list[str] = []
        self.messages_in = 0

        # Default endpoint: a Unix socket in a private directory (quicker than loopback TCP;
        # a scheduler on another machine needs tcp://).
        self._sockdir: str | None = None
        if endpoint is None:
            self._sockdir = _private_socket_dir()
            endpoint = (
                f"ipc://{os.path.join(self._sockdir, 'clock')}"
                if self._sockdir is not None
                else "tcp://127.0.0.1:*"
            )
        self._listener, self.endpoint = clocknet.listen(endpoint)
        # name -> token: a process proves it is the one its launcher started (see expect)
        self._tokens: dict[str, str] = {}
        self.tokens_required = self.endpoint.startswith("tcp://")
        self.refused_hellos = 0
        self._listener.setblocking(False)
        self._conns: dict[bytes, _Connection] = {}
        self._conn_ids = count(1)
        self._wakeup = Wakeup()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, "listen")
        self._selector.register(self._wakeup.fd, selectors.EVENT_READ, None)
        self._thread = threading.Thread(
            target=self._loop, name="timewarp-clock-service", daemon=True
        )
        self._thread.start()

    # ------------------------------------------------------------------ time
    @property
    def now_ns(self) -> int:
        if self._source is None:
            return max(self._now, self._floor)
        with self._cond:
            return self._current_locked()

    def _current_locked(self) -> int:
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
            t = self._current_locked()
            self._source = None
            return t

    def wall_epoch_ns(self) -> int:
        return self.epoch_ns

    def next_deadline(self) -> int | None:
        with self._cond:
            self._drop_cancelled_locked()
            return self._heap[0].deadline if self._heap else None

    def advance_to(self, t_ns: int) -> None:
        """Move virtual time forward to ``t_ns`` (never past a pending timer)."""
        with self._cond:
            if t_ns < self._now:
                raise ValueError(f"virtual time cannot go back: now={self._now}, asked {t_ns}")
            self._drop_cancelled_locked()
            if self._heap and self._heap[0].deadline < t_ns:
                raise ValueError(
                    f"advance_to({t_ns}) would skip a timer due at {self._heap[0].deadline}"
                )
            if t_ns == self._now:
                return
            pushed = self._move_time_locked(t_ns)
            self._cond.notify_all()
            give_up = _wall.monotonic() + self.stall_timeout
            while any(not p.gone and p.ack != p.sent for p in pushed):
                left = give_up - _wall.monotonic()
                if left <= 0:
                    self.log.write(
                        "timewarp: a process did not acknowledge the new time in "
                        f"{self.stall_timeout:g} s; going on\n"
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
        self._progressed_locked()
        pushed = []
        gated = self.mode == "deterministic"
        for proc in self._procs.values():
            if proc.connected and not proc.gone and proc.io and (not gated or proc.detached):
                self._send_locked(proc, clockproto.time_update(t_ns))
                pushed.append(proc)
        return pushed

    def call_at(
        self, deadline_ns: int, fn: Callable[[], None], *, key: tuple[str, int] | None = None
    ) -> _Timer:
        """A broker-side timer: ``fn`` runs in the driver's thread during release_due.
        Broker-side timers due at one instant run in the order they were set, unless
        ``key`` (a process name and its own sequence number) orders them: timers set by
        concurrent facade threads for different processes must not be ordered by who
        came first."""
        with self._cond:
            seq = next(self._seq)
            name, n = key if key is not None else ("", 0)
            timer = _Timer((deadline_ns, 0, name, (n,), seq), None, seq, fn)
            heapq.heappush(self._heap, timer)
            self._cond.notify_all()
            return timer

    def engage_autopilot(self) -> None:
        """Standalone driving done by the service's own loop: whenever every process is
        quiescent, advance to the next deadline and release its first owner's timers —
        the same steps as ``advance_to`` + ``release_due``, without a hop through a driver
        thread. Only process timers are handled (no ``call_at``); the driver waits in
        :meth:`wait_settled` for what only it can decide (exit, deadlock)."""
        with self._cond:
            self._autopilot = True
        self._poke()

    def wait_settled(self) -> None:
        """Autopilot: block until every process is quiescent and no timer is pending
        (stall guard applied, as in :meth:`wait_quiescent`)."""
        with self._cond:
            while True:
                self._wait_quiescent_locked()
                self._drop_cancelled_locked()
                if not self._heap:
                    return
                self._cond.wait(0.5)

    def _autopilot_step_locked(self) -> None:
        if not all(self._quiescent_locked(p) for p in self._procs.values()):
            self._release_next_io_locked()
            return
        self._drop_cancelled_locked()
        if not self._heap or self._heap[0].proc is None:
            self._cond.notify_all()
            return
        t = self._heap[0].deadline
        if t > self._now and self._move_time_locked(t):
            return  # released once the new time is acknowledged
        self._release_one_owner_locked()

    def _release_one_owner_locked(self) -> tuple[int, Callable[[], None] | None]:
        """Pop the first due timer and its owner's other timers due now; a process's go
        out in one ``fire``. Returns (timers fired, broker-side callback to run)."""
        first = heapq.heappop(self._heap)
        if first.proc is None:
            fn, batch_proc, ids = first.fn, None, []
        else:
            fn = None
            batch_proc, ids = first.proc, [first.timer_id]
            self._timers.pop((batch_proc.name, first.timer_id), None)
            while (
                self._heap
                and self._heap[0].proc is batch_proc
                and self._heap[0].deadline <= self._now
            ):
                nxt = heapq.heappop(self._heap)
                if not nxt.cancelled:
                    ids.append(nxt.timer_id)
                    self._timers.pop((batch_proc.name, nxt.timer_id), None)
            self._send_locked(batch_proc, clockproto.fire(ids, self._now))
        n = max(1, len(ids))
        self.fires += n
        return n, fn

    def release_due(self, wait: bool = True) -> int:
        """Fire every timer due at or before now, one owner at a time, waiting for
        quiescence after each (``wait=False``: free-running modes, no waiting).
        Returns how many timers fired."""
        fired = 0
        while True:
            with self._cond:
                self._drop_cancelled_locked()
                if not self._heap or self._heap[0].deadline > self._now:
                    return fired
                n, fn = self._release_one_owner_locked()
                fired += n
            if fn is not None:
                fn()
            if wait:
                self.wait_quiescent()

    # ---------------------------------------------------------- processes
    def expect(self, name: str, token: str | None = None) -> str:
        """A launcher is about to start process ``name``: not quiescent until it connects.
        Returns the token the process must present in its hello (``ENV_TOKEN``): ``token``
        (the launcher passes the process's facade bearer token: one credential per
        process) or a fresh random one. On a TCP endpoint a hello without the token of
        its name is refused; on a Unix socket (in a 0700 directory) a wrong token is."""
        with self._cond:
            self._procs[name] = ProcessState(name)
        return self.add_token(name, token)

    def add_token(self, name: str, token: str | None = None) -> str:
        """Register (or look up) the token process ``name`` must present in its hello."""
        with self._cond:
            self._tokens[name] = token or self._tokens.get(name) or secrets.token_urlsafe(24)
            return self._tokens[name]

    def process_gone(self, name: str, returncode: int | None = None) -> None:
        with self._cond:
            proc = self._procs.get(name)
            if proc is None:
                return
            self._mark_gone_locked(proc, returncode)

    def _mark_gone_locked(self, proc: ProcessState, returncode: int | None = None) -> None:
        if returncode is not None:
            proc.returncode = returncode
        if proc.gone:
            return
        proc.gone = True
        for key in [k for k in self._timers if k[0] == proc.name]:
            self._timers.pop(key).cancel()
        self._cond.notify_all()
        if self._autopilot:
            self._poke()  # the others may be quiescent now

    def joined(self, name: str) -> bool:
        """Process ``name`` connected to the clock at some point."""
        with self._cond:
            proc = self._procs.get(name)
            return proc is not None and proc.connected

    def never_joined(self, name: str) -> bool:
        """Process ``name`` was launched (``expect``) and has neither connected nor gone."""
        with self._cond:
            proc = self._procs.get(name)
            return proc is not None and not proc.connected and not proc.gone

    def processes(self) -> list[ProcessState]:
        with self._cond:
            return list(self._procs.values())

    def process_of_pid(self, pid: int) -> str | None:
        """The name of the connected, living process whose runtime said hello as ``pid``
        (the facade attributes API requests by it: ``broker/facade/identity.py``)."""
        with self._cond:
            for proc in self._procs.values():
                if proc.pid == pid and proc.connected and not proc.gone:
                    return proc.name
        return None

    def alive(self) -> list[ProcessState]:
        with self._cond:
            return [p for p in self._procs.values() if not p.gone]

    def set_io_checker(
        self, checker: IoChecker | None, written: Callable[[int], int] | None = None
    ) -> None:
        """``checker(port, sent, consumed)`` says how a connection to the facade stands:
        ``"idle"`` (parked: nothing owed either way), ``"busy"`` (a request in flight) or
        ``"ready"`` (data for the client, nothing being handled). A checker returning a
        bool means idle (True) or busy (False). ``written(port)``: the bytes the facade
        wrote on that connection so far — a thread let go may read that far (without it,
        as far as it likes)."""
        with self._cond:
            self._io_checker = checker
            self._io_written = written

    def set_before_io_release(
        self, hook: Callable[[], bool] | None, pending: Callable[[], bool] | None = None
    ) -> None:
        """Deterministic mode: ``hook()`` runs in the thread waiting in
        :meth:`wait_quiescent` (without the lock) each time every process is idle but for
        API data, before a thread is let go to read it. It returns whether it changed
        anything (then the choice is made again). The broker reacts there to what the
        schedulers just did — a binding becomes a running pod — so that the scheduler
        reads the consequences with the data it is let go for, not one round later.

        ``pending()`` (quick, called with the service's lock held) says whether ``hook``
        has anything to do. When it has not, the thread that receives the state report
        making a release possible lets the readers go itself, without waking the driver
        first: the same decision, one thread hand-off sooner."""
        with self._cond:
            self._before_io_release = hook
            self._hook_pending = pending

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

    def set_progress_probe(self, probe: Callable[[], object] | None) -> None:
        """``probe()`` (quick, called with the service's lock held) returns a value that
        changes whenever the world the schedulers act on changed (the facade store's
        resource version): a change is progress for the stall guard, mere traffic is not."""
        with self._cond:
            self._progress_probe = probe
            self._progress_seen = probe() if probe is not None else None

    def add_wait_listener(self, fn: Callable[[str], None]) -> None:
        """``fn(name)`` is called (the service's lock held: keep it quick, take no lock of
        the service's) each time process ``name`` reports itself idle with every API
        connection parked and nothing held back for it: it waits of its own accord (a
        virtual wait, a parked watch), as opposed to waiting on a response the broker
        keeps back. (broker/drivers/pacing.py counts busy polling between such waits.)"""
        with self._cond:
            self._wait_listeners.append(fn)

    def _progressed_locked(self) -> None:
        self._last_progress = self._last_activity = _wall.monotonic()
        self._traffic = [0, 0]

    def _check_progress_locked(self) -> None:
        probe = self._progress_probe
        if probe is not None:
            value = probe()
            if value != self._progress_seen:
                self._progress_seen = value
                self._progressed_locked()

    def notify(self) -> None:
        """Something outside (the facade) may have made a process quiescent: re-check."""
        with self._cond:
            self._last_activity = _wall.monotonic()
            self._traffic[1] += 1
            self._cond.notify_all()
            if self._autopilot:
                self._poke()

    # -------------------------------------------------------- quiescence
    def _quiescent_locked(self, proc: ProcessState) -> bool:
        if proc.gone:
            return True
        if not proc.connected or proc.busy or proc.ack != proc.sent:
            return False
        return all(self._io_state_locked(*item[:3]) in _PARKED for item in proc.io)

    def _next_io_release_locked(self) -> tuple[ProcessState, list[int]] | None:
        """Deterministic mode: when every process is idle but for threads whose API data
        is there (and no request is being handled anywhere), the ones to let go — those of
        the first process by name, responses before watch events, then in connection
        opening order, like simultaneous timers."""
        if self.mode != "deterministic":
            return None
        candidates = []
        flushing = False
        for proc in self._procs.values():
            if proc.gone:
                continue
            if not proc.connected or proc.busy or proc.ack != proc.sent:
                return None
            for port, sent, consumed, seq in proc.io:
                state = self._io_state_locked(port, sent, consumed)
                if state == "busy":
                    return None
                if state == "flushing":
                    flushing = True
                if state in ("ready", "streaming", "flushing"):
                    # responses before watch events, as a real API server's would
                    # usually arrive: a scheduler binding a backlog reads each
                    # binding's answer at once and its watch once, at the end
                    candidates.append((proc.name, state != "ready", seq, port, proc))
        # Events still being written: wait for them, so that the thread let go reads
        # them all at once — unless the writer is stuck because the client's socket
        # buffer is full, which only the client's reading can end (FLUSH_GRACE_S).
        if not flushing:
            self._flushing_since = None
        else:
            now = _wall.monotonic()
            if self._flushing_since is None:
                self._flushing_since = now
            if now - self._flushing_since < FLUSH_GRACE_S:
                return None
        if not candidates:
            return None
        # the first process (by name) lets every reader with data go, in one message: its
        # runtime queues them in this order before any of them runs
        candidates.sort(key=lambda c: c[:3])
        name, proc = candidates[0][0], candidates[0][4]
        return proc, [c[3] for c in candidates if c[0] == name]

    def _release_next_io_locked(self) -> bool:
        release = self._next_io_release_locked()
        if release is None:
            return False
        proc, ports = release
        written = self._io_written
        upto = [[port, written(port) if written else _UNBOUNDED] for port in ports]
        self._send_locked(proc, clockproto.io_release(upto, self._now))
        self.io_releases += 1
        return True

    def quiescent(self) -> bool:
        with self._cond:
            return all(self._quiescent_locked(p) for p in self._procs.values())

    def wait_quiescent(self) -> None:
        """Block until every process is quiescent (or gone). Applies the stall guard."""
        with self._cond:
            self._wait_quiescent_locked()

    def _wait_quiescent_locked(self) -> None:
        self._last_progress = _wall.monotonic()  # the driver is on to something new
        self._traffic = [0, 0]
        while True:
            busy = [p for p in self._procs.values() if not self._quiescent_locked(p)]
            if not busy:
                return
            hook = self._before_io_release
            if hook is not None and self._next_io_release_locked() is not None:
                self._cond.release()  # held once: see wait_quiescent and wait_settled
                try:
                    changed = hook()
                finally:
                    self._cond.acquire()
                if changed:
                    continue
            if self._release_next_io_locked():
                continue
            self._check_progress_locked()
            now = _wall.monotonic()
            idle_for = now - self._last_activity
            limit = self.stall_timeout
            if not all(p.settled for p in busy):
                limit = max(limit, STARTUP_GRACE_S)
            # talking without progress: a longer limit, then the same report
            traffic_limit = max(limit, TRAFFIC_STALL_FACTOR * self.stall_timeout)
            stalled_for = now - self._last_progress
            if idle_for >= limit or stalled_for >= traffic_limit:
                traffic = None if idle_for >= limit else (stalled_for, *self._traffic)
                if self._handle_stall_locked(busy, limit, traffic):
                    return
                continue
            wait = min(0.5, limit - idle_for, traffic_limit - stalled_for)
            if self._flushing_since is not None:
                wait = min(wait, FLUSH_GRACE_S)
            self._driver_waiting = True
            try:
                self._cond.wait(wait)
            finally:
                self._driver_waiting = False

    def _handle_stall_locked(
        self,
        busy: list[ProcessState],
        limit: float,
        traffic: tuple[float, int, int] | None = None,
    ) -> bool:
        """Report the stuck threads; True means: advance anyway. ``traffic``: (seconds,
        clock messages, API notifications) when the processes kept talking without
        progress rather than fell silent."""
        self._gather_stacks_locked(busy)
        report = self._stall_report_locked(busy, limit, traffic)
        self.stall_reports.append(report)
        self.nondeterministic_advances += 1
        self.log.write(report + "\n")
        self.log.flush()
        self._progressed_locked()
        if self.on_stall == "stop":
            raise ClockStall(report)
        self.log.write("timewarp: advancing anyway (counted as a non-deterministic advance)\n")
        # The runtime detached the stuck thread from its baton; if that made the process
        # idle we go on normally, otherwise force this one advance.
        give_up = _wall.monotonic() + 1.0
        while _wall.monotonic() < give_up:
            if all(self._quiescent_locked(p) for p in busy):
                return True
            self._cond.wait(0.05)
        return True

    def _gather_stacks_locked(self, busy: list[ProcessState]) -> None:
        """Ask every connected stuck process for its threads' stacks; wait up to 2 s."""
        for proc in busy:
            proc.stacks = None
            if proc.connected:
                self._write_locked(proc.identity, clockproto.dump())
        deadline = _wall.monotonic() + 2.0
        while any(p.connected and p.stacks is None and not p.gone for p in busy):
            left = deadline - _wall.monotonic()
            if left <= 0:
                break
            self._cond.wait(left)

    def _stall_report_locked(
        self,
        busy: list[ProcessState],
        limit: float,
        traffic: tuple[float, int, int] | None,
    ) -> str:
        """The stall guard's report: since when, and for each stuck process why it is not
        quiescent, with its stacks."""
        if traffic is None:
            head = f"no progress for {limit:g} s of wall time"
        else:
            seconds, messages, api = traffic
            head = (
                f"no progress for {seconds:.0f} s of wall time while generating traffic "
                f"({messages} clock messages, {api} API responses and events; virtual time "
                "stood still and the cluster did not change)"
            )
        lines = [
            f"timewarp: stall guard: {head} at virtual t={self._now / 1e9:.9f} s; these "
            "processes are not in a virtual wait:"
        ]
        for proc in busy:
            if not proc.connected:
                lines.append(
                    f"- process {proc.name!r} never connected to the clock service "
                    "(not run under `timewarp run`, or its runtime did not start)"
                )
            else:
                why = self._why_busy_locked(proc)
                lines.append(f"- process {proc.name!r} (pid {proc.pid}): {'; '.join(why)}")
                lines.append(proc.stacks or "  (no stacks received)")
        return "\n".join(lines)

    def _why_busy_locked(self, proc: ProcessState) -> list[str]:
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

    def collect_stacks(self, name: str, timeout_s: float = 2.0) -> str:
        """Ask process ``name`` for its threads' stacks (deadlock and stall reports)."""
        with self._cond:
            proc = self._procs.get(name)
            if proc is None or not proc.connected or proc.gone:
                return "(process not connected)"
            proc.stacks = None
            self._write_locked(proc.identity, clockproto.dump())
            deadline = _wall.monotonic() + timeout_s
            while proc.stacks is None and not proc.gone:
                left = deadline - _wall.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return proc.stacks or "(no stacks received)"

    # --------------------------------------------------------------- loop
    def _send_locked(self, proc: ProcessState, msg: dict) -> None:
        if proc.identity is None or proc.gone:
            return
        if msg["op"] in ("fire", "time", "io"):
            proc.sent += 1
        self._write_locked(proc.identity, msg)

    def _write_locked(self, identity: bytes, msg: dict) -> None:
        """Write ``msg`` on the connection now, from whichever thread decided it (no hop
        through the loop thread); what the socket does not take waits for the loop."""
        conn = self._conns.get(identity)
        if conn is None:
            return
        queued = bool(conn.pending)
        conn.pending += clockproto.pack([msg])
        if not queued:  # otherwise the loop is already waiting to write, in order
            self._write_pending_locked(conn)
            if conn.pending:
                self._poke()  # the loop writes the rest when the socket can take it

    def _poke(self) -> None:
        if threading.get_ident() != self._loop_ident:  # the loop looks again anyway
            self._wakeup.poke()

    def _drop_cancelled_locked(self) -> None:
        while self._heap and (
            self._heap[0].cancelled or (self._heap[0].proc is not None and self._heap[0].proc.gone)
        ):
            heapq.heappop(self._heap)

    def _loop(self) -> None:
        self._loop_ident = threading.get_ident()
        selector = self._selector
        while not self._closed:
            try:
                ready = selector.select(0.5)
            except (OSError, ValueError):
                return  # closed under us
            for key, events in ready:
                conn = key.data
                if conn is None:
                    self._wakeup.drain()
                elif conn == "listen":
                    self._accept()
                else:
                    if events & selectors.EVENT_WRITE:
                        with self._cond:
                            self._write_pending_locked(conn)
                    if events & selectors.EVENT_READ:
                        self._read(conn)
            with self._cond:
                if self._autopilot:
                    self._autopilot_step_locked()
                for conn in list(self._conns.values()):
                    if bool(conn.pending) != conn.want_write:
                        conn.want_write = bool(conn.pending)
                        mask = selectors.EVENT_READ
                        if conn.want_write:
                            mask |= selectors.EVENT_WRITE
                        selector.modify(conn.sock, mask, conn)

    def _accept(self) -> None:
        try:
            sock, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        sock.setblocking(False)
        clocknet.tune(sock)
        conn = _Connection(sock, f"c{next(self._conn_ids)}".encode())
        with self._cond:
            self._conns[conn.identity] = conn
        self._selector.register(sock, selectors.EVENT_READ, conn)

    def _read(self, conn: _Connection) -> None:
        try:
            data = conn.sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(conn)
            return
        for frame in conn.unpacker.feed(data):
            self._receive(conn.identity, frame)
        if conn.unpacker.pending > MAX_MESSAGE_BYTES:
            text = f"clock message longer than {MAX_MESSAGE_BYTES} bytes: not a clock message"
            self.log.write(f"timewarp: broker: {text}\n")
            with self._cond:
                self._write_locked(conn.identity, clockproto.error(text))
            self._drop(conn)

    def _write_pending_locked(self, conn: _Connection) -> None:
        try:
            sent = conn.sock.send(conn.pending)
        except BlockingIOError:
            return
        except OSError:  # the connection is gone: the loop sees it end
            conn.pending = b""
            return
        conn.pending = conn.pending[sent:]

    def _drop(self, conn: _Connection) -> None:
        """The connection ended: its process is gone (it said bye, exited or died)."""
        with self._cond:
            self._conns.pop(conn.identity, None)
            proc = self._by_identity.pop(conn.identity, None)
            if proc is not None:
                self._mark_gone_locked(proc)
        try:
            self._selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()

    def _receive(self, identity: bytes, frame: bytes) -> None:
        """One message from a runtime: decoded (a malformed one is answered with an error),
        counted as traffic, a hello's token checked, then applied; the driver is woken
        only for what can end its wait."""
        try:
            msg = clockproto.decode_to_broker(frame)
        except clockproto.ProtocolError as exc:
            self.log.write(f"timewarp: broker: {exc}\n")
            with self._cond:
                self._write_locked(identity, clockproto.error(str(exc)))
            return
        with self._cond:
            self.messages_in += 1
            self._last_activity = _wall.monotonic()
            self._traffic[0] += 1
            op, conn = msg["op"], None
            if op in ("hello", "bye", "stacks"):
                self._progressed_locked()
            refusal = self._check_token_locked(msg) if op == "hello" else None
            if refusal is not None:
                self.refused_hellos += 1
                self.log.write(f"timewarp: broker: {refusal}\n")
                self._write_locked(identity, clockproto.error(refusal))
                conn = self._conns.get(identity)
            elif op == "hello":
                self._hello_locked(identity, msg)
            else:
                proc = self._by_identity.get(identity)
                if proc is None:
                    text = f"clock message {op!r} from a process that did not say hello"
                    self._write_locked(identity, clockproto.error(text))
                    return
                self._apply_locked(proc, identity, msg)
            # Wake the driver only for what can end its waits (a state report: idle, acks;
            # arrivals and departures; stacks): a timer or a now() cannot, and each wake-up
            # is a thread fighting the loop for the GIL. Under autopilot the loop itself
            # acts on state reports.
            if refusal is None and op in _WAKES_DRIVER and (not self._autopilot or op != "state"):
                if op != "state" or not self._release_io_for_driver_locked():
                    self._cond.notify_all()
        if refusal is not None and conn is not None:
            self._drop(conn)  # never registered: no process to mark gone, none to blame

    def _apply_locked(self, proc: ProcessState, identity: bytes, msg: dict) -> None:
        """One message of a process that said hello: a question (``now``), a timer set or
        cancelled, its state, its stacks, its last words."""
        op = msg["op"]
        if op == "now":
            t = self._current_locked()
            self._write_locked(identity, clockproto.now_reply(msg["rid"], t))
        elif op == "timer":
            self._add_process_timer_locked(proc, msg)
        elif op == "cancel":
            timer = self._timers.pop((proc.name, msg["id"]), None)
            if timer is not None:
                timer.cancel()
        elif op == "state":
            self._on_state_locked(proc, msg)
        elif op == "stacks":
            proc.stacks = msg["text"]
        elif op == "bye":
            proc.said_bye = True
            self._mark_gone_locked(proc)

    def _on_state_locked(self, proc: ProcessState, msg: dict) -> None:
        """A state report: what decides whether ``proc`` is quiescent (busy, acks, the API
        connections its threads block reading) and, when it waits of its own accord with
        every connection parked, the wait listeners hear of it."""
        proc.busy, proc.ack, proc.io = msg["busy"], msg["ack"], msg["io"]
        proc.runnable, proc.blocked = msg["runnable"], msg["blocked"]
        if proc.detached != msg["detached"]:
            self._progressed_locked()
        proc.detached = msg["detached"]
        if not proc.busy:
            proc.settled = True
            if self._wait_listeners and all(
                self._io_state_locked(*item[:3]) == "idle" for item in proc.io
            ):
                for fn in self._wait_listeners:
                    fn(proc.name)

    def _check_token_locked(self, msg: dict) -> str | None:
        """Why a hello is refused (None: accepted)."""
        name, token = msg["name"], msg.get("token")
        expected = self._tokens.get(name)
        if token is not None and expected is not None:
            if hmac.compare_digest(token.encode(), expected.encode()):
                return None
            return f"clock hello from {name!r} with a wrong token: refused"
        if self.tokens_required:
            return (
                f"clock hello from {name!r} without the token its launcher gave it "
                f"({clockproto.ENV_TOKEN}): refused on the TCP endpoint {self.endpoint}"
            )
        return None

    def _release_io_for_driver_locked(self) -> bool:
        """A state report made a release possible while the driver waits with nothing
        for its hook to do: let the readers go from here, as the driver would on waking."""
        if not self._driver_waiting or self._autopilot:
            return False
        if self._before_io_release is not None:
            pending = self._hook_pending
            if pending is None or pending():
                return False
        return self._release_next_io_locked()

    def _hello_locked(self, identity: bytes, msg: dict) -> None:
        name = msg["name"]
        proc = self._procs.get(name)
        if proc is not None and (proc.connected or proc.gone):
            n = 2
            while f"{name}#{n}" in self._procs:
                n += 1
            name = f"{name}#{n}"
            proc = None
        if proc is None:
            proc = ProcessState(name)
            self._procs[name] = proc
        proc.identity = identity
        proc.pid = msg["pid"]
        proc.busy = True
        self._by_identity[identity] = proc
        self._write_locked(
            identity, clockproto.welcome(self._now, self.epoch_ns, self.mono_ns, self.mode)
        )

    def _add_process_timer_locked(self, proc: ProcessState, msg: dict) -> None:
        deadline = msg["deadline"]
        if deadline <= self._now:
            # The runtime never asks for a past deadline; a stale one fires at once.
            deadline = self._now
        timer = _Timer(
            (deadline, 1, proc.name, tuple(msg["key"]), next(self._seq)), proc, msg["id"]
        )
        self._timers[(proc.name, msg["id"])] = timer
        heapq.heappush(self._heap, timer)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._poke()
        self._thread.join(2)
        for conn in list(self._conns.values()):
            conn.sock.close()
        self._conns.clear()
        self._selector.close()
        self._listener.close()
        clocknet.unlink(self.endpoint)
        if self._sockdir is not None:
            shutil.rmtree(self._sockdir, ignore_errors=True)
        self._wakeup.close()

    def __enter__(self) -> ClockService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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


def _private_socket_dir() -> str | None:
    """A new 0700 directory whose ``clock`` socket path fits in sockaddr_un: under
    TMPDIR, or a short system directory when TMPDIR is long; None if there is none."""
    for parent in (None, *_SHORT_SOCKET_DIRS):
        try:
            path = tempfile.mkdtemp(prefix="timewarp-clock-", dir=parent)
        except OSError:
            continue
        if len(os.path.join(path, "clock")) <= _MAX_SOCKET_PATH:
            return path
        os.rmdir(path)
    return None
