"""Byte accounting on this process's connections to the API facade.

A watch is I/O, not a virtual wait: the official client reads it with a blocking socket
read. So for sockets connected to the facade (``TIMEWARP_FACADE=host:port``) the runtime
counts the bytes sent and the bytes consumed, and when a thread is about to block reading
one it reports ``[client_port, sent, consumed]`` and gives up the baton. The broker counts
that thread as durably blocked only while the facade has read exactly ``sent`` bytes of
complete requests, written exactly ``consumed`` bytes and owes the connection nothing —
exact, whatever the client version and whether the stream stays open.

Counts are of plaintext HTTP bytes: under TLS the ``ssl.SSLSocket`` methods are wrapped,
and data already decrypted in the TLS layer (``pending()``) is never a block.
"""

from __future__ import annotations

import itertools
import select
import socket
import ssl
import threading
import weakref

from timewarp._core import runtime as _runtime

_conns: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_facade: tuple[str, int] | None = None
_inner = threading.local()  # SSLSocket methods falling back to socket.socket's
_conn_seq = itertools.count(1)


class _Conn:
    __slots__ = ("port", "sent", "consumed", "seq", "allowed")

    def __init__(self, port: int) -> None:
        self.port = port
        self.sent = 0
        self.consumed = 0
        # opening order: reproducible under the baton, unlike the port number
        self.seq = next(_conn_seq)
        self.allowed = 0  # deterministic mode: consumed may grow this far (the broker's go)


def _lookup(sock: socket.socket) -> _Conn | None:
    try:
        return _conns[sock]
    except KeyError:
        pass
    except TypeError:
        return None
    try:
        peer = sock.getpeername()
    except OSError:
        return None  # not connected yet: decide later
    conn = None
    if isinstance(peer, tuple) and (peer[0], peer[1]) == _facade:
        conn = _Conn(sock.getsockname()[1])
    _conns[sock] = conn
    return conn


def _would_block(sock: socket.socket) -> bool:
    if isinstance(sock, ssl.SSLSocket) and sock.pending():
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


def _capped(into: bool, args: tuple, kwargs: dict, budget: int) -> tuple[tuple, dict]:
    """The arguments of ``recv(bufsize, ...)`` / ``recv_into(buffer, nbytes, ...)`` asking
    for at most ``budget`` bytes."""
    if into:
        buffer = args[0] if args else kwargs["buffer"]
        if len(args) > 1:
            wanted = args[1] or memoryview(buffer).nbytes
            return (args[0], min(wanted, budget), *args[2:]), kwargs
        wanted = kwargs.get("nbytes") or memoryview(buffer).nbytes
        return args, {**kwargs, "nbytes": min(wanted, budget)}
    if args:
        return (min(args[0], budget), *args[1:]), kwargs
    key = "buflen" if "buflen" in kwargs else "bufsize"
    return args, {**kwargs, key: min(kwargs.get(key, 1024), budget)}


def _reading(orig, into: bool):  # type: ignore[no-untyped-def]
    def wrapper(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        rt = _runtime.ACTIVE
        if rt is None or getattr(_inner, "active", False):
            return orig(self, *args, **kwargs)
        conn = _lookup(self)
        if conn is None:
            return orig(self, *args, **kwargs)
        _inner.active = True
        try:
            if rt.reads_gated():
                # Read only what the broker let this thread read, waiting for its go when
                # that is used up — even if more bytes are already there: whether they
                # are is a matter of timing.
                if conn.consumed >= conn.allowed:
                    rt.wait_io_release(conn)
                args, kwargs = _capped(into, args, kwargs, conn.allowed - conn.consumed)
                result = orig(self, *args, **kwargs)
            elif not _would_block(self):
                result = orig(self, *args, **kwargs)
            else:
                io_id = rt.begin_io_wait(conn.port, conn.sent, conn.consumed, conn.seq)
                try:
                    result = orig(self, *args, **kwargs)
                finally:
                    rt.end_io_wait(io_id)
        finally:
            _inner.active = False
        conn.consumed += result if isinstance(result, int) else len(result)
        return result

    wrapper.__wrapped__ = orig  # type: ignore[attr-defined]
    return wrapper


def _sending(orig, counts_return: bool):  # type: ignore[no-untyped-def]
    def wrapper(self, data, *args, **kwargs):  # type: ignore[no-untyped-def]
        if _runtime.ACTIVE is None or getattr(_inner, "active", False):
            return orig(self, data, *args, **kwargs)
        _inner.active = True
        try:
            result = orig(self, data, *args, **kwargs)
        finally:
            _inner.active = False
        conn = _lookup(self)
        if conn is not None:
            conn.sent += result if counts_return else memoryview(data).nbytes
        return result

    wrapper.__wrapped__ = orig  # type: ignore[attr-defined]
    return wrapper


def install(facade: str) -> None:
    """Count bytes on sockets connected to ``facade`` ("host:port")."""
    global _facade
    host, _, port = facade.rpartition(":")
    _facade = (socket.gethostbyname(host or "127.0.0.1"), int(port))
    if getattr(socket.socket.recv_into, "__wrapped__", None) is not None:
        return
    socket.socket.recv_into = _reading(socket.socket.recv_into, True)  # type: ignore[method-assign]
    socket.socket.recv = _reading(socket.socket.recv, False)  # type: ignore[method-assign]
    socket.socket.send = _sending(socket.socket.send, True)  # type: ignore[method-assign]
    socket.socket.sendall = _sending(socket.socket.sendall, False)  # type: ignore[method-assign]
    ssl.SSLSocket.recv_into = _reading(ssl.SSLSocket.recv_into, True)  # type: ignore[method-assign]
    ssl.SSLSocket.recv = _reading(ssl.SSLSocket.recv, False)  # type: ignore[method-assign]
    # SSLSocket.sendall loops over SSLSocket.send: count only there.
    ssl.SSLSocket.send = _sending(ssl.SSLSocket.send, True)  # type: ignore[method-assign]
    ssl.SSLSocket.sendall = _sending(ssl.SSLSocket.sendall, False)  # type: ignore[method-assign]
