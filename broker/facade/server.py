"""HTTP/1.1 transport with an exact byte ledger per connection.

Why not ``http.server``: the broker must know, per TCP connection, how many request
bytes were taken in and how many response bytes were handed to the kernel, to decide
whether the client thread blocked on that socket has consumed everything (see
``Ledger.idle``). Each response is one ``sendall`` (head + body), each watch event one
chunk in one ``sendall``, and sockets have TCP_NODELAY: no 40 ms delayed-ACK stalls.

Ledger rules (the broker's quiescence test depends on them):
- ``received`` grows by a request's head+body size when it is completely read, in the
  same locked step that sets ``handling``;
- ``written`` grows *before* the bytes are passed to ``sendall``;
- ``queued`` counts frames a watch will still deliver; it is incremented by the thread
  that published the event (inside the store call), and turned into ``written`` in one
  locked step by the connection thread;
- listeners are called after a response is written, after a watch frame is written with
  nothing else queued, and when a watch parks;
- a response *held* back until a virtual deadline (modelled API latency, see
  ``broker/pacing.py``) leaves the connection ``held``: not handling, nothing owed yet —
  quiescent, like a sleep — until the deadline's callback marks it handling again, in
  the broker's thread, before the response is written.
"""

from __future__ import annotations

import contextlib
import json
import logging
import select
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .watch import END, Watcher

_log = logging.getLogger(__name__)
MAX_HEAD = 64 * 1024
MAX_BODY = 64 * 1024 * 1024
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
    413: "Payload Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    505: "HTTP Version Not Supported",
}


@dataclass
class Request:
    method: str
    target: str  # raw request target (path?query), not decoded
    headers: dict[str, str]  # lower-case names; repeated headers joined with ", "
    body: bytes
    peer_port: int
    on_queued: Callable[[], None]


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


class Connection:
    __slots__ = (
        "peer_port",
        "received",
        "written",
        "handling",
        "queued",
        "streaming",
        "sock",
        "closed",
        "last_request",
        "held",
    )

    def __init__(self, peer_port: int, sock: socket.socket) -> None:
        self.peer_port = peer_port
        self.sock = sock
        self.received = 0
        self.written = 0
        self.handling = False
        self.queued = 0
        self.streaming = False  # the request being answered is a watch
        self.closed = False
        self.last_request = ""  # "GET /api/v1/pods?watch=1", for stall diagnostics
        self.held = False  # a response held back until a virtual deadline (Hold)


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
            self._conns[conn.peer_port] = conn

    def unregister(self, conn: Connection) -> None:
        with self.lock:
            conn.closed = True
            if self._conns.get(conn.peer_port) is conn:
                del self._conns[conn.peer_port]

    def idle(self, peer_port: int, sent: int, consumed: int) -> bool:
        """True iff the connection from ``peer_port`` has taken in exactly ``sent`` bytes,
        written exactly ``consumed`` bytes, handles no request and has nothing queued.
        An unknown port is idle only if nothing was exchanged on it."""
        with self.lock:
            conn = self._conns.get(peer_port)
            if conn is None:
                return sent == 0 and consumed == 0
            return (
                conn.received == sent
                and conn.written == consumed
                and not conn.handling
                and conn.queued == 0
            )

    def state(self, peer_port: int, sent: int, consumed: int) -> str:
        """``"idle"`` (parked: nothing owed either way), ``"busy"`` (a request not yet fully
        read, or being handled), ``"flushing"`` (nothing being handled, watch events
        queued that the connection's thread has not written yet: it is about to, unless
        it is stuck writing because the client does not read) or ``"ready"`` (nothing
        being handled or queued, and bytes written that the client has not consumed) —
        ``"streaming"`` when those bytes are watch events rather than a response."""
        with self.lock:
            conn = self._conns.get(peer_port)
            if conn is None:
                return "idle" if sent == 0 and consumed == 0 else "busy"
            if conn.received != sent or conn.handling:
                return "busy"
            if conn.held:
                return "held"
            if conn.queued:
                return "flushing"
            if conn.written == consumed:
                return "idle"
            return "streaming" if conn.streaming else "ready"

    def written(self, peer_port: int) -> int:
        with self.lock:
            conn = self._conns.get(peer_port)
            return 0 if conn is None else conn.written

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
                    "held": c.held,
                    "last_request": c.last_request,
                }
                for p, c in self._conns.items()
            }


def _chunk(frame: bytes) -> bytes:
    return f"{len(frame):x}\r\n".encode() + frame + b"\r\n"


_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)


