"""The process-wide virtual-time runtime: the baton, virtual waits, and thread tracking.

Invariants (deterministic mode):

- At most one tracked thread of the process runs at a time: the one holding the *baton*.
  The others are parked — in a virtual wait, or ready and queued for the baton in a fixed
  order (wake order). A thread gives the baton up only when it enters a virtual wait,
  blocks reading the API facade, or exits; the baton then goes to the head of the ready
  queue. So, given the same wake-ups from the broker, a multi-threaded program runs the
  same interleaving every time.
- The process is *busy* exactly while some thread holds the baton. The broker may move
  time only while every process is idle (and has acknowledged every wake-up it was sent),
  so while any thread runs, virtual time is frozen and ``now()`` is served from a cache
  that the broker refreshes before it wakes anyone.
- Whoever wakes a thread makes it ready at once (the waker's doing), so there is never a
  moment where the waker has blocked and the wakee is not yet counted.

A tracked thread blocked in a wait this runtime cannot see (an unpatched library's lock,
a socket other than the facade's) keeps the baton and the process busy; the broker's stall
guard then asks for stacks and, if told to advance anyway, the runtime detaches that
thread from the baton so the others can go on (a counted non-deterministic advance).

A process whose main thread ended and whose last non-daemon thread ended is exiting, at
that virtual instant: it says ``bye`` at once and hands the baton to nobody again, so its
daemon threads do not run on in virtual time while the interpreter winds down (plain
Python kills them at exit); the broker counts the process gone from that instant.

Threads that this runtime did not see start (started before activation, or through
``_thread.start_new_thread``) are *untracked*: their virtual waits work, but they never
hold the baton and are not counted as busy; one woken by API data runs without the
broker's go and may read the time of the previous instant until the next wake-up.

The main thread waits for the baton in slices of wall time (``SIGNAL_SLICE_S``), so that
a signal handler always runs: see :func:`block_on`.
"""

from __future__ import annotations

import _thread
import os
import sys
import threading
import traceback
from collections import deque
from collections.abc import Callable
from itertools import count
from typing import Any

from timewarp._core import selftime
from timewarp.wire import clockproto
from timewarp.wire.lockback import take_back

WAITING, NOTIFIED, TIMEDOUT = 0, 1, 2

_real_lock = _thread.allocate_lock
_get_ident = _thread.get_ident

# How long (wall time) the main thread blocks at most in one go while it waits for the
# baton; then it looks for a pending signal handler and waits again (see block_on).
SIGNAL_SLICE_S = 0.1


def block_on(lock: Any, main: bool) -> None:
    """Acquire ``lock``, a wait of the runtime (for the baton, for the broker's answer).

    In the main thread, in slices of ``SIGNAL_SLICE_S``: CPython runs a Python signal
    handler only in the main thread, between two bytecodes, and a blocking acquire that
    the signal did not interrupt runs it only when it returns. The signal does not
    interrupt it when it came just before the acquire blocked (its C handler ran on the
    way in) or went to another thread. A virtual wait may never end by itself — after a
    run's end no time moves — so SIGTERM's handler (``raise SystemExit``) waited in vain
    until the launcher's SIGKILL, and the program's last log line was missing in one run
    of two (a determinism failure, about 1 run in 450 of test_crd_operators' kopf run).
    Each slice that ends returns to the interpreter, which runs what is pending: the
    handler's exception leaves here, with ``lock`` not taken."""
    if not main:
        lock.acquire()
        return
    while not lock.acquire(True, SIGNAL_SLICE_S):
        pass  # (returning from acquire ran any pending handler: it may have raised)


def _is_main_thread() -> bool:
    return _get_ident() == threading.main_thread().ident


