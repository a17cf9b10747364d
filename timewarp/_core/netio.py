"""Byte accounting on this process's connections to the API facade.

A watch is I/O, not a virtual wait: the official client reads it with a blocking socket
read. So for sockets connected to the facade (``TIMEWARP_FACADE=host:port``) the runtime
counts the bytes sent and the bytes consumed, and when a thread is about to block reading
one it reports ``[client_port, sent, consumed]`` and gives up the baton. The broker counts
that thread as durably blocked only while the facade has read exactly ``sent`` bytes of
complete requests, written exactly ``consumed`` bytes and owes the connection nothing —
exact, whatever the client version and whether the stream stays open.

Counts are of plaintext HTTP bytes: under TLS the ``ssl.SSLSocket`` methods are wrapped,
and data already decrypted in the TLS layer (``pending()``) is never a block. asyncio does
TLS itself, through an ``ssl.SSLObject`` over memory buffers (``SSLProtocol``): for such a
connection (``tls`` set, see ``aionet``) the raw socket's ciphertext is not counted and
``SSLObject.read``/``write`` count the plaintext instead — the same ledger either way.

Requests are numbered: the first chunk of each request sent to the facade gets a header
``X-Timewarp-Seq: <pid>-<nonce>.<n>`` after its request line, ``n`` counting the process's
requests in the order its threads (one at a time, under the baton) or its event loop sent
them. Requests in flight together on different connections — two threads', or an event
loop's concurrent tasks' — are handled by the facade in that order, not in the order
they happen to arrive (``broker/facade/facade.py``). Counts include the header: they are
the bytes the facade reads.

An event loop never blocks in ``recv``: it waits in its selector (``aionet``), which
fetches what the broker let the loop read into the connection's ``stash`` before it
calls the connection readable. A non-blocking read of an API connection under the baton
is served from there — never more than the broker allowed, never split by timing — and
would block (``BlockingIOError``, ``SSLWantReadError``) when the stash is empty.
"""

from __future__ import annotations

import itertools
import os
import re
import select
import socket
import ssl
import threading
import weakref

from timewarp._core import current, entropy

_conns: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_by_fd: dict[int, tuple[weakref.ref, _Conn]] = {}  # API connections by file descriptor
_ssl_conns: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # SSLObject -> _Conn
_facade: tuple[str, int] | None = None
_inner = threading.local()  # SSLSocket methods falling back to socket.socket's
_conn_seq = itertools.count(1)
_request_no = itertools.count(1)
# who numbers: the pid alone could be reused by a later process while the facade runs
# (the OS's bytes, not the program's seeded stream: the runtime never draws from that)
_numbering = f"{os.getpid()}-{entropy.OS_URANDOM(4).hex()}"
_REQUEST_LINE = re.compile(
    rb"(?:GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) [^ \r\n]+ HTTP/1\.[01]\r\n"
)
SEQ_HEADER = "X-Timewarp-Seq"
_SEQ_LINE = f"{SEQ_HEADER}: ".encode()


def tag_request(data) -> bytes | None:  # type: ignore[no-untyped-def]
    """``data`` with the request-number header added, if it begins a request (else None)."""
    view = bytes(data[:8192]) if not isinstance(data, bytes) else data
    m = _REQUEST_LINE.match(view)
    if m is None:
        return None
    if view.startswith(_SEQ_LINE, m.end()):  # numbered already (a transport's write)
        return None
    data = bytes(data)
    header = f"{SEQ_HEADER}: {_numbering}.{next(_request_no)}\r\n".encode()
    return data[: m.end()] + header + data[m.end() :]


class _Conn:
    __slots__ = ("port", "sent", "consumed", "seq", "allowed", "stash", "tls", "eof", "go_no")

    def __init__(self, port: int) -> None:
        self.port = port
        self.sent = 0
        self.consumed = 0
        # opening order: reproducible under the baton, unlike the port number
        self.seq = next(_conn_seq)
        self.allowed = 0  # deterministic mode: consumed may grow this far (the broker's go)
        self.stash = bytearray()  # event loops: allowed bytes fetched, not yet delivered
        self.tls = None  # asyncio's SSLProtocol, when TLS is done over memory buffers
        self.eof = False  # event loops: the peer closed (after the stash)
        self.go_no = 0  # order of the broker's last go (event loops deliver in that order)


