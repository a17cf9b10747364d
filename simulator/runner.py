"""The ZMQ side: Batsim's REQ socket around a :class:`~simulator.engine.Simulator`.

Like Batsim, the simulator *connects* a REQ socket to the decision process's REP endpoint
(start order does not matter: the connection is retried until the peer binds), speaks
first, and waits for exactly one reply per message, SIMULATION_ENDS included. Over
``tcp://`` and ``ipc://`` the REQ socket is :class:`simulator.zmtp.ReqSocket` (ZMTP in
plain Python, no libzmq I/O thread between the simulator and the wire: fewer thread
wake-ups per round trip); other endpoints (``inproc://``) use libzmq. Batsim waits
forever, even for a decision process that died; here, over TCP or IPC, the end of the
connection while a reply is awaited (the request is lost with it: no reply can come) ends
the run with :class:`Disconnected` (libzmq: seen by a socket monitor, within ``POLL_S``).
``reply_timeout`` (seconds) bounds the wait when set, and setting ``stop``
(a :class:`threading.Event`, e.g. from a signal handler) ends the run within
``POLL_S`` with :class:`Aborted`, leaving the simulator as it was after the last
message, so that what happened so far can still be written.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from simulator import local_link, zmtp
from simulator import protocol as p
from simulator.engine import Simulator

if TYPE_CHECKING:  # libzmq is imported where it is used: inproc:// endpoints
    import zmq

POLL_S = 0.2  # how often a wait for a reply looks at ``stop``


class ReplyTimeout(RuntimeError):
    """The decision process did not answer in time."""


class Disconnected(RuntimeError):
    """The decision process closed its connection while a reply was awaited."""


class Aborted(RuntimeError):
    """``stop`` was set (SIGTERM, Ctrl-C) before the simulation ended."""


@dataclass
class RunStats:
    messages: int = 0
    scheduling_time: float = 0.0  # wall seconds spent waiting for replies
    simulation_time: float = 0.0  # wall seconds of the whole run


def run(
    sim: Simulator,
    endpoint: str,
    *,
    reply_timeout: float | None = None,
    message_log: TextIO | None = None,
    progress: Callable[[Simulator, RunStats], None] | None = None,
    progress_every: float = 2.0,
    stop: threading.Event | None = None,
    context: zmq.Context | None = None,
    while_waiting: Callable[[], None] | None = None,
) -> RunStats:
    """Drive ``sim`` against the decision process at ``endpoint`` until SIMULATION_ENDS.

    Raises :class:`ReplyTimeout` or :class:`Aborted` between messages, never in the middle
    of applying a reply. ``context``: a ZeroMQ context to share (``inproc://``
    endpoints), else one of its own. ``while_waiting``: work that does not touch the
    simulation (writing output rows), done once each message is sent over a wire, while
    the decision process computes its reply."""
    stats = RunStats()
    began = time.perf_counter()
    if endpoint.startswith(local_link.SCHEME):  # the broker in this process: no wire
        link = local_link.connect(endpoint)
        hosted = link.handler

        def exchange(message: p.Message, text: str | None, sent: float) -> p.Message:
            if hosted is not None:  # in the broker's thread: its answer is a call
                try:
                    return hosted(message)
                except local_link.HostFailed:
                    raise Aborted(
                        f"stopped while waiting for a reply, at simulated time {sim.now}"
                    ) from None
            link.request(message)
            return _local_reply(link, sent, endpoint, sim, reply_timeout, stop)

        _loop(sim, exchange, stats, message_log, progress, progress_every, stop)
        stats.simulation_time = time.perf_counter() - began
        return stats
    if zmtp.address(endpoint) is not None:  # tcp:// and ipc://: a plain socket, no libzmq
        _run_plain(
            sim, endpoint, stats, reply_timeout, message_log, progress, progress_every, stop,
            while_waiting,
        )  # fmt: skip
        stats.simulation_time = time.perf_counter() - began
        return stats
    import zmq

    own_context = context is None
    if context is None:
        context = zmq.Context()
    socket = context.socket(zmq.REQ)
    socket.setsockopt(zmq.LINGER, 0)
    monitor = None
    if endpoint.startswith(("tcp://", "ipc://")):  # inproc has no connection to lose
        monitor = socket.get_monitor_socket(zmq.EVENT_DISCONNECTED)
    if stop is not None or monitor is not None:  # a wait looks at them every POLL_S
        socket.setsockopt(zmq.RCVTIMEO, round(POLL_S * 1000))

    def exchange_bytes(message: p.Message, text: str | None, sent: float) -> bytes:
        socket.send((p.encode(message) if text is None else text).encode())
        if while_waiting is not None:
            while_waiting()
        return _receive(socket, sent, endpoint, sim, reply_timeout, stop, monitor)

    try:
        socket.connect(endpoint)
        _loop(sim, exchange_bytes, stats, message_log, progress, progress_every, stop)
    finally:
        if monitor is not None:
            socket.disable_monitor()
            monitor.close(linger=0)
        socket.close(linger=0)
        if own_context:
            context.term()
    stats.simulation_time = time.perf_counter() - began
    return stats


def _run_plain(
    sim: Simulator,
    endpoint: str,
    stats: RunStats,
    reply_timeout: float | None,
    message_log: TextIO | None,
    progress: Callable[[Simulator, RunStats], None] | None,
    progress_every: float,
    stop: threading.Event | None,
    while_waiting: Callable[[], None] | None = None,
) -> None:
    """:func:`run` over :class:`zmtp.ReqSocket`: the connection is opened with the first
    message (retried while nobody listens, as libzmq does) and its end while a reply is
    awaited is :class:`Disconnected`."""
    req = zmtp.ReqSocket(endpoint)
    every = POLL_S if stop is not None else None  # the wait when no reply_timeout bounds it

    def exchange_bytes(message: p.Message, text: str | None, sent: float) -> bytes:
        data = (p.encode(message) if text is None else text).encode()
        try:
            if req.sock is None:
                _connect(req, sent, endpoint, sim, reply_timeout, stop)
            req.send(data)
            if while_waiting is not None:
                while_waiting()
            while True:
                wait = (
                    every
                    if reply_timeout is None
                    else _wait(sent, endpoint, sim, reply_timeout, stop)
                )
                reply = req.recv(wait)
                if reply is not None:
                    return reply
                if stop is not None and stop.is_set():
                    raise Aborted(f"stopped while waiting for a reply, at simulated time {sim.now}")
        except zmtp.PeerClosed:
            raise Disconnected(
                f"the decision process at {endpoint} disconnected while its reply was awaited "
                f"(it exited or closed its socket; simulated time {sim.now}): no reply can come"
            ) from None

    try:
        _loop(sim, exchange_bytes, stats, message_log, progress, progress_every, stop)
    finally:
        req.close()


def _wait(
    sent: float,
    endpoint: str,
    sim: Simulator,
    reply_timeout: float | None,
    stop: threading.Event | None,
) -> float | None:
    """How long the next wait may last: until ``reply_timeout`` (raised when it is past),
    at most ``POLL_S`` when ``stop`` is to be looked at; None: no limit."""
    wait = POLL_S if stop is not None else None
    left = _time_left(sent, endpoint, sim, reply_timeout)
    if left is not None:
        wait = left if wait is None else min(wait, left)
    return wait


def _time_left(
    sent: float, endpoint: str, sim: Simulator, reply_timeout: float | None
) -> float | None:
    """Seconds left of ``reply_timeout`` since ``sent`` (None: no limit); raises
    :class:`ReplyTimeout` once it is past."""
    if reply_timeout is None:
        return None
    left = reply_timeout - (time.perf_counter() - sent)
    if left <= 0:
        raise ReplyTimeout(
            f"no reply from the decision process at {endpoint} within "
            f"{reply_timeout} s (simulated time {sim.now})"
        )
    return left


def _connect(
    req: zmtp.ReqSocket,
    sent: float,
    endpoint: str,
    sim: Simulator,
    reply_timeout: float | None,
    stop: threading.Event | None,
) -> None:
    """Connect, retrying every few milliseconds (up to 0.1 s, libzmq's reconnect
    interval) while nobody listens, bounded by ``reply_timeout`` and ``stop``."""
    pause = 0.001
    while True:
        wait = _wait(sent, endpoint, sim, reply_timeout, stop)
        try:
            req.connect(POLL_S if wait is None else wait)
            return
        except OSError:  # refused, no such socket file yet, timed out
            pass
        if stop is not None and stop.is_set():
            raise Aborted(f"stopped while connecting, at simulated time {sim.now}")
        if stop is not None:
            stop.wait(pause)
        else:
            time.sleep(pause)
        pause = min(2 * pause, 0.1)


def _loop(
    sim: Simulator,
    exchange: Callable[[p.Message, str | None, float], p.Message | bytes],
    stats: RunStats,
    message_log: TextIO | None,
    progress: Callable[[Simulator, RunStats], None] | None,
    progress_every: float,
    stop: threading.Event | None,
) -> None:
    """Message, reply, until SIMULATION_ENDS is answered. ``exchange(message, its text or
    None, when it was sent)`` returns the reply: its bytes over a wire (decoded here,
    after they are logged), the object over a :mod:`~simulator.local_link`."""
    message = sim.first_message()
    next_progress = time.monotonic() + progress_every
    while True:
        text = None
        if message_log is not None:
            text = p.encode(message)
            message_log.write(f"BATSIM -> SCHED: {text}\n")
        if stop is not None and stop.is_set():
            raise Aborted(f"stopped at simulated time {sim.now}")
        sent = time.perf_counter()
        answer = exchange(message, text, sent)
        stats.scheduling_time += time.perf_counter() - sent
        stats.messages += 1
        if type(answer) is bytes:
            if message_log is not None:
                message_log.write(f"SCHED -> BATSIM: {answer.decode('utf-8', 'replace')}\n")
            reply = p.decode(answer, "decision")
        else:
            reply = answer
            if message_log is not None:
                message_log.write(f"SCHED -> BATSIM: {p.encode(reply)}\n")
        if sim.ended:
            break
        message = sim.handle_reply(reply)
        if progress is not None and time.monotonic() >= next_progress:
            progress(sim, stats)
            next_progress = time.monotonic() + progress_every


def _local_reply(
    link: local_link.LocalLink,
    sent: float,
    endpoint: str,
    sim: Simulator,
    reply_timeout: float | None,
    stop: threading.Event | None,
) -> p.Message:
    """The reply over a local link, looking at ``stop`` and ``reply_timeout`` every
    ``POLL_S`` (no connection to lose: the broker is in this process)."""
    while True:
        left = _time_left(sent, endpoint, sim, reply_timeout)
        wait = POLL_S if left is None else min(POLL_S, left)
        reply = link.reply(wait)
        if reply is not None:
            return reply
        if stop is not None and stop.is_set():
            raise Aborted(f"stopped while waiting for a reply, at simulated time {sim.now}")


def _receive(
    socket: zmq.Socket,
    sent: float,
    endpoint: str,
    sim: Simulator,
    reply_timeout: float | None,
    stop: threading.Event | None,
    monitor: zmq.Socket | None = None,
) -> bytes:
    """The reply, waited for in ``recv`` itself (its RCVTIMEO bounds each wait: one call
    per message, no poller), looking at ``stop``, ``reply_timeout`` and the connection
    (``monitor``) between waits."""
    import zmq

    while True:
        left = _time_left(sent, endpoint, sim, reply_timeout)
        if left is not None:
            wait = min(POLL_S, left) if stop is not None or monitor is not None else left
            socket.setsockopt(zmq.RCVTIMEO, max(1, int(wait * 1000)))
        try:
            return socket.recv()
        except zmq.Again:
            pass
        if stop is not None and stop.is_set():
            raise Aborted(f"stopped while waiting for a reply, at simulated time {sim.now}")
        if monitor is not None and _disconnected(monitor):
            raise Disconnected(
                f"the decision process at {endpoint} disconnected while its reply was awaited "
                f"(it exited or closed its socket; simulated time {sim.now}): no reply can come"
            )


def _disconnected(monitor: zmq.Socket) -> bool:
    """Whether the monitor reported a disconnection (it reports nothing else)."""
    import zmq
    from zmq.utils.monitor import recv_monitor_message

    found = False
    while monitor.poll(0):
        found |= recv_monitor_message(monitor)["event"] == zmq.EVENT_DISCONNECTED
    return found


def print_progress(sim: Simulator, stats: RunStats, stream: TextIO = sys.stderr) -> None:
    stream.write(
        f"timewarp sim: t={sim.now:.3f} s simulated, "
        f"{sim.jobs_ended}/{sim.jobs_count} jobs ended, "
        f"{stats.messages} messages, {sim.events_processed} events\n"
    )
    stream.flush()