class ThreadState:
    """One tracked (or untracked) thread, as the runtime sees it."""

    __slots__ = (
        "path",
        "children",
        "wait_no",
        "go",
        "name",
        "done",
        "joiners",
        "tracked",
        "running",
        "daemon",
        "main",
    )

    def __init__(
        self,
        path: tuple[int, ...],
        name: str,
        tracked: bool = True,
        daemon: bool = False,
        main: bool = False,
    ) -> None:
        self.path = path
        self.children = 0
        self.wait_no = 0
        self.go = _real_lock()
        self.go.acquire()  # released by whoever hands this thread the baton
        self.name = name
        self.done = False
        self.joiners: deque[Waiter] = deque()
        self.tracked = tracked
        self.running = False  # free mode: counted in Runtime.running
        self.daemon = daemon
        self.main = main  # the interpreter's main thread: it runs signal handlers

    def wait_go(self) -> None:
        """Block until handed the baton (see :func:`block_on`)."""
        block_on(self.go, self.main)


class Waiter:
    """A thread in one virtual wait. ``state`` goes WAITING -> NOTIFIED | TIMEDOUT once."""

    __slots__ = ("ts", "state", "timer_id", "parked", "on_wake")

    def __init__(self, ts: ThreadState) -> None:
        self.ts = ts
        self.state = WAITING
        self.timer_id = 0
        self.parked = False
        self.on_wake: Callable[[], None] | None = None


class _IoGate:
    """A thread blocked reading an API connection. In deterministic mode a thread under
    the baton (``waiter`` set) waits for the broker's go before it reads, and reads only
    what the go allows on ``conn``; any other reader is in a real read until its data
    ``arrived``."""

    __slots__ = ("ts", "arrived", "conn", "waiter")

    def __init__(self, ts: ThreadState, conn: Any = None, waiter: Waiter | None = None) -> None:
        self.ts = ts
        self.arrived = False
        self.conn = conn
        self.waiter = waiter