def _lookup(sock: socket.socket) -> _Conn | None:
    # An API connection's own entry by descriptor first: every read and write of the
    # facade's connections asks, and a WeakKeyDictionary lookup makes a weak reference
    # each time (the answer is the same: both tables are filled together, below).
    entry = _by_fd.get(sock.fileno())
    if entry is not None and entry[0]() is sock:
        return entry[1]
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
        _by_fd[sock.fileno()] = (weakref.ref(sock), conn)
    _conns[sock] = conn
    return conn


def conn_for_fd(fd: int) -> _Conn | None:
    """The API connection on file descriptor ``fd`` (an event loop registers fds), if
    one was seen sending or receiving there and is still open."""
    entry = _by_fd.get(fd)
    if entry is None:
        return None
    sock = entry[0]()
    if sock is None or sock.fileno() != fd:
        del _by_fd[fd]
        return None
    return entry[1]


def socket_for_fd(fd: int) -> socket.socket | None:
    entry = _by_fd.get(fd)
    sock = entry[0]() if entry is not None else None
    return sock if sock is not None and sock.fileno() == fd else None


def tag_transport_write(sock: socket.socket, data):  # type: ignore[no-untyped-def]
    """An event loop's transport writes ``data`` to ``sock``: numbered, if it begins a
    request to the facade in plaintext (asyncio's TLS numbers at the SSLObject)."""
    if current.ACTIVE is None:
        return data
    conn = _lookup(sock)
    if conn is None or conn.tls is not None:
        return data
    tagged = tag_request(data)
    return data if tagged is None else tagged


def adopt_tls(sslobj: ssl.SSLObject, sock: socket.socket, protocol: object) -> _Conn | None:
    """asyncio's ``SSLProtocol`` does TLS over ``sock`` through ``sslobj``: count that
    connection's plaintext there (if it is an API connection)."""
    conn = _lookup(sock)
    if conn is not None:
        conn.tls = protocol
        _ssl_conns[sslobj] = conn
    return conn


def _serve_stash(conn: _Conn, into: bool, args: tuple, kwargs: dict):  # type: ignore[no-untyped-def]
    """A non-blocking read served from what the selector fetched (see the docstring)."""
    if not conn.stash:
        if conn.eof:
            return 0 if into else b""
        raise BlockingIOError(11, "Resource temporarily unavailable")
    args, kwargs = _capped(into, args, kwargs, len(conn.stash))
    if into:
        buffer = memoryview(args[0] if args else kwargs["buffer"]).cast("B")
        n = min(
            len(conn.stash), (args[1] if len(args) > 1 else kwargs.get("nbytes")) or len(buffer)
        )
        buffer[:n] = conn.stash[:n]
        del conn.stash[:n]
        return n
    n = args[0] if args else kwargs.get("bufsize", kwargs.get("buflen", 1024))
    data = bytes(conn.stash[:n])
    del conn.stash[:n]
    return data


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
        if len(args) == 1 and not kwargs:  # recv_into(buffer): what SocketIO.readinto does
            return (args[0], min(memoryview(args[0]).nbytes, budget)), kwargs
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
        rt = current.ACTIVE
        if rt is None or getattr(_inner, "active", False):
            return orig(self, *args, **kwargs)
        conn = _lookup(self)
        if conn is None:
            return orig(self, *args, **kwargs)
        if conn.tls is not None:
            # ciphertext under asyncio's TLS: plaintext is counted at the SSLObject
            return orig(self, *args, **kwargs)
        if self.gettimeout() == 0.0 and rt.reads_gated():
            result = _serve_stash(conn, into, args, kwargs)  # an event loop's read
            conn.consumed += result if isinstance(result, int) else len(result)
            return result
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
        if current.ACTIVE is None or getattr(_inner, "active", False):
            return orig(self, data, *args, **kwargs)
        if not counts_return:  # sendall: the whole request head goes at once
            conn = _lookup(self)
            if conn is not None and conn.tls is None:
                tagged = tag_request(data)
                if tagged is not None:
                    data = tagged
        else:  # send: numbered too (websocket-client and raw-socket clients use it)
            conn = _lookup(self)
            tagged = tag_request(data) if conn is not None and conn.tls is None else None
            if tagged is not None:
                return _send_whole(orig, self, conn, tagged, memoryview(data).nbytes, args)
        _inner.active = True
        try:
            result = orig(self, data, *args, **kwargs)
        finally:
            _inner.active = False
        # (``conn`` as looked up before: a send on a socket not connected yet raised)
        if conn is not None and conn.tls is None:
            conn.sent += result if counts_return else memoryview(data).nbytes
        return result

    wrapper.__wrapped__ = orig  # type: ignore[attr-defined]
    return wrapper


