"""Server sockets: a thread waiting on them is durably blocked, not busy.

Operators and autoscalers start a ``/metrics`` or ``/healthz`` server in a thread
(``prometheus_client.start_http_server``, ``socketserver.serve_forever``, which loops on
``selector.select(0.5)``). Nothing in the simulation connects to such a server: its
listening socket, and a connection accepted from it, can only be written to from outside.
So a thread holding the baton that is about to block waiting to read *only* such sockets
(``server fds``) gives the baton up, as in a virtual wait — Go's synctest calls such a
goroutine durably blocked — and the process may go idle:

- the wait's own timeout (``select(0.5)``, a socket's ``settimeout``) is a virtual
  timeout: a *slack* timer with the broker, which never moves time by itself and fires
  once time reached it for another reason (``broker/clock/timers.py``; a thread of the
  process that parks waiting for another thread hardens it: ``Runtime.harden_slack_locked``,
  so that ``shutdown()`` still returns at the poll's instant); when it fires the thread is
  woken through a wake-up pipe of its own that the real wait also watches;
- a real connection or real bytes end the wait too. The thread then runs without the
  broker's go — whatever virtual instant the run has reached: input from outside is not
  reproducible — so the runtime reports it (``woke``) and the broker counts a
  non-deterministic advance, with its cause. The same goes for an event loop's select
  that returns a server fd (aiohttp's ``TCPSite``, kopf's liveness endpoint: the loop
  already waits idle there, see ``aionet``).

What is covered: ``selectors`` selectors' ``select`` (``socketserver``, ``http.server``,
``wsgiref``, prometheus_client, werkzeug), a blocking ``accept``, and a blocking
``recv``/``recv_into`` of an accepted connection (a keep-alive handler thread). A wait
that also watches anything else (a pipe, an outgoing connection, a write) is left alone:
that may be written by someone in the simulation or answer a request of the program, and
stays busy as before (the stall guard's business). Limits: ``select.select``/``poll``
called directly are not covered; a connection between two simulated programs (or a
program and itself) over loopback counts as from outside. (``socketserver``'s
``shutdown()`` waits on a virtual ``Event``: ``timewarp/_core/intercept/servers.py``.)
"""

from __future__ import annotations

import math
import os
import select
import selectors
import socket
import ssl
import threading
from collections.abc import Callable
from typing import Any

from timewarp._core import current
from timewarp._core import runtime as _runtime

_NS = 1_000_000_000
_inbound: dict[int, tuple[Any, Any]] = {}  # accepted connections: fd -> (sockname, peername)
_listening: dict[int, Any] = {}  # sockets that listen(): fd -> sockname
_pipes = threading.local()
_installed = False


class _WakePipe:
    """One thread's wake-up pipe, closed when the thread's locals go."""

    def __init__(self) -> None:
        self.r, self.w = os.pipe()
        os.set_blocking(self.r, False)
        os.set_blocking(self.w, False)

    def poke(self) -> None:
        try:
            os.write(self.w, b"x")
        except BlockingIOError:
            pass  # a byte is there already

    def drain(self) -> None:
        try:
            while os.read(self.r, 64):
                pass
        except BlockingIOError:
            pass

    def __del__(self) -> None:
        for fd in (self.r, self.w):
            try:
                os.close(fd)
            except OSError:
                pass


def _wake_pipe() -> _WakePipe:
    pipe = getattr(_pipes, "pipe", None)
    if pipe is None:
        pipe = _pipes.pipe = _WakePipe()
    return pipe


# ---------------------------------------------------------------- which fds
def _describe(fd: int, thorough: bool = True) -> str | None:
    """What ``fd`` is if nothing in the simulation can write to it: "listening socket
    127.0.0.1:9100", "connection from 10.1.2.3:5555 to ..."; None otherwise. Not
    ``thorough``: only sockets seen listening or accepted since activation."""
    inbound, listening = _inbound.get(fd), _listening.get(fd)
    if inbound is None and listening is None and not thorough:
        return None
    try:
        sock = socket.socket(fileno=fd)
    except OSError:
        return None  # not a socket (a pipe, a file)
    try:
        here = sock.getsockname()
        if inbound is not None:
            peer = sock.getpeername()
            if inbound == (here, peer):
                return f"connection from {_addr(peer)} to {_addr(here)}"
            del _inbound[fd]  # the fd was reused
        if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            return f"listening socket {_addr(here)}"
        _listening.pop(fd, None)
        return None
    except OSError:
        return None
    finally:
        sock.detach()


def _addr(address: Any) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return str(address) or "(unnamed)"


def _server_fds(selector: selectors.BaseSelector) -> list[int] | None:
    """The fds ``selector`` waits on, if it waits only to read server sockets."""
    fds = []
    for key in selector.get_map().values():
        if key.events & selectors.EVENT_WRITE or _describe(key.fd) is None:
            return None
        fds.append(key.fd)
    return fds or None


def _holds_baton(rt: _runtime.Runtime) -> bool:
    """The calling thread runs as a tracked thread: its real wait would keep the process
    busy. (An event loop's own blocking select runs after it gave the baton up.)"""
    with rt.lock:
        ts = rt.current()
        return ts.tracked and (rt.holder is ts if rt.deterministic else ts.running)