class Runtime:
    """State shared by every virtual primitive of this process. One instance,
    ``current.ACTIVE``."""

    def __init__(
        self,
        *,
        now_ns: int,
        epoch_ns: int,
        mono_ns: int,
        mode: str,
        poke: Callable[[], None],
        flush: Callable[[], None] | None = None,
        now_roundtrip: bool = False,
    ) -> None:
        # (an RLock for its owner test, see timewarp.wire.lockback; never taken twice)
        self.lock = _thread.RLock()
        self.now_ns = now_ns
        self.epoch_ns = epoch_ns
        self.mono_ns = mono_ns
        self.mode = mode
        self.deterministic = mode == "deterministic"
        self.now_roundtrip = now_roundtrip or not self.deterministic
        self._poke = poke  # the request loop will send the outbox soon
        self._flush = flush or poke  # send it now (lock held): the caller is about to block
        self.holder: ThreadState | None = None  # deterministic mode: the baton
        self.ready: deque[ThreadState] = deque()
        self.running = 0  # free mode (lockstep, realtime): tracked threads not parked
        self.live = 0  # tracked threads started and not exited
        self.live_nondaemon = 0  # of which non-daemon (the main thread included)
        self.exiting = False  # the last non-daemon thread ended: said bye, runs nobody
        self.threads: dict[int, ThreadState] = {}
        self.outbox: list[dict] = []
        self.acks = 0
        self.io: dict[int, list[int]] = {}  # io wait id -> [port, sent, consumed, seq]
        self.io_gates: dict[int, _IoGate] = {}
        self._io_ids = count(1)
        self._go_nos = count(1)
        self._select_gates: dict[Waiter, list[int]] = {}  # event loops' gates, by wait
        self._timer_ids = count(1)
        self.timers: dict[int, Waiter] = {}
        # timer ids of slack waits (a server thread's poll: see harden_slack_locked)
        self.slack: set[int] = set()
        self._untracked_ids = count(1)
        self.detached: set[ThreadState] = set()
        # round-trip now(): waiters for the broker's answer, served by the request loop
        self.now_waiters: list[list] = []

    # ----------------------------------------------------------------- threads
    def current(self) -> ThreadState:
        ts = self.threads.get(_get_ident())
        if ts is None:
            # A thread we did not see start: its waits work, without the baton.
            ts = ThreadState(
                (1_000_000, next(self._untracked_ids)),
                "untracked",
                tracked=False,
                main=_is_main_thread(),
            )
            self.threads[_get_ident()] = ts
        return ts

    def adopt_main(self) -> ThreadState:
        ts = ThreadState((0,), threading.current_thread().name, main=_is_main_thread())
        with self.lock:
            self.live += 1
            self.live_nondaemon += 1
            self.threads[_get_ident()] = ts
            if self.deterministic:
                self.holder = ts
            else:
                ts.running = True
                self.running += 1
        return ts

    def new_child_locked(self, parent: ThreadState, name: str, daemon: bool = False) -> ThreadState:
        ts = ThreadState((*parent.path, parent.children), name, daemon=daemon)
        parent.children += 1
        self.live += 1
        if not daemon:
            self.live_nondaemon += 1
        self.make_ready_locked(ts)
        return ts

    def enter(self, ts: ThreadState) -> None:
        """First thing a started thread does: wait for the baton."""
        with self.lock:
            self.threads[_get_ident()] = ts
        ts.wait_go()

    def exit(self, ts: ThreadState) -> None:
        with self.lock:
            ts.done = True
            self.live -= 1
            if not ts.daemon:
                self.live_nondaemon -= 1
                if self.live_nondaemon == 0:
                    self._begin_exit_locked()
            while ts.joiners:
                self.wake_locked(ts.joiners.popleft(), NOTIFIED)
            self.threads.pop(_get_ident(), None)
            self._release_baton_locked(ts)
            if self.exiting:
                self._flush()  # bye now, whoever else may still be running (free mode)

    def _begin_exit_locked(self) -> None:
        """No non-daemon thread is left: the process is exiting now, in virtual time. The
        broker hears ``bye`` with the next flush (the baton's release just after), and
        nobody gets the baton again: daemon threads stay where they are until the
        interpreter ends them."""
        if self.exiting:
            return
        self.exiting = True
        self.outbox.append(clockproto.bye())

    # ------------------------------------------------------------------- baton
    def make_ready_locked(self, ts: ThreadState) -> None:
        """``ts`` may run (the caller's doing): queue it for the baton, or in free mode
        let it go at once."""
        if self.exiting:
            return  # the process is ending: nobody runs on in virtual time
        if self.deterministic:
            self.ready.append(ts)
            if self.holder is None:
                self._hand_off_locked()
        elif not ts.running:
            ts.running = True
            self.running += 1
            ts.go.release()

    def _hand_off_locked(self) -> None:
        if self.ready and not self.exiting:
            nxt = self.ready.popleft()
            self.holder = nxt
            nxt.go.release()
        else:
            self.holder = None
            self._flush()

    def _poke_unless_baton(self) -> None:
        """Queued messages must reach the broker before it may move time. Under the baton
        that is when the process goes idle, and the thread that leaves it idle flushes
        (``_hand_off_locked``): no need to wake the request loop before. In free mode
        time moves on its own, so say it now."""
        if not self.deterministic or self.holder is None:
            self._poke()

    def _release_baton_locked(self, ts: ThreadState) -> None:
        if not self.deterministic:
            if ts.running:
                ts.running = False
                self.running -= 1
                if self.running == 0:
                    self._flush()
        elif self.holder is ts:
            self._hand_off_locked()
        elif ts in self.detached:
            self.detached.discard(ts)  # back from its real wait
            self._poke()

    @selftime.timed  # figures only (selftime.py)
    def yield_baton(self) -> None:
        """sleep(0): let every ready thread run once before continuing."""
        with self.lock:
            ts = self.current()
            if not self.deterministic or not ts.tracked or self.holder is not ts or not self.ready:
                return
            self.ready.append(ts)
            self._hand_off_locked()
        ts.wait_go()

    # ------------------------------------------------------------------- waits
    @selftime.timed  # figures only (selftime.py)
    def park_locked(self, waiter: Waiter, deadline_ns: int | None, *, sync: bool = False) -> None:
        """Block the calling thread in a virtual wait. Called with ``lock`` held; returns
        with it held, once the waiter was woken and (if tracked) holds the baton again.
        ``sync``: a wait another thread of the process must end (a lock, a condition, an
        event, a join), as opposed to a sleep or an API read."""
        if waiter.state != WAITING:
            return
        ts = waiter.ts
        if sync and ts.tracked and self.slack:
            self.harden_slack_locked()
        if deadline_ns is not None:
            if deadline_ns <= self.now_ns or self.exiting:
                # (exiting: an atexit handler's timed wait; the broker fires no more timers)
                waiter.state = TIMEDOUT
                return
            self._add_timer_locked(waiter, deadline_ns)
        waiter.parked = True
        if ts.tracked:
            self._release_baton_locked(ts)
        try:
            # (inside the try: a signal handler that raises — SIGTERM's SystemExit — may
            # run right after the release, and the caller's ``with lock`` releases again)
            self.lock.release()
            ts.wait_go()
        finally:
            take_back(self.lock)

    def _add_timer_locked(self, waiter: Waiter, deadline_ns: int, slack: bool = False) -> None:
        ts = waiter.ts
        tid = next(self._timer_ids)
        waiter.timer_id = tid
        self.timers[tid] = waiter
        if slack:
            self.slack.add(tid)
        ts.wait_no += 1
        # Under the baton registrations happen in a reproducible order, so the
        # registration sequence is a deterministic tie-break for equal deadlines.
        self.outbox.append(clockproto.timer(tid, deadline_ns, [tid], slack))
        self._poke_unless_baton()

    def harden_slack_locked(self) -> None:
        """Every slack wait of the process becomes an ordinary timed wait, due at its
        deadline. A slack timer (a server thread's poll timeout, ``servers``) never moves
        time by itself; but a thread that now waits for another thread may be waiting for
        that poll — ``socketserver``'s ``shutdown()`` sets a flag and waits for
        ``serve_forever`` to notice it at its next poll — which must then come at its
        instant, not whenever something else moves time. Called under the baton (at a
        reproducible point); the polls set after this are slack again."""
        for tid in sorted(self.slack):
            if tid in self.timers:
                self.outbox.append(clockproto.harden(tid))
        self.slack.clear()
        self._poke_unless_baton()

    def wake_locked(self, waiter: Waiter, how: int) -> bool:
        """Make a waiting thread ready (the waker's doing). False if it was already woken."""
        if waiter.state != WAITING:
            return False
        waiter.state = how
        if waiter.timer_id and how != TIMEDOUT:
            self.slack.discard(waiter.timer_id)
            if self.timers.pop(waiter.timer_id, None) is not None:
                self.outbox.append(clockproto.cancel(waiter.timer_id))
                self._poke_unless_baton()
        if waiter.parked:
            ts = waiter.ts
            if ts.tracked:
                self.make_ready_locked(ts)
            else:
                ts.go.release()
        if waiter.on_wake is not None:
            waiter.on_wake()
        return True

    def wait_for_wake(self, deadline_ns: int | None) -> int:
        """A bare wait with nobody to notify it (sleep). Returns the waiter's final state."""
        with self.lock:
            waiter = Waiter(self.current())
            self.park_locked(waiter, deadline_ns)
            return waiter.state

    # ----------------------------------------------- selector waits (asyncio)
    @selftime.timed  # figures only (selftime.py)
    def begin_external_wait(
        self,
        waiter: Waiter,
        deadline_ns: int | None,
        conns: list[Any] = (),  # type: ignore[assignment]
        real_io: bool = False,
        slack: bool = False,
    ) -> None:
        """The thread is about to block in a real wait that ``wake_locked`` can interrupt
        through ``waiter.on_wake`` (an event loop's self-pipe). Gives up the baton.

        ``conns``: the API connections (``netio._Conn``) the loop waits to read, reported
        like a reader's: the broker's go for any of them wakes ``waiter``. ``real_io``:
        the loop also waits for real I/O that completes without the broker (a TLS
        handshake, a connect, a full send buffer): the process stays busy meanwhile.
        ``slack``: the deadline is a poll's, which never moves time by itself (see
        :meth:`harden_slack_locked`)."""
        with self.lock:
            if deadline_ns is not None:
                self._add_timer_locked(waiter, deadline_ns, slack)
            ts = waiter.ts
            ids = self._select_gates[waiter] = []
            for conn in conns:
                io_id = next(self._io_ids)
                self.io[io_id] = [conn.port, conn.sent, conn.consumed, conn.seq]
                self.io_gates[io_id] = _IoGate(ts, conn, waiter)
                ids.append(io_id)
            if real_io:  # a real read: busy until the wait ends
                io_id = next(self._io_ids)
                self.io_gates[io_id] = _IoGate(ts, None, None)
                ids.append(io_id)
            waiter.parked = True
            # parked threads get the baton via go; wake_locked queues us as usual
            if ts.tracked:
                self._release_baton_locked(ts)
            elif conns or real_io:
                self._poke()

    @selftime.timed  # figures only (selftime.py)
    def end_external_wait(self, waiter: Waiter) -> None:
        """The real wait returned: rejoin the baton queue (if nobody woke us, real I/O did)."""
        ts = waiter.ts
        with self.lock:
            for io_id in self._select_gates.pop(waiter, ()):
                self.io_gates.pop(io_id, None)  # (a released one is gone already)
                self.io.pop(io_id, None)
            if waiter.state == WAITING:
                waiter.on_wake = None
                self.wake_locked(waiter, NOTIFIED)
        if ts.tracked:
            ts.wait_go()

    def report_outside_input(self, cause: str) -> None:
        """Input from outside the simulation (a real connection to a server socket, see
        ``servers``) made a thread run without the broker's go: in deterministic mode the
        broker counts a non-deterministic advance, with ``cause``."""
        with self.lock:
            if self.deterministic:
                self.outbox.append(clockproto.woke(cause))
                self._poke()

    # ------------------------------------------------------------------- clock
    def now(self) -> int:
        if not self.now_roundtrip:
            return self.now_ns
        box = [_real_lock(), 0]
        box[0].acquire()
        with self.lock:
            self.now_waiters.append(box)
            self._flush()
        block_on(box[0], _is_main_thread())
        return box[1]

    # ------------------------------------------------- request-loop callbacks
    def on_fire_locked(self, timer_ids: list[int], t_ns: int) -> None:
        if t_ns > self.now_ns:
            self.now_ns = t_ns
        for tid in timer_ids:
            self.slack.discard(tid)
            waiter = self.timers.pop(tid, None)
            if waiter is not None:
                self.wake_locked(waiter, TIMEDOUT)
        self.acks += 1

    def on_time_locked(self, t_ns: int) -> None:
        if t_ns > self.now_ns:
            self.now_ns = t_ns
        self.acks += 1

    def snapshot_locked(self) -> tuple[bool, int, list[list[int]], int, int, int]:
        if self.deterministic:
            # a thread in a real read (not one under the baton waiting for the broker's
            # go) runs as soon as its data arrives
            reading = any(g.waiter is None and not g.arrived for g in self.io_gates.values())
            busy = self.holder is not None or reading
            runnable = len(self.ready) + (self.holder is not None)
        else:
            runnable = self.running
            busy = runnable > 0
        # (the rows themselves are never changed in place — a wait's row is replaced or
        # removed — so the report and the flush's last-state key may share them)
        io = list(self.io.values())
        detached = len(self.detached)
        return (busy, self.acks, io, runnable, max(0, self.live - runnable - detached), detached)

    def detach_holder_locked(self) -> None:
        """Stall guard said advance: let the others run while the holder is stuck."""
        if self.holder is not None:
            self.detached.add(self.holder)
            self._hand_off_locked()

    # ------------------------------------------------------------- facade I/O
    @selftime.timed  # figures only (selftime.py)
    def begin_io_wait(self, port: int, sent: int, consumed: int, seq: int) -> int:
        """The calling thread is about to block in a real read of an API connection (free
        mode, or a thread outside the baton; a deterministic reader under the baton uses
        :meth:`wait_io_release`): give up the baton and report ``[port, sent, consumed,
        seq]``."""
        with self.lock:
            ts = self.current()
            io_id = next(self._io_ids)
            self.io[io_id] = [port, sent, consumed, seq]
            self.io_gates[io_id] = _IoGate(ts)
            if ts.tracked:
                self._release_baton_locked(ts)
            self._poke()
            return io_id

    def reads_gated(self) -> bool:
        """Deterministic mode, a thread under the baton: it reads an API connection only
        as far as the broker allowed (see :meth:`wait_io_release`)."""
        if not self.deterministic:
            return False
        # Without the lock: only a thread itself adds or removes its own entry (enter,
        # exit, current), so the calling thread's entry cannot change under it.
        ts = self.threads.get(_get_ident())
        if ts is not None:
            return ts.tracked
        with self.lock:
            return self.current().tracked

    @selftime.timed  # figures only (selftime.py)
    def wait_io_release(self, conn: Any) -> None:
        """The calling thread read everything the broker let it read on ``conn`` (a
        ``_netio._Conn``): report ``[port, sent, consumed, seq]``, give up the baton and
        return once the broker let it go again, with ``conn.allowed`` raised. What it
        then reads was written before the go, whatever the timing: the interleaving of
        the process's threads is the same every run."""
        with self.lock:
            ts = self.current()
            io_id = next(self._io_ids)
            self.io[io_id] = [conn.port, conn.sent, conn.consumed, conn.seq]
            waiter = Waiter(ts)
            self.io_gates[io_id] = _IoGate(ts, conn, waiter)
            self.park_locked(waiter, None)

    @selftime.timed  # figures only (selftime.py)
    def end_io_wait(self, io_id: int) -> None:
        """The real read returned (data, EOF or error): run again."""
        with self.lock:
            gate = self.io_gates[io_id]
            gate.arrived = True
            ts = gate.ts
            self._finish_io_locked(io_id)
            if not ts.tracked:
                return
        ts.wait_go()

    def on_io_release_locked(self, ports: list[list[int]], t_ns: int) -> None:
        """The broker's go for the threads reading these ports, in this order, each up to
        ``upto`` bytes consumed in all (request-loop thread). All are queued for the
        baton before any of them runs: the lock is held throughout."""
        if t_ns > self.now_ns:
            self.now_ns = t_ns
        self.acks += 1
        for port, upto in ports:
            for io_id, item in self.io.items():
                gate = self.io_gates[io_id]
                if item[0] == port and gate.waiter is not None:
                    gate.conn.allowed = max(gate.conn.allowed, upto)
                    gate.conn.go_no = next(self._go_nos)
                    del self.io[io_id], self.io_gates[io_id]
                    self.wake_locked(gate.waiter, NOTIFIED)
                    break

    def _finish_io_locked(self, io_id: int) -> None:
        self.io.pop(io_id, None)
        gate = self.io_gates.pop(io_id)
        if gate.ts.tracked:
            self.make_ready_locked(gate.ts)
        self._poke()

    def format_stacks(self) -> str:
        frames = sys._current_frames()
        out = []
        with self.lock:
            by_ident = dict(self.threads)
            holder = self.holder
        names = {t.ident: t.name for t in threading.enumerate()}
        for ident, frame in frames.items():
            ts = by_ident.get(ident)
            if ts is None:
                continue  # the runtime's own threads
            role = (
                "holds the baton" if ts is holder else ("ready" if ts in self.ready else "waiting")
            )
            out.append(f"Thread {names.get(ident, ts.name)!r} [{role}] (pid {os.getpid()}):\n")
            out.extend(traceback.format_stack(frame))
        return "".join(out)
