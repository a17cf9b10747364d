"""An event loop's waits on API connections: what the virtual selector does with the
file descriptors asyncio registers.

A thread blocked reading an API connection is durably blocked only once it consumed
everything the facade wrote (``netio``). An event loop does not block in ``recv``: it
blocks in its selector, on every registered descriptor at once. So before the loop blocks,
the selector reports each API connection it waits to read like a blocked reader —
``[port, sent, consumed, seq]``, counted in plaintext whether TLS is done by
``ssl.SSLSocket`` or by asyncio's ``SSLProtocol`` over memory buffers — and the broker's
go for any of them wakes the loop. Quiescence therefore cannot be declared while API data
is on its way to a loop, and watch data can never arrive after it was declared.

Under the baton (deterministic mode) an API connection is readable only as far as the
broker let it be read, never because bytes happened to arrive: its read interest is taken
out of the real ``select``. When the broker's go comes, the selector fetches *all* the
allowed bytes first (a real, short, blocking read: the facade wrote them before the go)
into the connection's stash, decrypting them for asyncio's TLS, and only then calls the
connection readable. The program's callbacks thus see the same chunks in the same order
every run, whatever the timing; connections let go together are delivered in the
broker's order.

Real I/O that completes without the broker keeps the process busy while the loop waits
for it: a TLS handshake or shutdown in progress, and any descriptor the loop waits to
write (a connect in progress, a full send buffer). A loop waiting only to read a socket
other than the facade's is in a wait the broker cannot see (the stall guard's business).
"""

from __future__ import annotations

import selectors
import ssl
from asyncio import selector_events, sslproto

from timewarp._core import netio

_EVENT_READ = selectors.EVENT_READ
_EVENT_WRITE = selectors.EVENT_WRITE
_FETCH = 1 << 16
_TLS_ACTIVE = (sslproto.SSLProtocolState.WRAPPED,)


def _tls_ready(conn: netio._Conn) -> bool:
    """The TLS session carries application data (the handshake is over, no shutdown)."""
    return getattr(conn.tls, "_state", None) in _TLS_ACTIVE


class SelectPlan:
    """One ``select`` call: which registrations are API reads under the broker's control
    (``gated``), which are real I/O that keeps the process busy (``real_io``)."""

    def __init__(self, real: selectors.BaseSelector, gated_reads: bool) -> None:
        self.real = real
        self.gated: list[tuple[int, netio._Conn]] = []  # (fd, conn): read interest gated
        self.reported: list[netio._Conn] = []  # API reads reported to the broker
        self.real_io = False
        self._hidden: list[tuple[int, int, object]] = []
        for key in list(real.get_map().values()):
            if key.events & _EVENT_WRITE:
                self.real_io = True  # a connect, or a send buffer the peer is draining
            if not key.events & _EVENT_READ:
                continue
            conn = netio.conn_for_fd(key.fd)
            if conn is None:
                continue  # not an API connection (the self-pipe, another socket)
            if conn.tls is not None and not _tls_ready(conn):
                self.real_io = True  # handshake or shutdown: real records, real reads
                continue
            self.reported.append(conn)
            if gated_reads:
                self.gated.append((key.fd, conn))

    # -- the broker's go ---------------------------------------------------------------
    def ready(self) -> list[tuple[selectors.SelectorKey, int]]:
        """Gated connections with bytes the broker let them read: fetched (see the module
        docstring) and returned as read events, in the order of the broker's go. asyncio's
        TLS connections get their protocol's read scheduled instead (their bytes are
        already decrypted: the raw socket has nothing more to say)."""
        due = [(fd, c) for fd, c in self.gated if c.stash or c.eof or c.allowed > c.consumed]
        if not due:
            return []
        due.sort(key=lambda item: (item[1].go_no, item[1].seq))
        events = []
        for fd, conn in due:
            _fetch(fd, conn)
            if conn.tls is not None:
                if conn.stash or conn.eof:
                    conn.tls._loop.call_soon(conn.tls._do_read)
                continue
            if conn.stash or conn.eof:
                events.append((self.real.get_key(fd), _EVENT_READ))
        return events

    # -- the real select -----------------------------------------------------------------
    def hide(self) -> None:
        """Take the gated read interest out of the real selector (until :meth:`restore`)."""
        for fd, _conn in self.gated:
            key = self.real.get_key(fd)
            rest = key.events & ~_EVENT_READ
            if rest:
                self.real.modify(fd, rest, key.data)
            else:
                self.real.unregister(fd)
            self._hidden.append((fd, key.events, key.data))

    def restore(self) -> None:
        for fd, events, data in self._hidden:
            if fd in self.real.get_map():
                self.real.modify(fd, events, data)
            else:
                self.real.register(fd, events, data)
        self._hidden.clear()


