"""The clock client: one connection to the broker's clock service per process, read by
one background thread of the runtime (the request loop).

Everything the process says is written on the same connection by whichever thread holds
the runtime lock: threads append to the runtime's outbox and either poke the loop through
a pipe or — when the last runnable thread parks and the process goes quiescent — flush it
themselves, saving a thread hop per wake-up. A flush sends the outbox in order, followed
by a ``state`` message whenever the process's (busy, ack, io) snapshot changed — so a
timer always reaches the broker before the report that its thread blocked.

Round-trip ``now()`` requests from many threads are gathered: while one request is in
flight, later callers wait for its answer too, so N concurrent readers cost far fewer
than N round trips (batsky-go's requester loop).
"""

from __future__ import annotations

import os
import select
import socket
import sys
import threading
import time as _time

from timewarp._core import runtime as _runtime
from timewarp._core import selftime
from timewarp.wire import clocknet, clockproto
from timewarp.wire.wakeup import Wakeup

_BROKER_CHECK_S = 1.0


class BrokerUnreachable(RuntimeError):
    pass


class ClockClient:
    def __init__(
        self,
        endpoint: str,
        name: str,
        *,
        broker_pid: int | None = None,
        token: str | None = None,
    ) -> None:
        clocknet.parse(endpoint)  # a malformed endpoint fails here, naming it
        self.endpoint = endpoint
        self.name = name
        self.token = token
        self.broker_pid = broker_pid
        self._sock: socket.socket | None = None
        # The socket's own methods, bound before the runtime's facade byte accounting
        # wraps socket.socket's: clock traffic is not API traffic.
        self._sendall = None
        self._recv = None
        self._unpacker = clockproto.Unpacker()
        self._ready = False  # welcomed: the outbox may be flushed
        self._early: list[bytes] = []
        self._wakeup = Wakeup()
        self._poked = False
        self._loop_ident: int | None = None
        self.runtime: _runtime.Runtime | None = None
        self._last_state: tuple | None = None
        self._rid = 0
        self._now_in_flight: list[list] | None = None
        self.round_trips = 0  # now() requests sent (tests and the benchmark read this)
        self._closed = False
        self._bye_sent: threading.Event | None = None

    # -- handshake ---------------------------------------------------------
    def handshake(self, timeout_s: float) -> dict:
        give_up = _time.monotonic() + timeout_s
        unreachable = (
            f"timewarp: no answer from the broker's clock service at {self.endpoint} "
            f"within {timeout_s:g} s (set by {clockproto.ENV_ENDPOINT}); is the broker running?"
        )
        try:
            sock = clocknet.connect(self.endpoint, timeout_s)
        except OSError as exc:
            raise BrokerUnreachable(f"{unreachable} ({exc.strerror or exc})") from None
        self._sock = sock
        self._sendall, self._recv = sock.sendall, sock.recv
        try:
            self._sendall(clockproto.pack([clockproto.hello(self.name, os.getpid(), self.token)]))
            frames: list[bytes] = []
            while not frames:
                left = give_up - _time.monotonic()
                if left <= 0 or not select.select([sock], [], [], left)[0]:
                    raise BrokerUnreachable(unreachable)
                data = self._recv(65536)
                if not data:
                    raise BrokerUnreachable(f"{unreachable} (it closed the connection)")
                frames = self._unpacker.feed(data)
        except OSError as exc:
            raise BrokerUnreachable(f"{unreachable} ({exc.strerror or exc})") from None
        msg = clockproto.decode_to_runtime(frames[0])
        if msg["op"] == "error":
            raise BrokerUnreachable(f"timewarp: the broker refused this process: {msg['message']}")
        if msg["op"] != "welcome":
            raise BrokerUnreachable(
                f"timewarp: expected a welcome from the broker, got {msg['op']!r}"
            )
        if msg["v"] != clockproto.VERSION:
            raise BrokerUnreachable(
                f"timewarp: the broker speaks clock protocol v{msg['v']}, this runtime "
                f"v{clockproto.VERSION} (they must come from one installation)"
            )
        self._early = frames[1:]  # anything the broker said right after (handled by the loop)
        self._ready = True
        return msg

    def poke(self) -> None:
        # Called with the runtime lock held; one byte per batch of changes is enough, and
        # none from the loop itself (it flushes after handling what woke it).
        if not self._poked:
            self._poked = True
            if threading.get_ident() != self._loop_ident:
                self._wakeup.poke()

    def start(self, runtime: _runtime.Runtime) -> None:
        self.runtime = runtime
        t = threading.Thread(target=self._loop, name="timewarp-clock", daemon=True)
        # The loop thread is the runtime's own: it must not be tracked as a program thread.
        t._timewarp_internal = True  # type: ignore[attr-defined]
        t.start()

    # -- the loop ------------------------------------------------------------
    def _loop(self) -> None:
        self._loop_ident = threading.get_ident()
        poller = select.poll()
        sock_fd = self._sock.fileno()
        poller.register(sock_fd, select.POLLIN)
        poller.register(self._wakeup.fd, select.POLLIN)
        last_check = _time.monotonic()
        try:
            for frame in self._early:
                self._handle(clockproto.decode_to_runtime(frame))
            while not self._closed:
                ready = [fd for fd, _ in poller.poll(int(_BROKER_CHECK_S * 1000))]
                if self._wakeup.fd in ready:
                    self._wakeup.drain()
                if sock_fd in ready:
                    data = self._recv(65536)
                    if not data:
                        self._broker_gone("it closed the clock connection")
                    for frame in self._unpacker.feed(data):
                        self._handle(clockproto.decode_to_runtime(frame))
                if self._poked:  # (a stale read only costs one more pass: the pipe has a byte)
                    self._flush()
                if _time.monotonic() - last_check >= _BROKER_CHECK_S:
                    last_check = _time.monotonic()
                    self._check_broker_alive()
        except OSError as exc:
            self._broker_gone(f"clock connection failed: {exc}")
        except Exception as exc:  # a broken clock must never turn into a silent hang
            sys.stderr.write(f"timewarp: clock client failed: {exc!r}\n")
            sys.stderr.flush()
            os._exit(3)

    def _broker_gone(self, why: str) -> None:
        if self._closed:  # said bye: the broker may close first
            return
        broker = "the broker" if self.broker_pid is None else f"the broker (pid {self.broker_pid})"
        sys.stderr.write(f"timewarp: {broker} is gone ({why}); stopping this process\n")
        sys.stderr.flush()
        os._exit(3)

    def _check_broker_alive(self) -> None:
        if self.broker_pid is None:
            return
        try:
            os.kill(self.broker_pid, 0)
        except ProcessLookupError:
            sys.stderr.write(
                f"timewarp: the broker (pid {self.broker_pid}) is gone; stopping this process\n"
            )
            sys.stderr.flush()
            os._exit(3)
        except PermissionError:
            pass

    def _handle(self, msg: dict) -> None:
        rt = self.runtime
        op = msg["op"]
        # A wake-up is acknowledged in the state report; when it woke nobody (the waiter
        # had gone another way) the process is still idle and must say so now.
        if op == "fire":
            with rt.lock:
                rt.on_fire_locked(msg["ids"], msg["t"])
                self.flush_locked()
        elif op == "time":
            with rt.lock:
                rt.on_time_locked(msg["t"])
                self.flush_locked()
        elif op == "io":
            with rt.lock:
                rt.on_io_release_locked(msg["ports"], msg["t"])
                self.flush_locked()
        elif op == "now":
            with rt.lock:
                batch = self._now_in_flight or []
                self._now_in_flight = None
                if msg["t"] > rt.now_ns:
                    rt.now_ns = msg["t"]
                batch.extend(rt.now_waiters)  # latecomers share this answer
                rt.now_waiters = []
            for box in batch:
                box[1] = msg["t"]
                box[0].release()
        elif op == "dump":
            text = rt.format_stacks()
            with rt.lock:
                rt.detach_holder_locked()
                rt.outbox.append(clockproto.stacks(text))
                self.flush_locked(force_state=True)
        elif op == "report":  # the run is over: what the runtime cost, and the profile
            try:
                profile = selftime.write_profile(self.name)
            except Exception as exc:  # a profile is a bonus: the figures still go
                sys.stderr.write(f"timewarp: profile not written: {exc!r}\n")
                profile = ""
            got = selftime.figures(self._loop_ident)
            with rt.lock:
                rt.outbox.append(clockproto.figures(**got, profile=profile))
                self.flush_locked()
        elif op == "error":
            sys.stderr.write(f"timewarp: the broker stopped this process: {msg['message']}\n")
            sys.stderr.flush()
            os._exit(3)

    def _flush(self) -> None:
        with self.runtime.lock:
            self.flush_locked()

    def flush_locked(self, force_state: bool = False) -> None:
        """Send what the runtime queued, then its state if the broker must hear it.
        Any thread may call this, with the runtime lock held."""
        rt = self.runtime
        if rt is None or not self._ready:
            return
        self._poked = False
        out = rt.outbox
        if (
            not out
            and rt.holder is not None
            and rt.deterministic
            and not force_state
            and not rt.now_waiters
            and self._last_state is not None
            and len(rt.detached) == self._last_state[3]
        ):
            # The clock thread after every wake-up it handled: a thread holds the baton,
            # nothing is queued, and the busy report below would be dropped as redundant;
            # say nothing without taking the snapshot (the same decision, cheaper).
            return
        rt.outbox = []
        if rt.now_waiters and self._now_in_flight is None:
            self._rid += 1
            self._now_in_flight = rt.now_waiters
            rt.now_waiters = []
            out.append(clockproto.now_request(self._rid))
            self.round_trips += 1
        bye = any(msg["op"] == "bye" for msg in out)
        if any(msg["op"] == "woke" for msg in out):
            self._last_state = None  # ran without a go: the broker must hear busy, then idle
        snap = rt.snapshot_locked()
        # (busy, ack, io, detached) decide quiescence; the thread counts only ride along,
        # so a hand-over between two threads does not cost a message
        key = (snap[0], snap[1], snap[2], snap[5])
        # Deterministic mode: a busy report tells the broker nothing new — it counts the
        # process as running from the moment it sent the wake-up until an idle report
        # acknowledges it, and looks at the API connections only then — so skip it,
        # unless a thread was detached or came back (the stall guard's business) or the
        # stall guard asked (``force_state``: its report says what the process is doing).
        redundant = (
            rt.deterministic
            and not force_state
            and snap[0]
            and self._last_state is not None
            and key[3] == self._last_state[3]
        )
        state = b""
        if (key != self._last_state or force_state) and not redundant and not bye:
            self._last_state = key
            state = clockproto.pack_state(*snap)  # (last: after the timers it reports on)
        if not (out or state) or self._closed:
            return
        if bye:
            self._closed = True  # from now on the broker may close the connection first
        try:
            self._sendall(clockproto.pack(out) + state if out else state)
        except OSError as exc:
            self._broker_gone(f"clock connection failed: {exc}")
        if bye and self._bye_sent is not None:
            self._bye_sent.set()

    def send_bye(self, timeout_s: float = 2.0) -> None:
        """Last words at exit: queued messages, then ``bye``, sent by the loop thread."""
        if self._closed or self.runtime is None:
            return
        self._bye_sent = threading.Event()
        with self.runtime.lock:
            self.runtime.outbox.append(clockproto.bye())
            self.poke()
        self._bye_sent.wait(timeout_s)