def _status_line(status: int) -> bytes:
    return f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}\r\n".encode()


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
        poll_interval: float = 0.5,
        on_request: Callable[[Request], Callable[[], None] | None] | None = None,
    ) -> None:
        self._handler = handler
        self.ledger = ledger
        self._ssl = ssl_context
        self._poll = poll_interval
        self._on_request = on_request
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
        # Watch events written by the thread that commits them (deterministic mode, where
        # the broker waits for them before letting a scheduler read): no hop through the
        # stream's thread. Plain sockets only (a TLS record cannot be sent half-way).
        self.direct_watch_writes = False
        # API latency (broker/pacing.py): a Hold for a response to keep back, or None
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
        while not self._stopping.is_set():
            try:
                sock, addr = self._listener.accept()
            except OSError:
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            t = threading.Thread(
                target=self._serve, args=(sock, addr[1]), name=f"facade-conn-{addr[1]}", daemon=True
            )
            with self._lock:
                self._threads.add(t)
            t.start()

    # --- one connection ------------------------------------------------------------

    def _serve(self, raw: socket.socket, peer_port: int) -> None:
        conn = Connection(peer_port, raw)
        self.ledger.register(conn)
        with self._lock:
            self._conns.add(conn)
        try:
            sock: socket.socket = raw
            if self._ssl is not None:
                sock = self._ssl.wrap_socket(raw, server_side=True)
                conn.sock = sock
            self._request_loop(conn, sock)
        except (OSError, ssl.SSLError):
            pass
        finally:
            self.ledger.unregister(conn)
            with contextlib.suppress(OSError):
                conn.sock.close()
            with self._lock:
                self._conns.discard(conn)
                self._threads.discard(threading.current_thread())
            self.ledger.notify(peer_port)

    def _request_loop(self, conn: Connection, sock: socket.socket) -> None:
        buf = bytearray()
        while not self._stopping.is_set():
            parsed = self._read_request(conn, sock, buf)
            if parsed is None:
                return
            request, keep_alive = parsed
            if isinstance(request, Response):  # malformed: answer and close
                self._write(conn, self._encode(request, close=True))
                self._finish_request(conn)
                return
            done = self._on_request(request) if self._on_request else None
            try:
                result = self._handler(request)
            except Exception as exc:  # a bug must not kill the connection silently
                _log.exception("facade: internal error on %s %s", request.method, request.target)
                result = _plain_error(500, f"internal error: {type(exc).__name__}: {exc}")
            try:
                if isinstance(result, WatchStream):
                    keep_alive = self._stream(conn, sock, result, buf, done) and keep_alive
                    done = None
                else:
                    hold = self.hold_response(request) if self.hold_response else None
                    if hold is not None:
                        self._hold(conn, hold)
                    self._write(conn, self._encode(result, close=not keep_alive), last=True)
            finally:
                if done is not None:
                    done()
            self._finish_request(conn)
            if not keep_alive:
                return

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

    def _fill(self, sock: socket.socket, buf: bytearray) -> bool:
        data = sock.recv(65536)
        if not data:
            return False
        buf += data
        return True

    def _read_request(
        self, conn: Connection, sock: socket.socket, buf: bytearray
    ) -> tuple[Request | Response, bool] | None:
        while True:
            end = buf.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(buf) > MAX_HEAD:
                return _plain_error(431, "request head larger than 64 KiB"), False
            if not self._fill(sock, buf):
                return None
        head = bytes(buf[:end]).decode("latin-1")
        lines = head.split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            return _plain_error(400, f"malformed request line {lines[0][:80]!r}"), False
        method, target, version = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                return _plain_error(400, f"malformed header line {line[:80]!r}"), False
            name = name.strip().lower()
            headers[name] = (
                f"{headers[name]}, {value.strip()}" if name in headers else value.strip()
            )
        consumed = end + 4
        body = b""
        if "chunked" in headers.get("transfer-encoding", "").lower():
            pos = consumed
            chunks = []
            while True:
                while (line_end := buf.find(b"\r\n", pos)) < 0:
                    if not self._fill(sock, buf):
                        return None
                try:
                    size = int(bytes(buf[pos:line_end]).split(b";")[0], 16)
                except ValueError:
                    return _plain_error(400, "malformed chunk size in request body"), False
                if sum(map(len, chunks)) + size > MAX_BODY:
                    return _plain_error(413, "request body larger than 64 MiB"), False
                need = line_end + 2 + size + 2
                while len(buf) < need:
                    if not self._fill(sock, buf):
                        return None
                chunks.append(bytes(buf[line_end + 2 : line_end + 2 + size]))
                pos = need
                if size == 0:
                    break
            body = b"".join(chunks)
            consumed = pos
        else:
            try:
                length = int(headers.get("content-length", "0") or 0)
            except ValueError:
                return _plain_error(400, "Content-Length is not an integer"), False
            if length < 0 or length > MAX_BODY:
                return _plain_error(413, "request body larger than 64 MiB"), False
            while len(buf) < consumed + length:
                if not self._fill(sock, buf):
                    return None
            body = bytes(buf[consumed : consumed + length])
            consumed += length
        del buf[:consumed]
        with self.ledger.lock:
            conn.received += consumed
            conn.handling = True
            conn.last_request = f"{method} {target}"
        connection = headers.get("connection", "").lower()
        keep_alive = version == "HTTP/1.1" and "close" not in connection
        keep_alive = keep_alive or (version == "HTTP/1.0" and "keep-alive" in connection)
        request = Request(method, target, headers, body, conn.peer_port, lambda: self._queued(conn))
        return request, keep_alive

    def _queued(self, conn: Connection) -> None:
        with self.ledger.lock:
            conn.queued += 1

    def _encode(self, resp: Response, *, close: bool) -> bytes:
        head = [
            _status_line(resp.status),
            f"Content-Type: {resp.content_type}\r\n".encode(),
            f"Content-Length: {len(resp.body)}\r\n".encode(),
            b"Cache-Control: no-cache, private\r\n",
        ]
        for name, value in resp.extra_headers:
            head.append(f"{name}: {value}\r\n".encode())
        if close:
            head.append(b"Connection: close\r\n")
        head.append(b"\r\n")
        return b"".join(head) + resp.body

    def _write(
        self,
        conn: Connection,
        data: bytes,
        *,
        from_queue: int = 0,
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
        sock: socket.socket,
        stream: WatchStream,
        buf: bytearray,
        done: Callable[[], None] | None,
    ) -> bool:
        """Write a chunked watch response; True if the connection may be reused."""
        watcher = stream.watcher
        with self._lock:
            self._streams.add(watcher)
        with self.ledger.lock:
            conn.streaming = True
        try:
            self._write(
                conn,
                _status_line(200)
                + b"Content-Type: application/json\r\nCache-Control: no-cache, private\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n",
            )
            parked = False
            while True:
                if not parked and watcher.pending() == 0:
                    # Initial events written: the request now waits for changes ("parked").
                    with self.ledger.lock:
                        conn.handling = False
                    parked = True
                    if done is not None:
                        done()
                        done = None
                    if stream.on_parked is not None:
                        stream.on_parked()
                    if self.direct_watch_writes and self._ssl is None and _DONTWAIT:
                        watcher.attach_writer(lambda frame: self._write_direct(conn, frame))
                    self.ledger.notify(conn.peer_port)
                batch = watcher.take_batch(self._poll)
                if batch is None:
                    if self._stopping.is_set() or self._client_gone(sock, buf):
                        return False
                    continue
                backlog, frames = batch
                try:
                    # everything queued in one write: a client let go to read finds it all
                    ending = bool(frames) and frames[-1] is END
                    if ending:
                        frames.pop()
                    data = backlog + b"".join(_chunk(f) for f in frames)
                    taken = len(frames) + (1 if backlog else 0)
                    if ending:
                        self._write(
                            conn,
                            data + b"0\r\n\r\n",
                            from_queue=taken + 1,
                            ending=True,
                            counted=len(backlog),
                        )
                        return True
                    self._write(conn, data, from_queue=taken, counted=len(backlog))
                finally:
                    watcher.sent()
                if parked:
                    with self.ledger.lock:
                        idle_now = conn.queued == 0
                    if idle_now:
                        self.ledger.notify(conn.peer_port)
        except OSError:
            return False
        finally:
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

    def _write_direct(self, conn: Connection, frame: bytes) -> bytes:
        """Send a watch frame from the thread that committed it (store lock held):
        counted as written, then sent without blocking. Returns what the socket did not
        take, for the stream's thread to send first."""
        data = _chunk(frame)
        with self.ledger.lock:
            conn.written += len(data)
        try:
            sent = conn.sock.send(data, _DONTWAIT)
        except BlockingIOError:
            sent = 0
        except OSError:
            return b""  # the client went away: the stream's thread notices and winds up
        return data[sent:]

    def _client_gone(self, sock: socket.socket, buf: bytearray) -> bool:
        """Poll the socket without blocking: EOF means the client went away; bytes are
        kept in ``buf`` (a pipelined request) and mean it is still there."""
        try:
            readable, _, _ = select.select([sock], [], [], 0)
        except (OSError, ValueError):
            return True
        if not readable and not (isinstance(sock, ssl.SSLSocket) and sock.pending()):
            return False
        sock.settimeout(0)
        try:
            data = sock.recv(65536)
        except (BlockingIOError, ssl.SSLWantReadError):
            return False
        except OSError:
            return True
        finally:
            with contextlib.suppress(OSError):
                sock.settimeout(None)
        if not data:
            return True
        buf += data
        return False


def _plain_error(status: int, message: str) -> Response:
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
    return Response(status, json.dumps(body).encode())
