"""HTTP/1.1 transport with an exact byte ledger per connection.

Parsing and framing are h11's (a sans-I/O HTTP/1.1 state machine: request line and
headers, Content-Length and chunked bodies, keep-alive, ``Connection: close``, HTTP/1.0,
size limits); this module owns the sockets, the threads and the ledger. One exception,
for speed: an ordinary response to a completely read request is framed here, from a head
h11 validated once and that is byte for byte what h11 writes (``_head``;
tests/test_facade_framing.py compares the two), and the next request of the connection
gets a fresh h11 state (h11 never saw that response).

Why not ``http.server``: the broker must know, per TCP connection, how many request
bytes were taken in and how many response bytes were handed to the kernel, to decide
whether the client thread blocked on that socket has consumed everything (see
``Ledger.idle``). Each response is one ``sendall`` (head + body), each watch event one
chunk in one ``sendall``, and sockets have TCP_NODELAY: no 40 ms delayed-ACK stalls.

Ledger rules (the broker's quiescence test depends on them):
- ``received`` grows by a request's head+body size when it is completely read, in the
  same locked step that sets ``handling``;
- ``written`` grows *before* the bytes are passed to ``sendall``;
- ``queued`` counts frames a watch will still deliver, ``queued_bytes`` the bytes they will
  take on the wire (framed: ``framed_size``); both are incremented by the thread that
  published the event (inside the store call), and turned into ``written`` in one locked
  step by the connection thread. A client may be let go to read ``written +
  queued_bytes``: what was published is owed to it, whether or not the connection's
  thread has written it yet (so no wall-clock wait decides how much it reads);
- a connection the server closed keeps its counters (until a new connection takes the
  port): its client may still have a response to read, and must be let go to read it;
- listeners are called after a response is written, after a watch frame is written with
  nothing else queued, when a watch parks, and when a connection closes;
- a response *held* back until a virtual deadline (modelled API latency, see
  ``broker/drivers/pacing.py``) leaves the connection ``held``: not handling, nothing owed yet —
  quiescent, like a sleep — until the deadline's callback marks it handling again, in
  the broker's thread, before the response is written.

Limits (before any work on a request): a head (request line and headers) or a chunk-size
line longer than ``MAX_HEAD`` is refused (431/400); a body longer than ``MAX_BODY`` (the
API server's 3 MiB) gets 413 before it is read when its length is declared, as soon as
it passes the limit when chunked; ``admit_head`` (the facade's bearer-token check) runs
on the head, before a body byte is read.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import select
import socket
import ssl
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import h11

from . import websocket
from .watch import END, Watcher

_log = logging.getLogger(__name__)
MAX_HEAD = 64 * 1024  # request line + headers; also the longest chunk-size line
MAX_BODY = 3 * 1024 * 1024  # kube-apiserver's MaxRequestBodyBytes
# Connections the server closed whose counters are kept for their clients' runtimes
# (a client may not have read its last response yet): the newest this many.
CLOSED_KEPT = 4096
# How often (real seconds) a WebSocket watch looks at what its client sent (pings, close)
WS_POLL_S = 0.05
# Out of file descriptors: wait this long (doubling up to the max) and accept again.
ACCEPT_BACKOFF_S = (0.005, 0.2)
# After a refusal, how long (and how much) the client's unread bytes are drained.
LINGER_S = 0.5
LINGER_BYTES = 8 * MAX_BODY
# The first bytes of each request are kept until it is parsed (``on_unhandled`` gets them
# when h11 cannot parse its head): the request line and the runtime's number after it.
_START_KEPT = MAX_HEAD + 256
_FD_EXHAUSTION = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
_REASONS = {
    200: "OK",
    201: "Created",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    406: "Not Acceptable",
    409: "Conflict",
    410: "Gone",
    411: "Length Required",
    413: "Request Entity Too Large",
    414: "Request-URI Too Long",
    415: "Unsupported Media Type",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    504: "Gateway Timeout",
    505: "HTTP Version Not Supported",
}


@dataclass
class Request:
    method: str
    target: str  # raw request target (path?query), not decoded
    headers: dict[str, str]  # lower-case names; repeated headers joined with ", "
    body: bytes
    peer_port: int
    on_queued: Callable[[bytes | None], None]  # a watch frame queued (watch.py)
    peer_cert: bytes | None = None  # the TLS client certificate (DER), unverified
    identity: Any = None  # who sent it, once the facade asked (auth.Identity; cache)


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = "application/json"
    extra_headers: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class WatchStream:
    """A streaming answer: frames from ``watcher`` until END; ``cleanup`` runs once when
    the stream is over for any reason (end, client gone, server stop)."""

    watcher: Watcher
    cleanup: Callable[[], None]
    on_parked: Callable[[], None] | None = None


Handler = Callable[[Request], "Response | WatchStream"]
# (method, target, headers, client certificate) of a request whose body is not read yet
# -> a refusal or None
HeadCheck = Callable[[str, str, dict[str, str], "bytes | None"], "Response | None"]


class Connection:
    __slots__ = (
        "peer_port",
        "received",
        "written",
        "handling",
        "queued",
        "queued_bytes",
        "ws_framer",
        "streaming",
        "sock",
        "closed",
        "refused",
        "last_request",
        "held",
        "peer_cert",
    )

    def __init__(self, peer_port: int, sock: socket.socket) -> None:
        self.peer_port = peer_port
        self.sock = sock
        self.received = 0
        self.written = 0
        self.handling = False
        self.queued = 0
        self.queued_bytes = 0  # the framed size of the queued frames
        self.ws_framer: websocket.Framer | None = None  # an upgraded watch's
        self.streaming = False  # the request being answered is a watch
        self.closed = False
        self.refused = False  # answered without reading all the client sent
        self.last_request = ""  # "GET /api/v1/pods?watch=1", for stall diagnostics
        self.held = False  # a response held back until a virtual deadline (Hold)
        self.peer_cert: bytes | None = None  # the TLS client's certificate (DER), if any


class Hold:
    """A response kept back until virtual time reaches a deadline (API latency). Made by
    the server's ``hold_response`` hook; the hook's owner calls :meth:`release` when the
    deadline is reached (in the broker's thread, with time standing still)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = False
        self._released = threading.Event()
        self._busy_again: Callable[[], None] | None = None

    def release(self) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
            busy_again, self._busy_again = self._busy_again, None
        if busy_again is not None:
            busy_again()  # busy before the broker can look again: the response is due
        self._released.set()  # only then may the connection write it (and go idle)

    def _arm(self, busy_again: Callable[[], None]) -> bool:
        """``busy_again`` runs on release (before anyone may see the connection held).
        False: released already."""
        with self._lock:
            if self._done:
                return False
            self._busy_again = busy_again
            return True

    def _wait(self) -> None:
        self._released.wait()


class Ledger:
    """Per-connection byte counters, keyed by the client's (peer) port."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._conns: dict[int, Connection] = {}
        # closed by the server, newest last: what their clients may still have to read
        self._closed: OrderedDict[int, Connection] = OrderedDict()
        self._listeners: list[Callable[[int], None]] = []

    def add_listener(self, fn: Callable[[int], None]) -> None:
        with self.lock:
            self._listeners.append(fn)

    def notify(self, peer_port: int) -> None:
        with self.lock:
            listeners = list(self._listeners)
        for fn in listeners:
            fn(peer_port)

    def register(self, conn: Connection) -> None:
        with self.lock:
            self._closed.pop(conn.peer_port, None)
            self._conns[conn.peer_port] = conn

    def unregister(self, conn: Connection) -> None:
        """The server closed ``conn``: it handles nothing and queues nothing more, and
        what its client sent but the server never read will never count. Its written
        bytes stay known, so that its client is let go to read them."""
        with self.lock:
            conn.closed = True
            conn.handling = False
            conn.queued = 0
            conn.queued_bytes = 0
            if self._conns.get(conn.peer_port) is conn:
                del self._conns[conn.peer_port]
                self._closed[conn.peer_port] = conn
                while len(self._closed) > CLOSED_KEPT:
                    self._closed.popitem(last=False)

    def _lookup(self, peer_port: int) -> Connection | None:
        conn = self._conns.get(peer_port)
        return conn if conn is not None else self._closed.get(peer_port)

    def idle(self, peer_port: int, sent: int, consumed: int) -> bool:
        """True iff the connection from ``peer_port`` has taken in exactly ``sent`` bytes,
        written exactly ``consumed`` bytes, handles no request and has nothing queued (a
        closed one: its client consumed all it was written). An unknown port is idle only
        if nothing was exchanged on it."""
        with self.lock:
            conn = self._lookup(peer_port)
            if conn is None:
                return sent == 0 and consumed == 0
            if conn.closed:
                return consumed >= conn.written
            return (
                conn.received == sent
                and conn.written == consumed
                and not conn.handling
                and conn.queued == 0
            )

    def state(self, peer_port: int, sent: int, consumed: int) -> str:
        """``"idle"`` (parked: nothing owed either way), ``"busy"`` (a request not yet fully
        read, or being handled), ``"ready"`` (nothing being handled, and bytes written
        or queued — :meth:`written` — that the client has not consumed; ``"streaming"``
        when those bytes are watch events rather than a response) or ``"flushing"``
        (frames queued that add no byte the client has not consumed: the end of an
        HTTP/1.0 stream, which the connection's thread is about to close). A connection
        the server closed is ``"ready"`` until its client read everything, then
        ``"idle"``: closing is normal HTTP, never a reason to wait."""
        with self.lock:
            return self._state_locked(peer_port, sent, consumed)

    def states(self, rows: Iterable[Sequence[int]]) -> list[str]:
        """:meth:`state` of each ``[port, sent, consumed, ...]`` row (a runtime's state
        report), answered under one take of the lock: one question per report."""
        with self.lock:
            return [self._state_locked(row[0], row[1], row[2]) for row in rows]

    def _state_locked(self, peer_port: int, sent: int, consumed: int) -> str:
        conn = self._lookup(peer_port)
        if conn is None:
            return "idle" if sent == 0 and consumed == 0 else "busy"
        if conn.closed:
            return "idle" if consumed >= conn.written else "ready"
        if conn.received != sent or conn.handling:
            return "busy"
        if conn.held:
            return "held"
        owed = conn.written + conn.queued_bytes
        if conn.queued and owed == consumed:
            return "flushing"
        if owed == consumed:
            return "idle"
        return "streaming" if conn.streaming else "ready"

    def written(self, peer_port: int) -> int:
        """The bytes owed to the client so far: written, or queued to be (see the ledger
        rules); a client let go to read may read that far."""
        with self.lock:
            conn = self._lookup(peer_port)
            return 0 if conn is None else conn.written + conn.queued_bytes

    def snapshot(self) -> dict[int, dict[str, Any]]:
        """Per peer port: the counters and the last request line (for stall reports:
        "port 41234: parked in GET /api/v1/pods?watch=1…")."""
        with self.lock:
            return {
                p: {
                    "received": c.received,
                    "written": c.written,
                    "handling": c.handling,
                    "queued": c.queued,
                    "queued_bytes": c.queued_bytes,
                    "held": c.held,
                    "last_request": c.last_request,
                }
                for p, c in self._conns.items()
            }


def _chunk(frame: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(frame), frame)  # h11's chunk framing, one copy


CHUNKED_END = b"0\r\n\r\n"  # h11's EndOfMessage of a chunked response without trailers


def framed_size(frame: bytes | None, chunked: bool) -> int:
    """The bytes a queued watch frame takes on the wire, as :meth:`HttpServer._send_batch`
    writes it: a chunk (HTTP/1.1) or bare (HTTP/1.0); ``END`` is the end of the message
    (the last chunk; nothing on HTTP/1.0, whose stream ends with the connection); None
    (a direct write's backlog) adds nothing: its bytes were counted when written."""
    if frame is None:
        return 0
    if not frame:  # END
        return len(CHUNKED_END) if chunked else 0
    if not chunked:
        return len(frame)
    return len(frame) + len(b"%x" % len(frame)) + 4  # len(_chunk(frame)), not built


_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)
_JSON_HEADERS = [(b"Content-Type", b"application/json"), (b"Cache-Control", b"no-cache, private")]


class _Closed(Exception):
    """The client closed its side (or broke the connection) mid-request."""


class _Wire:
    """One connection's h11 state and the bytes it was fed: ``taken()`` is how many of
    them the requests parsed so far used (what is buffered beyond is not yet taken)."""

    __slots__ = (
        "h",
        "sock",
        "fed",
        "counted",
        "method",
        "start",
        "headers",
        "settled",
        "by_hand",
        "drained",
    )

    def __init__(self, sock: socket.socket) -> None:
        self.h = _h11_server()
        self.sock = sock
        self.fed = 0
        self.counted = 0  # bytes already added to the ledger's ``received``
        self.method = ""  # of the request being answered
        # the request being read: its first bytes, its headers once parsed, and whether
        # it was settled (handed to the handler, or given up on: see on_unhandled)
        self.start = b""
        self.headers: dict[str, str] | None = None
        self.settled = False
        self.by_hand = False  # the response was framed here, not by h11 (see _head)
        # nothing buffered: the next event needs the socket first (saves h11 a NEED_DATA)
        self.drained = True

    def begin_request(self) -> None:
        self.start = b"" if self.drained else self.h.trailing_data[0][:_START_KEPT]
        self.headers = None
        self.settled = False
        self.by_hand = False

    def reusable(self) -> bool:
        """The exchange is over and the connection may carry another request (not
        HTTP/1.0, no ``Connection: close`` either way, the request's body all read)."""
        h = self.h
        if self.by_hand:  # h11 never saw the response: the request side decides
            return h.their_state is h11.DONE
        return h.our_state is h11.DONE and h.their_state is h11.DONE

    def next_cycle(self) -> None:
        """On to the next request of a kept-alive connection: a fresh h11 state fed what
        the client already sent beyond this request (a response framed by hand left
        h11's own state waiting to send it)."""
        data, closed = self.h.trailing_data
        self.drained = not data and not closed
        if not self.by_hand:
            self.h.start_next_cycle()
            return
        self.h = _h11_server()
        if data:
            self.h.receive_data(data)
        if closed:
            self.h.receive_data(b"")

    def next_event(self) -> Any:
        """The next h11 event, reading from the socket as needed; raises _Closed."""
        while True:
            if self.drained:
                self.drained = False
            else:
                event = self.h.next_event()
                if event is not h11.NEED_DATA:
                    return event
            try:
                data = self.sock.recv(65536)
            except (ConnectionError, ssl.SSLError, OSError) as exc:
                raise _Closed from exc
            if not data:
                self.h.receive_data(b"")
                raise _Closed
            self.feed(data)

    def feed(self, data: bytes) -> None:
        self.fed += len(data)
        if len(self.start) < _START_KEPT:
            self.start += data[: _START_KEPT - len(self.start)]
        self.h.receive_data(data)

    def uncounted(self) -> int:
        """Bytes of the requests read so far not yet in the ledger (and mark them)."""
        taken = self.fed - len(self.h.trailing_data[0])
        new, self.counted = taken - self.counted, taken
        return new


def _status_line(status: int) -> bytes:
    return f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}\r\n".encode()


def _h11_server() -> h11.Connection:
    return h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)