def _fetch(fd: int, conn: netio._Conn) -> None:
    """Read every byte the broker allowed into ``conn.stash`` (plaintext), blocking until
    they are there: the facade wrote them before the go."""
    sock = netio.socket_for_fd(fd)
    if sock is None:
        conn.eof = True
        return
    recv = netio.raw_recv
    while not conn.eof and conn.consumed + len(conn.stash) < conn.allowed:
        if conn.tls is not None and _decrypt(conn):
            continue
        data = _blocking_recv(sock, recv, conn.allowed - conn.consumed - len(conn.stash))
        if not data:
            conn.eof = True
        elif conn.tls is not None:
            conn.tls._incoming.write(data)
        else:
            conn.stash += data


def _decrypt(conn: netio._Conn) -> bool:
    """Plaintext from the TLS records already received; False when more are needed."""
    sslobj = conn.tls._sslobj
    got = False
    want = conn.allowed - conn.consumed - len(conn.stash)
    while want > 0:
        try:
            chunk = netio.raw_sslobj_read(sslobj, min(want, _FETCH))
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return got
        if not chunk:
            conn.eof = True  # close_notify
            return True
        conn.stash += chunk
        want -= len(chunk)
        got = True
    return got


def _blocking_recv(sock, recv, limit: int) -> bytes:  # type: ignore[no-untyped-def]
    import select as _select

    while True:
        try:
            return recv(sock, min(limit, _FETCH) if limit > 0 else _FETCH)
        except (BlockingIOError, InterruptedError):
            _select.select([sock], [], [])
        except OSError:
            return b""


def adopt_ssl_protocol(protocol: sslproto.SSLProtocol, transport: object) -> None:
    """``SSLProtocol.connection_made``: an asyncio TLS session over ``transport``'s
    socket. If it is an API connection, count its plaintext at the ``SSLObject``."""
    raw = getattr(transport, "_sock", None)
    if raw is None:
        info = transport.get_extra_info("socket")  # type: ignore[attr-defined]
        raw = getattr(info, "_sock", info)
    if raw is not None and getattr(protocol, "_sslobj", None) is not None:
        netio.adopt_tls(protocol._sslobj, raw, protocol)


def patch_asyncio() -> None:
    """Once per process: TLS sessions made by any event loop are adopted, and requests
    written through a socket transport are numbered (``netio.tag_request``)."""
    if getattr(sslproto.SSLProtocol.connection_made, "__wrapped__", None) is not None:
        return
    made = sslproto.SSLProtocol.connection_made

    def connection_made(self, transport):  # type: ignore[no-untyped-def]
        adopt_ssl_protocol(self, transport)
        return made(self, transport)

    connection_made.__wrapped__ = made  # type: ignore[attr-defined]
    sslproto.SSLProtocol.connection_made = connection_made  # type: ignore[method-assign]
    write = selector_events._SelectorSocketTransport.write

    def transport_write(self, data):  # type: ignore[no-untyped-def]
        return write(self, netio.tag_transport_write(self._sock, data))

    transport_write.__wrapped__ = write  # type: ignore[attr-defined]
    selector_events._SelectorSocketTransport.write = transport_write  # type: ignore[method-assign]
