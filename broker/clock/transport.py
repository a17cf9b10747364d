"""The clock service's sockets: one selector thread accepts runtimes' connections, splits
what they send into frames and writes what the service queued for them.

Sockets are non-blocking: a runtime that does not read cannot stall the broker. Any thread
holding the clock service's lock may write (:meth:`ClockTransport.write_locked` sends at
once what the socket takes; the loop writes the rest). Frames go to ``receive`` (without
the lock); a connection that ends goes to ``dropped`` (with it).

**Lending the connections.** The connections have a selector of their own, nested in the
loop's. While the driver waits for quiescence it borrows them
(:meth:`ClockTransport.wait_reading_locked`): the loop stops watching them and the driver
reads and applies the frames itself, so the state report that ends its wait wakes one
thread, not the loop thread and then the driver. One thread at a time reads (the lender,
or the loop when they are not lent), each connection's frames are applied in order
whoever reads them, and what a frame does is the same code either way: only which thread
runs it changes.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable
from itertools import count
from typing import TextIO

from broker.clock import relock
from broker.clock.registry import ProcessState
from timewarp.wire import clocknet, clockproto
from timewarp.wire.wakeup import Wakeup

MAX_MESSAGE_BYTES = 64 << 20  # a longer line is not a clock message (stacks are ~100 kB)
# A Unix socket path must fit in sockaddr_un (108 bytes on Linux): a long TMPDIR gets a
# private directory in /tmp instead, and only if that fails too, loopback TCP (where every
# hello must carry the process's token: any local user can reach a TCP port).
_MAX_SOCKET_PATH = 100
_SHORT_SOCKET_DIRS = ("/tmp", "/dev/shm")
_WAKES = frozenset({"fire", "time", "io"})  # messages a process must acknowledge


class _Connection:
    """One runtime's connection: what was read of a message so far, what is still to be
    written."""

    __slots__ = ("sock", "identity", "unpacker", "pending", "want_write")

    def __init__(self, sock: socket.socket, identity: bytes) -> None:
        self.sock = sock
        self.identity = identity
        self.unpacker = clockproto.Unpacker()
        self.pending = b""
        self.want_write = False


# receive(identity, frame) -> True when that connection must be closed
Receiver = Callable[[bytes, bytes], bool]


class ClockTransport:
    """The listening socket, the connections and the thread that serves them."""

    def __init__(
        self,
        endpoint: str | None,
        cond: threading.Condition,
        log: TextIO,
        receive: Receiver,
        dropped: Callable[[bytes], None],
        after_round: Callable[[], None],
    ) -> None:
        self._cond = cond
        self._log = log
        self._receive = receive
        self._dropped = dropped
        self._after_round = after_round
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
        self._listener.setblocking(False)
        self._conns: dict[bytes, _Connection] = {}
        self._conn_ids = count(1)
        self._wakeup = Wakeup()
        # the connections' own selector, watched by the loop's (nested) unless lent to a
        # waiting driver; the lender's wakeup is in it, poked while the driver waits there
        self._conn_sel = selectors.DefaultSelector()
        self._lend_wakeup = Wakeup()
        self._conn_sel.register(self._lend_wakeup.fd, selectors.EVENT_READ, None)
        # one thread at a time serves them: the loop (``_loop_serving``) or the borrower
        self._lender: int | None = None  # the thread the connections are lent to
        self._loop_serving = False
        self._lent_waiting = False  # it blocks in the connections' selector: poke to wake
        self.driver_reads = False  # the loop does not watch them, the borrower reads them
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, "listen")
        self._selector.register(self._wakeup.fd, selectors.EVENT_READ, None)
        self._selector.register(self._conn_sel, selectors.EVENT_READ, "conns")
        self._closed = False
        self._loop_ident: int | None = None
        self._thread = threading.Thread(
            target=self._loop, name="timewarp-clock-service", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def send_locked(self, proc: ProcessState, msg: dict) -> None:
        """A message to a connected process; a wake-up counts as owed until acknowledged."""
        if proc.identity is None or proc.gone:
            return
        if msg["op"] in _WAKES:
            proc.sent += 1
        self.write_locked(proc.identity, msg)

    def write_locked(self, identity: bytes, msg: dict) -> None:
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
                self.poke()  # the loop writes the rest when the socket can take it

    def poke(self) -> None:
        """Make the loop look again (from another thread: the loop looks anyway)."""
        if threading.get_ident() != self._loop_ident:
            self._wakeup.poke()

    def notified_locked(self) -> None:
        """The clock's condition was notified: a driver waiting in the lent connections'
        selector, not on the condition, must wake too (the service's condition calls
        this on every notify)."""
        if self._lent_waiting and self._lender != threading.get_ident():
            self._lend_wakeup.poke()  # (the driver's own notifications, made while it
            # applies the frames it read, need no wake-up: it surveys next)

    def lend_locked(self) -> bool:
        """Lend the connections to this thread (the driver, about to wait for quiescence):
        from now on it reads them, in :meth:`wait_reading_locked`, until
        :meth:`give_back_locked`; frames that come meanwhile wait in their sockets. False
        when another thread has them (or the transport is closed)."""
        me = threading.get_ident()
        if self._lender == me:
            return True
        if self._lender is not None or self._closed:
            return False
        self._lender = me  # from now on the loop leaves the connections alone
        while self._loop_serving:  # it is applying what it read: let it finish
            self._cond.wait(0.1)
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(self._conn_sel)  # and it stops watching them
        self.driver_reads = True
        return True

    def wait_reading_locked(self, timeout: float) -> None:
        """What ``cond.wait(timeout)`` does for the driver (called with the service's lock
        held once, returns with it held), except that the driver reads the connections
        lent to it meanwhile: a frame that arrives wakes it, not the loop thread, and is
        applied here. Returns when a frame was read, the condition was notified, or at
        ``timeout``. Without the connections (:meth:`lend_locked` said no), it waits on
        the condition."""
        if self._lender != threading.get_ident() or not self.driver_reads:
            self._cond.wait(timeout)
            return
        # True from here until the lock is held again: a notification that comes while
        # this thread is between its select and the lock still pokes the wakeup (the
        # next select returns at once, one extra round), so none is seen only by the
        # survey that follows and a notifier can always tell it woke the driver
        self._lent_waiting = True
        try:
            relock.let_go(self._cond)
            try:
                ready = self._conn_sel.select(timeout)
            except (OSError, ValueError):
                ready = []  # closed under us
            self._serve(ready)
        finally:
            try:
                relock.take_back(self._cond)  # a stop signal meanwhile: raised once held
            finally:
                self._lent_waiting = False

    def give_back_locked(self) -> None:
        """The connections lent to this thread go back to the loop thread (the driver's
        wait ended, or the stall guard is about to wait for a process's stacks). In this
        order: a loop that saw them ready while they were still lent would spin."""
        if self._lender != threading.get_ident():
            return
        self._lender = None
        self.driver_reads = False
        if not self._closed:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.register(self._conn_sel, selectors.EVENT_READ, "conns")

    def _loop(self) -> None:
        self._loop_ident = threading.get_ident()
        selector = self._selector
        while not self._closed:
            try:
                ready = selector.select(0.5)
            except (OSError, ValueError):
                return  # closed under us
            for key, _events in ready:
                if key.data is None:
                    self._wakeup.drain()
                elif key.data == "listen":
                    self._accept()
                elif not self._serve_conns():
                    return  # closed under us
            with self._cond:
                self._after_round()
                self._update_interest_locked()

    def _serve_conns(self) -> bool:
        """The loop serves the connections, unless they were lent meanwhile (a readiness
        seen just before the driver took them); False once the selector is closed."""
        with self._cond:
            if self._lender is not None:
                return True
            self._loop_serving = True
        try:
            try:
                ready = self._conn_sel.select(0)
            except (OSError, ValueError):
                return False
            self._serve(ready)
            return True
        finally:
            with self._cond:
                self._loop_serving = False
                if self._lender is not None:
                    self._cond.notify_all()  # a driver waits to take them

    def _serve(self, ready: list[tuple[selectors.SelectorKey, int]]) -> None:
        """Write and read what the connections' selector found ready (by the one thread
        serving them)."""
        for key, events in ready:
            conn = key.data
            if conn is None:
                self._lend_wakeup.drain()
                continue
            if events & selectors.EVENT_WRITE:
                with self._cond:
                    self._write_pending_locked(conn)
            if events & selectors.EVENT_READ:
                self._read(conn)
        if ready and threading.get_ident() != self._loop_ident:
            with self._cond:
                self._update_interest_locked()

    def _update_interest_locked(self) -> None:
        """Watch a connection for writing only while something waits to be written."""
        for conn in list(self._conns.values()):
            if bool(conn.pending) != conn.want_write:
                conn.want_write = bool(conn.pending)
                mask = selectors.EVENT_READ
                if conn.want_write:
                    mask |= selectors.EVENT_WRITE
                with contextlib.suppress(KeyError, ValueError):
                    self._conn_sel.modify(conn.sock, mask, conn)

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
        self._conn_sel.register(sock, selectors.EVENT_READ, conn)

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
            try:
                close = self._receive(conn.identity, frame)
            except Exception as exc:  # this thread must never die of what a peer sent
                text = f"clock message not handled ({type(exc).__name__}: {exc})"
                self._log.write(f"timewarp: broker: {text}; connection closed\n")
                with self._cond:
                    self.write_locked(conn.identity, clockproto.error(text[:1000]))
                close = True
            if close:
                self._drop(conn)  # refused: nothing more is read from it
                return
        if conn.unpacker.pending > MAX_MESSAGE_BYTES:
            text = f"clock message longer than {MAX_MESSAGE_BYTES} bytes: not a clock message"
            self._log.write(f"timewarp: broker: {text}\n")
            with self._cond:
                self.write_locked(conn.identity, clockproto.error(text))
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
        """The connection ended (or was refused): its process, if any, is gone."""
        with self._cond:
            self._conns.pop(conn.identity, None)
            self._dropped(conn.identity)
        try:
            self._conn_sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.poke()
        self._thread.join(2)
        for conn in list(self._conns.values()):
            conn.sock.close()
        self._conns.clear()
        self._selector.close()
        self._conn_sel.close()
        self._listener.close()
        clocknet.unlink(self.endpoint)
        if self._sockdir is not None:
            shutil.rmtree(self._sockdir, ignore_errors=True)
        self._wakeup.close()
        self._lend_wakeup.close()


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