# statuses whose framing h11 decides otherwise (no body): always framed by h11
_NO_BODY_STATUSES = frozenset({204, 304})
# headers that change a response's framing: a handler's own goes through h11
_FRAMING = frozenset({"connection", "content-length", "transfer-encoding"})
# (status, content type, extra headers, close) -> the head around the Content-Length value
_HEADS: dict[tuple[int, str, tuple[tuple[str, str], ...], bool], tuple[bytes, bytes]] = {}
_HEADS_MAX = 512  # beyond this many distinct heads, frame without keeping the template


def _response_headers(resp: Response, length: bytes) -> list[tuple[bytes, bytes]]:
    """A response's headers in the order they are written (h11 adds its framing ones)."""
    headers = [
        (b"Content-Type", resp.content_type.encode()),
        (b"Content-Length", length),
        (b"Cache-Control", b"no-cache, private"),
    ]
    headers += [(n.encode(), v.encode()) for n, v in resp.extra_headers]
    return headers


def _head(resp: Response, close: bool) -> tuple[bytes, bytes] | None:
    """The response head h11 would write, split around the Content-Length value: built
    once per distinct head from the headers as h11 validates and normalises them
    (``h11.Response`` raises on a header it would refuse), then reused. None: a framing
    header of the handler's own (h11 decides)."""
    key = (resp.status, resp.content_type, tuple(resp.extra_headers), close)
    head = _HEADS.get(key)
    if head is not None:
        return head
    if any(name.lower() in _FRAMING for name, _ in resp.extra_headers):
        return None
    headers = _response_headers(resp, b"0")
    if close:
        headers.append((b"Connection", b"close"))
    reason = _REASONS.get(resp.status, "Unknown").encode()
    checked = h11.Response(status_code=resp.status, headers=headers, reason=reason)
    lines = [b"HTTP/1.1 %d %s\r\n" % (resp.status, reason)]
    for name, value in checked.headers.raw_items():
        lines.append(
            name + b": " + (b"\0" if name.lower() == b"content-length" else value) + b"\r\n"
        )
    before, after = b"".join(lines).split(b"\0")
    head = (before, after + b"\r\n")
    if len(_HEADS) < _HEADS_MAX:
        _HEADS[key] = head
    return head