# ---------------------------------------------------------------- the wait
def _idle_wait(rt: _runtime.Runtime, fds: list[int], timeout: float | None) -> bool:
    """Wait, without the baton, until one of ``fds`` is readable (True) or ``timeout``
    virtual seconds passed (False)."""
    pipe = _wake_pipe()
    waiter = _runtime.Waiter(rt.current())
    waiter.on_wake = pipe.poke  # the waker's doing (timer fired), under the runtime lock
    deadline = None if timeout is None else rt.now() + max(1, math.ceil(timeout * _NS))
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    poller.register(pipe.r, select.POLLIN)
    # the poll's timeout is slack: it never moves time by itself (module docstring)
    rt.begin_external_wait(waiter, deadline, slack=True)
    readable = False
    try:
        while waiter.state == _runtime.WAITING and not readable:
            events = poller.poll()
            readable = any(fd != pipe.r for fd, _ in events)
    finally:
        rt.end_external_wait(waiter)
        pipe.drain()  # after the wait ended: nobody pokes this waiter again
    return readable


def _report(rt: _runtime.Runtime, fds: list[int], what: str) -> None:
    where = "; ".join(filter(None, (_describe(fd) for fd in fds))) or "a server socket"
    name = threading.current_thread().name
    rt.report_outside_input(f"{what} from outside the simulation ({where}, thread {name!r})")


def note_loop_events(rt: _runtime.Runtime, events: list[tuple[Any, int]]) -> None:
    """An event loop's select returned ``events``: those on server sockets are input from
    outside (see the module docstring)."""
    if not events or not rt.deterministic:
        return
    fds = [key.fd for key, _mask in events if _describe(key.fd, thorough=False) is not None]
    if fds:
        _report(rt, fds, "input")


# ---------------------------------------------------------------- the hooks
def _selecting(orig: Callable) -> Callable:
    def select_(self, timeout=None):  # type: ignore[no-untyped-def]
        rt = current.ACTIVE
        if rt is None or (timeout is not None and timeout <= 0):
            return orig(self, timeout)
        fds = _server_fds(self)
        if fds is None or not _holds_baton(rt):
            return orig(self, timeout)
        events = orig(self, 0)
        if not events and _idle_wait(rt, fds, timeout):
            events = orig(self, 0)
        if events:
            _report(rt, [key.fd for key, _mask in events], "input")
        return events

    select_.__wrapped__ = orig  # type: ignore[attr-defined]
    return select_


def _blocked(sock: socket.socket) -> bool:
    if isinstance(sock, ssl.SSLSocket) and sock.pending():
        return False
    try:
        return not select.select([sock], [], [], 0)[0]
    except (OSError, ValueError):
        return False


def _wait_readable(sock: socket.socket, what: str) -> None:
    """Before a blocking read or accept of a server socket by a thread under the baton:
    wait idle until it is readable; a virtual timeout raises like the real one."""
    rt = current.ACTIVE
    timeout = sock.gettimeout()
    if rt is None or timeout == 0.0 or not _blocked(sock) or not _holds_baton(rt):
        return
    fd = sock.fileno()
    if _describe(fd) is None:
        return
    if not _idle_wait(rt, [fd], timeout):
        raise TimeoutError("timed out")
    _report(rt, [fd], what)


def _accepting(orig: Callable) -> Callable:
    def accept(self):  # type: ignore[no-untyped-def]
        _wait_readable(self, "a connection")
        conn, address = orig(self)
        try:
            _inbound[conn.fileno()] = (conn.getsockname(), conn.getpeername())
        except OSError:
            pass  # already reset by the peer
        return conn, address

    accept.__wrapped__ = orig  # type: ignore[attr-defined]
    return accept


def _listen(orig: Callable) -> Callable:
    def listen(self, *args):  # type: ignore[no-untyped-def]
        orig(self, *args)
        try:
            _listening[self.fileno()] = self.getsockname()
        except OSError:
            pass

    listen.__wrapped__ = orig  # type: ignore[attr-defined]
    return listen


def _reading(orig: Callable) -> Callable:
    def read(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if current.ACTIVE is not None and self.fileno() in _inbound:
            _wait_readable(self, "data")
        return orig(self, *args, **kwargs)

    # ``netio`` reads the raw method through ``__wrapped__``: keep pointing at it
    read.__wrapped__ = getattr(orig, "__wrapped__", orig)  # type: ignore[attr-defined]
    return read


def install() -> None:
    """Once per process, after ``netio.install`` (its wrappers stay the inner ones);
    undone when the runtime is forgotten (a forked child)."""
    global _installed
    if _installed:
        return
    _installed = True
    patched: list[tuple[type, str, Any]] = []

    def wrap(cls: type, name: str, wrapper: Callable[[Callable], Callable]) -> None:
        patched.append((cls, name, cls.__dict__.get(name)))  # None: inherited
        setattr(cls, name, wrapper(getattr(cls, name)))

    for cls in (selectors.SelectSelector, getattr(selectors, "_PollLikeSelector", None)):
        if cls is not None:
            wrap(cls, "select", _selecting)
    kqueue = getattr(selectors, "KqueueSelector", None)
    if kqueue is not None:
        wrap(kqueue, "select", _selecting)
    wrap(socket.socket, "accept", _accepting)
    wrap(socket.socket, "listen", _listen)
    for cls in (socket.socket, ssl.SSLSocket):
        wrap(cls, "recv", _reading)
        wrap(cls, "recv_into", _reading)

    def restore() -> None:
        global _installed
        for cls, name, orig in reversed(patched):
            if orig is None:
                delattr(cls, name)
            else:
                setattr(cls, name, orig)
        _installed = False

    current.on_deactivate(restore)