def _send_whole(orig, sock, conn: _Conn, tagged: bytes, asked: int, args) -> int:  # type: ignore[no-untyped-def]
    """A request head given to ``send``, numbered: sent whole (a part of the header the
    caller never wrote could not be accounted to it), then reported as the caller's
    ``asked`` bytes sent. The facade counts the bytes on the wire, header included."""
    view = memoryview(tagged)
    done = 0
    _inner.active = True
    try:
        while done < len(tagged):
            done += orig(sock, view[done:], *args)
    finally:
        _inner.active = False
    conn.sent += len(tagged)
    return asked


def _ssl_object_read(orig):  # type: ignore[no-untyped-def]
    def read(self, len=1024, buffer=None):  # type: ignore[no-untyped-def]  # noqa: A002
        conn = _ssl_conns.get(self) if current.ACTIVE is not None else None
        if conn is None:
            return orig(self, len, buffer)
        if current.ACTIVE.reads_gated():
            if not conn.stash:
                if conn.eof:
                    return 0 if buffer is not None else b""
                raise ssl.SSLWantReadError("the broker has not let this connection read")
            n = min(len, _len(conn.stash)) if len else _len(conn.stash)
            if buffer is not None:
                n = min(n, memoryview(buffer).nbytes)
                memoryview(buffer).cast("B")[:n] = conn.stash[:n]
                result = n
            else:
                result = bytes(conn.stash[:n])
            del conn.stash[:n]
        else:
            result = orig(self, len, buffer)
        conn.consumed += result if isinstance(result, int) else _len(result)
        return result

    read.__wrapped__ = orig  # type: ignore[attr-defined]
    return read


def _ssl_object_write(orig):  # type: ignore[no-untyped-def]
    def write(self, data):  # type: ignore[no-untyped-def]
        conn = _ssl_conns.get(self) if current.ACTIVE is not None else None
        if conn is None:
            return orig(self, data)
        tagged = tag_request(data)
        if tagged is None:
            result = orig(self, data)
            conn.sent += result
            return result
        # a memory BIO takes a whole write (the caller's count excludes the header)
        result = orig(self, tagged)
        conn.sent += result
        return max(0, result - (len(tagged) - len(data)))

    write.__wrapped__ = orig  # type: ignore[attr-defined]
    return write


_len = len


def raw_recv(sock: socket.socket, n: int) -> bytes:
    """``sock.recv(n)`` without accounting (the selector's fetch does its own)."""
    return _unwrapped(socket.socket.recv)(sock, n)


def raw_sslobj_read(sslobj: ssl.SSLObject, n: int) -> bytes:
    return _unwrapped(ssl.SSLObject.read)(sslobj, n)


def _unwrapped(fn):  # type: ignore[no-untyped-def]
    return getattr(fn, "__wrapped__", fn)


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
    ssl.SSLObject.read = _ssl_object_read(ssl.SSLObject.read)  # type: ignore[method-assign]
    ssl.SSLObject.write = _ssl_object_write(ssl.SSLObject.write)  # type: ignore[method-assign]