class HttpServer:
    """Threaded HTTP/1.1 server (one thread per connection) bound to ``host:port``."""

    def __init__(
        self,
        handler: Handler,
        ledger: Ledger,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        listener: socket.socket | None = None,
        ssl_context: ssl.SSLContext | None = None,
        plain_too: bool = False,
        poll_interval: float = 0.5,
        on_request: Callable[[Request], Callable[[], None] | None] | None = None,
        admit_head: HeadCheck | None = None,
        on_unhandled: Callable[[dict[str, str] | None, bytes], None] | None = None,
    ) -> None:
        """``on_unhandled(headers, start)``: a request will never reach ``handler``
        (refused on its head or body, broken off, malformed), called before any answer
        to it is written — with its headers if they were parsed, else None and the first
        bytes received of it."""
        self._handler = handler
        self._on_unhandled = on_unhandled
        self.ledger = ledger
        self._ssl = ssl_context
        # serve plain HTTP as well as HTTPS on the one port (told apart by the first byte):
        # schedulers keep their plain kubeconfigs, people get HTTPS (kubectl sends no
        # bearer token over plain HTTP)
        self._plain_too = plain_too
        self._poll = poll_interval
        self._on_request = on_request
        self._admit_head = admit_head
        # a socket bound beforehand (see endpoint.py) may already hold waiting clients
        self._listener = listener if listener is not None else socket.create_server((host, port))
        self.host, self.port = self._listener.getsockname()[:2]
        self._threads: set[threading.Thread] = set()
        self._conns: set[Connection] = set()
        self._streams: set[Watcher] = set()
        self._holds: set[Hold] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._accept_thread: threading.Thread | None = None
        self.accept_errors = 0  # accept() failures survived (out of descriptors …)
        # Watch events written by the thread that commits them (deterministic mode, where
        # the broker waits for them before letting a scheduler read): no hop through the
        # stream's thread. Plain sockets only (a TLS record cannot be sent half-way).
        self.direct_watch_writes = False
        # API latency (broker/drivers/pacing.py): a Hold for a response to keep back, or None
        self.hold_response: Callable[[Request], Hold | None] | None = None

    def start(self) -> None:
        self._accept_thread = threading.Thread(
            target=self._accept_loop, name=f"facade-accept-{self.port}", daemon=True
        )
        self._accept_thread.start()

    def stop(self) -> None:
        self._stopping.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            conns = list(self._conns)
            threads = list(self._threads)
            streams = list(self._streams)
            holds = list(self._holds)
        for watcher in streams:
            watcher.wake()
        for hold in holds:
            hold.release()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)
        if self._accept_thread is not None:
            self._accept_thread.join(timeout=5)
        for t in threads:
            t.join(timeout=5)

    def _accept_loop(self) -> None:
        backoff = ACCEPT_BACKOFF_S[0]
        while not self._stopping.is_set():
            try:
                sock, addr = self._listener.accept()
            except OSError as exc:
                if self._stopping.is_set():
                    return
                if exc.errno in _FD_EXHAUSTION:
                    # Out of descriptors: the connection waits in the backlog until one is
                    # closed. Keep accepting, a little later each time; say so once.
                    if not self.accept_errors:
                        _log.warning(
                            "facade: cannot accept a connection (%s); retrying while "
                            "descriptors are exhausted",
                            exc.strerror or exc,
                        )
                    self.accept_errors += 1
                    self._stopping.wait(backoff)
                    backoff = min(backoff * 2, ACCEPT_BACKOFF_S[1])
                    continue
                if exc.errno in (errno.EBADF, errno.EINVAL):  # the listener is closed
                    return
                self.accept_errors += 1  # ECONNABORTED and the like: that client only
                continue
            backoff = ACCEPT_BACKOFF_S[0]
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                t = threading.Thread(
                    target=self._serve,
                    args=(sock, addr[1]),
                    name=f"facade-conn-{addr[1]}",
                    daemon=True,
                )
                with self._lock:
                    self._threads.add(t)
                t.start()
            except (OSError, RuntimeError) as exc:  # no thread to be had: drop this one
                _log.warning("facade: dropping a connection: %s", exc)
                with self._lock:
                    self._threads.discard(t)
                sock.close()

    # --- one connection ------------------------------------------------------------

    def _serve(self, raw: socket.socket, peer_port: int) -> None:
        conn = Connection(peer_port, raw)
        self.ledger.register(conn)
        with self._lock:
            self._conns.add(conn)
        try:
            sock: socket.socket = raw
            if self._ssl is not None and (not self._plain_too or _tls_hello(raw)):
                sock = self._ssl.wrap_socket(raw, server_side=True)
                conn.sock = sock
                conn.peer_cert = sock.getpeercert(binary_form=True)
            self._request_loop(conn, _Wire(sock))
        except (_Closed, OSError, ssl.SSLError):
            pass
        finally:
            self.ledger.unregister(conn)
            self.ledger.notify(peer_port)
            if conn.refused:
                _linger(conn.sock)
            with contextlib.suppress(OSError):
                conn.sock.close()
            with self._lock:
                self._conns.discard(conn)
                self._threads.discard(threading.current_thread())

    def _request_loop(self, conn: Connection, wire: _Wire) -> None:
        while not self._stopping.is_set():
            wire.begin_request()
            request = self._read_request(conn, wire)
            if request is None:  # the client is done (or answered and refused)
                self._unhandled(wire)
                return
            if isinstance(request, Response):  # refused on its head, nothing left unread
                self._unhandled(wire)
                self._write(conn, self._encode(wire, request), last=True)
                self._finish_request(conn)
                if not wire.reusable():
                    return
                wire.next_cycle()
                continue
            done = self._on_request(request) if self._on_request else None
            try:
                result = self._handler(request)
            except Exception as exc:  # a bug must not kill the connection silently
                _log.exception("facade: internal error on %s %s", request.method, request.target)
                result = _plain_error(500, f"internal error: {type(exc).__name__}: {exc}")
            try:
                if isinstance(result, WatchStream):
                    if not self._stream(conn, wire, result, done):
                        return
                    done = None
                else:
                    hold = self.hold_response(request) if self.hold_response else None
                    if hold is not None:
                        self._hold(conn, hold)
                    self._write(conn, self._encode(wire, result), last=True)
            finally:
                if done is not None:
                    done()
            self._finish_request(conn)
            if not wire.reusable():
                return  # HTTP/1.0, Connection: close, or a body left unread: close
            wire.next_cycle()

    def _hold(self, conn: Connection, hold: Hold) -> None:
        """Keep the decided response back until ``hold`` is released: the connection is
        held (quiescent) meanwhile, and handling again from the release on — marked by the
        releasing thread itself, so the broker never sees it held once time has reached
        the deadline."""

        def busy_again() -> None:
            with self.ledger.lock:
                conn.held = False
                conn.handling = True

        with self._lock:
            self._holds.add(hold)
        try:
            if self._stopping.is_set() or not hold._arm(busy_again):
                return
            with self.ledger.lock:
                conn.handling = False
                conn.held = True
            self.ledger.notify(conn.peer_port)
            if self._stopping.is_set():
                hold.release()
            hold._wait()
        finally:
            with self._lock:
                self._holds.discard(hold)

    def _finish_request(self, conn: Connection) -> None:
        with self.ledger.lock:
            conn.handling = False
        self.ledger.notify(conn.peer_port)

    def _unhandled(self, wire: _Wire) -> None:
        """The request being read will not be handled (once per request)."""
        if self._on_unhandled is not None and not wire.settled and wire.start:
            wire.settled = True
            self._on_unhandled(wire.headers, wire.start)

    def _refuse(self, conn: Connection, wire: _Wire, response: Response) -> None:
        """Answer ``response`` to a request that will not be handled, and let the
        connection close (the request's bytes, read or not, never count)."""
        self._unhandled(wire)
        try:
            data = self._encode(wire, response)
        except h11.LocalProtocolError:  # h11 cannot frame it (e.g. the head was garbage)
            data = _raw_response(response)
        conn.refused = True
        self._write(conn, data, last=True)

    def _read_request(self, conn: Connection, wire: _Wire) -> Request | Response | None:
        """The next request, or the answer to a request refused on its head (its body,
        if it has one, is never read: the connection then closes), or None when the
        connection is over (closed, or refused and answered)."""
        try:
            event = wire.next_event()
        except _Closed:
            return None
        except h11.RemoteProtocolError as exc:
            status = exc.error_status_hint if exc.error_status_hint in _REASONS else 400
            why = f"malformed request: {exc}" if str(exc) else "malformed request"
            if status == 431:
                why = f"request head larger than {MAX_HEAD // 1024} KiB"
            self._refuse(conn, wire, _plain_error(status, why))
            return None
        if isinstance(event, h11.ConnectionClosed):
            return None
        if not isinstance(event, h11.Request):  # nothing else can come first
            return None
        method = wire.method = event.method.decode("latin-1")
        target = event.target.decode("latin-1")
        headers: dict[str, str] = {}
        # raw_items: iterating ``event.headers`` itself goes through Sequence.__iter__,
        # one __getitem__ per header; h11 lower-cases names as bytes, as here
        for name_b, value_b in event.headers.raw_items():
            name, value = name_b.lower().decode("latin-1"), value_b.decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        wire.headers = headers
        with self.ledger.lock:
            conn.last_request = f"{method} {target}"
        # Checks on the head, before a body byte is read: its size (h11 bounds only a
        # head still incomplete), credentials, then the body's declared size.
        refusal = None
        if wire.fed - len(wire.h.trailing_data[0]) - wire.counted > MAX_HEAD:
            refusal = _plain_error(431, f"request head larger than {MAX_HEAD // 1024} KiB")
        elif self._admit_head is not None:
            refusal = self._admit_head(method, target, headers, conn.peer_cert)
        if refusal is None:
            length = headers.get("content-length")
            if length is not None and length.isdigit() and int(length) > MAX_BODY:
                refusal = _too_large()
        if refusal is not None:
            bodiless = headers.get("content-length", "0") == "0" and (
                "transfer-encoding" not in headers
            )
            if refusal.status != 431 and bodiless:
                with contextlib.suppress(_Closed, h11.RemoteProtocolError):
                    if isinstance(wire.next_event(), h11.EndOfMessage):  # no body: keep alive
                        with self.ledger.lock:
                            conn.received += wire.uncounted()
                            conn.handling = True
                        return refusal
            self._refuse(conn, wire, refusal)
            return None
        chunks: list[bytes] = []
        size = 0
        try:
            while True:
                event = wire.next_event()
                if isinstance(event, h11.Data):
                    size += len(event.data)
                    if size > MAX_BODY:
                        self._refuse(conn, wire, _too_large())
                        return None
                    chunks.append(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    break
                else:
                    return None
        except _Closed:
            return None
        except h11.RemoteProtocolError as exc:
            self._refuse(conn, wire, _plain_error(400, f"malformed request body: {exc}"))
            return None
        body = b"".join(chunks)
        wire.settled = True  # on to the handler
        with self.ledger.lock:
            conn.received += wire.uncounted()
            conn.handling = True
        # a watch's frames are owed as its stream will frame them (see the ledger rules)
        if wire.headers is not None and websocket.is_websocket_request(wire.headers):

            def size(frame: bytes | None) -> int:
                return websocket.framed_size(frame, conn.ws_framer)
        else:
            chunked = wire.h.their_http_version != b"1.0"

            def size(frame: bytes | None) -> int:
                return framed_size(frame, chunked)

        return Request(
            method,
            target,
            headers,
            body,
            conn.peer_port,
            lambda frame: self._queued(conn, size(frame)),
            peer_cert=conn.peer_cert,
        )

    def _queued(self, conn: Connection, size: int) -> None:
        with self.ledger.lock:
            conn.queued += 1
            conn.queued_bytes += size

    def _encode(self, wire: _Wire, resp: Response) -> bytes:
        """The whole response, as h11 frames it (``Connection: close`` added when the
        connection will not be reused); the answer to a HEAD has its head only.

        The common case — a complete request, an ordinary status, no framing header of
        the handler's own — is framed here from a head template (``_head``): h11's
        ``send`` re-validates every header twice per response, a third of the HTTP
        layer's time per request. Anything else goes through h11 (``_encode_h11``)."""
        h = wire.h
        their = h.their_state
        if (
            h.our_state is h11.SEND_RESPONSE
            and (their is h11.DONE or their is h11.MUST_CLOSE)
            and resp.status >= 200
            and resp.status not in _NO_BODY_STATUSES
        ):
            head = _head(resp, close=their is h11.MUST_CLOSE)
            if head is not None:
                wire.by_hand = True
                length = b"%d" % len(resp.body)
                if wire.method == "HEAD":
                    return head[0] + length + head[1]
                return b"".join((head[0], length, head[1], resp.body))
        return self._encode_h11(wire, resp)

    def _encode_h11(self, wire: _Wire, resp: Response) -> bytes:
        """``_encode`` by h11 itself (raises h11.LocalProtocolError when the request never
        parsed)."""
        h = wire.h
        headers = _response_headers(resp, str(len(resp.body)).encode())
        reason = _REASONS.get(resp.status, "Unknown").encode()
        # the pieces as h11 frames them, joined once: the body is copied once, as before
        send = h.send_with_data_passthrough
        parts = send(h11.Response(status_code=resp.status, headers=headers, reason=reason))
        if wire.method != "HEAD":
            parts += send(h11.Data(data=resp.body))
        parts += send(h11.EndOfMessage())
        return b"".join(parts)

    def _write(
        self,
        conn: Connection,
        data: bytes,
        *,
        from_queue: int = 0,
        from_queue_bytes: int = 0,
        ending: bool = False,
        last: bool = False,
        counted: int = 0,
    ) -> None:
        """``from_queue``: how many queued frames ``data`` holds (watch streams);
        ``counted``: how many of its bytes were counted as written already (a direct
        write's backlog).
        ``last``: the whole response to the request being handled. The connection
        stops being busy before it is sent: the response is decided, and a client that
        reads only when the broker says "ready" (deterministic mode) must be able to
        drain what the socket buffers cannot hold, or ``sendall`` would never return."""
        with self.ledger.lock:
            conn.written += len(data) - counted
            conn.queued -= from_queue
            conn.queued_bytes -= from_queue_bytes
            if ending:  # busy until the request is wound up (_finish_request)
                conn.handling = True
            if last:
                conn.handling = False
        if last:
            self.ledger.notify(conn.peer_port)
        conn.sock.sendall(data)

    # --- watches -------------------------------------------------------------------

    def _stream(
        self,
        conn: Connection,
        wire: _Wire,
        stream: WatchStream,
        done: Callable[[], None] | None,
    ) -> bool:
        """Write a streamed watch response; True if the connection may be reused.

        Frames are chunks (an HTTP/1.0 client gets them bare, the end of the stream
        being the end of the connection): framed here rather than by h11, because a
        direct write frames them in the committing thread."""
        if wire.headers is not None and websocket.is_websocket_request(wire.headers):
            return self._stream_ws(conn, wire, stream, done)
        watcher = stream.watcher
        h = wire.h
        chunked = h.their_http_version != b"1.0"
        frame = _chunk if chunked else bytes
        with self._lock:
            self._streams.add(watcher)
        with self.ledger.lock:
            conn.streaming = True
        try:
            headers = list(_JSON_HEADERS)
            if chunked:
                headers.append((b"Transfer-Encoding", b"chunked"))
            self._write(conn, h.send(h11.Response(status_code=200, headers=headers)))
            parked = False
            while True:
                if not parked and watcher.pending() == 0:
                    self._park(conn, stream, frame, done)
                    parked, done = True, None
                batch = watcher.take_batch(self._poll)
                if batch is None:
                    if self._stopping.is_set() or self._client_gone(wire):
                        return False
                    continue
                if self._send_batch(conn, wire, frame, watcher, batch):
                    return chunked
                if parked:
                    with self.ledger.lock:
                        idle_now = conn.queued == 0
                    if idle_now:
                        self.ledger.notify(conn.peer_port)
        except OSError:
            return False
        finally:
            self._wind_up_stream(conn, stream, done)

    def _stream_ws(
        self,
        conn: Connection,
        wire: _Wire,
        stream: WatchStream,
        done: Callable[[], None] | None,
    ) -> bool:
        """A watch over WebSocket (``websocket.py``): the handshake's answer, then each
        event as one text message, the client's pings answered, a close frame at the end.
        The connection is never reused (False)."""
        watcher = stream.watcher
        assert wire.headers is not None
        head, framer = websocket.handshake(wire.headers)
        conn.ws_framer = framer
        with self._lock:
            self._streams.add(watcher)
        with self.ledger.lock:
            conn.streaming = True
        try:
            if framer is None:  # refused, raw, as x/net writes it; then the connection closes
                self._write(conn, head, last=True)
                return False
            self._write(conn, head)
            pending = wire.h.trailing_data[0]  # frames sent right behind the request
            if pending and not self._ws_input(conn, watcher, framer, pending):
                return False
            parked = False
            while True:
                if not parked and watcher.pending() == 0:
                    self._park(conn, stream, framer.message, done)
                    parked, done = True, None
                batch = watcher.take_batch(WS_POLL_S)
                if batch is not None:
                    backlog, frames = batch
                    if frames and frames[-1] is END:
                        frames[-1] = websocket.Control(framer.close())
                        self._send_batch(conn, wire, framer.message, watcher, batch)
                        return False
                    self._send_batch(conn, wire, framer.message, watcher, batch)
                    if parked:
                        with self.ledger.lock:
                            idle_now = conn.queued == 0
                        if idle_now:
                            self.ledger.notify(conn.peer_port)
                if self._stopping.is_set():
                    return False
                data = _poll_recv(wire.sock)
                if data is not None and not self._ws_input(conn, watcher, framer, data):
                    return False
        except OSError:
            return False
        finally:
            self._wind_up_stream(conn, stream, done)

    def _ws_input(
        self, conn: Connection, watcher: Watcher, framer: websocket.Framer, data: bytes
    ) -> bool:
        """Bytes a WebSocket client sent: taken in, answered (pong, close) through the
        watcher's queue — all in one busy step, so the client never looks idle with an
        answer owed. False when the client is gone."""
        if not data:
            return False
        with self.ledger.lock:
            conn.received += len(data)
            handling, conn.handling = conn.handling, True
        try:
            replies, over = framer.receive(data)
            for reply in replies:
                watcher.push(reply, bounded=False, raw=True)
            if over:
                watcher.end()
        finally:
            with self.ledger.lock:  # back as it was (busy until the initial events are out)
                conn.handling = handling
            self.ledger.notify(conn.peer_port)
        return True

    def _park(
        self,
        conn: Connection,
        stream: WatchStream,
        frame: Callable[[bytes], bytes],
        done: Callable[[], None] | None,
    ) -> None:
        """The initial events are written: the request now waits for changes ("parked").
        The connection handles nothing, the request is done for its sender, and in
        deterministic mode later events are written by the thread that commits them."""
        watcher = stream.watcher
        with self.ledger.lock:
            conn.handling = False
        if done is not None:
            done()
        if stream.on_parked is not None:
            stream.on_parked()
        if self.direct_watch_writes and not isinstance(conn.sock, ssl.SSLSocket) and _DONTWAIT:
            watcher.attach_writer(lambda f: self._write_direct(conn, frame(f)))
        self.ledger.notify(conn.peer_port)

    def _send_batch(
        self,
        conn: Connection,
        wire: _Wire,
        frame: Callable[[bytes], bytes],
        watcher: Watcher,
        batch: tuple[bytes, list[bytes]],
    ) -> bool:
        """Write what the watcher queued (a direct write's backlog first) in one write: a
        client let go to read finds it all. True when that was the end of the stream."""
        backlog, frames = batch
        try:
            ending = bool(frames) and frames[-1] is END
            if ending:
                frames.pop()
            data = backlog + b"".join(frame(f) for f in frames)
            taken = len(frames) + (1 if backlog else 0)
            if ending:
                end = wire.h.send(h11.EndOfMessage())
                self._write(
                    conn,
                    data + end,
                    from_queue=taken + 1,
                    from_queue_bytes=len(data) - len(backlog) + len(end),
                    ending=True,
                    counted=len(backlog),
                )
                return True
            self._write(
                conn,
                data,
                from_queue=taken,
                from_queue_bytes=len(data) - len(backlog),
                counted=len(backlog),
            )
            return False
        finally:
            watcher.sent()

    def _wind_up_stream(
        self, conn: Connection, stream: WatchStream, done: Callable[[], None] | None
    ) -> None:
        """The stream is over (ended, the client gone, the server stopping): the
        connection handles its request again, the watch is detached, and what was queued
        for it and never written leaves the ledger."""
        watcher = stream.watcher
        watcher.attach_writer(None)
        with self.ledger.lock:
            conn.handling = True
            conn.streaming = False
        if done is not None:
            done()
        with self._lock:
            self._streams.discard(watcher)
        stream.cleanup()  # detaches: nothing more can be queued after this
        left = len(watcher.drain())
        with self.ledger.lock:
            conn.queued -= left
            if conn.queued == 0:  # what was owed and never written will never come
                conn.queued_bytes = 0

    def _write_direct(self, conn: Connection, data: bytes) -> bytes:
        """Send a framed watch event from the thread that committed it (store lock held):
        counted as written, then sent without blocking. Returns what the socket did not
        take, for the stream's thread to send first."""
        with self.ledger.lock:
            conn.written += len(data)
        try:
            sent = conn.sock.send(data, _DONTWAIT)
        except BlockingIOError:
            sent = 0
        except OSError:
            return b""  # the client went away: the stream's thread notices and winds up
        return data[sent:]

    def _client_gone(self, wire: _Wire) -> bool:
        """Poll the socket without blocking: EOF means the client went away; bytes are
        fed to h11 (a pipelined request, read once the watch is over) and mean it is
        still there."""
        data = _poll_recv(wire.sock)
        if data is None:
            return False
        if not data:
            return True
        if len(wire.h.trailing_data[0]) + len(data) > MAX_HEAD + MAX_BODY:
            return True  # a client piling up requests behind a watch: not a client
        wire.feed(data)
        return False


def _tls_hello(sock: socket.socket) -> bool:
    """The client's first byte opens a TLS handshake record (0x16), not an HTTP method."""
    try:
        first = sock.recv(1, socket.MSG_PEEK)
    except OSError:
        return False
    return first == b"\x16"


def _poll_recv(sock: socket.socket) -> bytes | None:
    """What the client sent, without blocking: None if nothing, b"" at EOF (or a broken
    connection)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return b""
    if not readable and not (isinstance(sock, ssl.SSLSocket) and sock.pending()):
        return None
    sock.settimeout(0)
    try:
        return sock.recv(65536)
    except (BlockingIOError, ssl.SSLWantReadError):
        return None
    except OSError:
        return b""
    finally:
        with contextlib.suppress(OSError):
            sock.settimeout(None)


def _linger(sock: socket.socket) -> None:
    """Close gently after refusing a request whose bytes were not all read: closing with
    unread data makes the kernel reset the connection, and the client would lose the
    answer. Stop sending, then read and drop what still comes (bounded in time and
    size, as Go's server does)."""
    with contextlib.suppress(OSError, ssl.SSLError, ValueError):
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(LINGER_S)
        left = LINGER_BYTES
        while left > 0 and (data := sock.recv(65536)):
            left -= len(data)


def _status_body(status: int, message: str) -> bytes:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": {
            413: "RequestEntityTooLarge",
            431: "RequestHeaderFieldsTooLarge",
            500: "InternalError",
        }.get(status, "BadRequest"),
        "code": status,
    }
    return json.dumps(body).encode()


def _plain_error(status: int, message: str) -> Response:
    return Response(status, _status_body(status, message))


def _too_large() -> Response:
    return _plain_error(413, f"Request entity too large: limit is {MAX_BODY}")


def _raw_response(resp: Response) -> bytes:
    """A response framed by hand, for when h11 will not (the request never parsed)."""
    return (
        _status_line(resp.status)
        + f"Content-Type: {resp.content_type}\r\nContent-Length: {len(resp.body)}\r\n".encode()
        + b"Connection: close\r\n\r\n"
        + resp.body
    )
