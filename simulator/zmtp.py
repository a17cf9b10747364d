"""A ZeroMQ REQ socket in plain Python: ZMTP 3.0 (NULL security) over one TCP or
Unix-domain connection, for the simulator's side of Batsim's protocol.

Why not libzmq here: libzmq moves every message through an I/O thread of its own, so each
round trip with the decision process wakes two more threads on the simulator's side (the
I/O thread on send and on receive, then the caller on the I/O thread's signal); on two
CPUs each wake-up can cross CPUs. A plain socket has the caller wait in its own
``recv``: half the CPU per round trip of a libzmq REQ socket, measured against the
same libzmq REP peer (docs/benchmarks.md, "timewarp sim: the wire without libzmq").

What a REQ socket does that Batsim's protocol needs: one request, then one reply, each a
single frame after REQ's empty delimiter frame. The peer is any ZMTP 3.x REP socket
(libzmq, pyzmq); a peer that is not yet listening is retried as libzmq retries (the caller
decides how long); the peer closing the connection is :class:`PeerClosed`."""

from __future__ import annotations

import math
import socket
import struct

from simulator.protocol import ProtocolError

SCHEMES = ("tcp://", "ipc://")
_GREETING = b"\xff" + b"\0" * 8 + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\0") + b"\0" * 32
_READY_BODY = b"\x05READY\x0bSocket-Type" + struct.pack(">I", 3) + b"REQ"
_READY = b"\x04" + bytes([len(_READY_BODY)]) + _READY_BODY
_MORE, _LONG, _COMMAND = 1, 2, 4
_LONG_SIZE = struct.Struct(">Q")
_TIMEVAL = struct.Struct("@ll")  # SO_RCVTIMEO's struct timeval (Linux: two longs)


def _timeval(wait: float | None) -> bytes:
    """``wait`` seconds as SO_RCVTIMEO's value; None: no limit (a zero timeval). A wait
    that rounds to zero microseconds becomes one: zero would mean no limit; an infinite
    one is no limit."""
    if wait is None or not wait < math.inf:
        return _TIMEVAL.pack(0, 0)
    micros = max(1, round(wait * 1_000_000))
    return _TIMEVAL.pack(micros // 1_000_000, micros % 1_000_000)


class PeerClosed(ConnectionError):
    """The peer closed the connection (or reset it)."""


class ZmtpError(ProtocolError):
    """The peer does not speak ZMTP 3 with NULL security, or sent an ERROR command."""


class NotZeroMQ(ZmtpError):
    """What listens at the endpoint is no ZeroMQ peer at all (a wrong port: a usage
    error, said before any message)."""


def _tcp(sock: socket.socket, host: str, port: int, timeout: float) -> socket.socket:
    """``sock`` connected to ``host:port`` (a name: its first address that answers)."""
    try:
        socket.inet_pton(sock.family, host)
    except OSError:  # a name, or an IPv6 address: let the resolver pick the family
        sock.close()
        return socket.create_connection((host, port), timeout=timeout)
    sock.connect((host, port))
    return sock


def _check_greeting(greeting: bytes | bytearray) -> None:
    if greeting[0] != 0xFF or not greeting[9] & 1 or greeting[10] < 3:
        raise ZmtpError("the peer does not speak ZMTP 3 (a ZeroMQ 4 REP socket)")
    if bytes(greeting[12:32]).rstrip(b"\0") != b"NULL":
        raise ZmtpError("the peer asks for a security mechanism other than NULL")


def address(endpoint: str) -> tuple[int, object] | None:
    """``(family, address)`` to connect to for ``endpoint``; None for what this module
    does not handle (other transports, libzmq's source-address syntax)."""
    if endpoint.startswith("ipc://"):
        path = endpoint[len("ipc://") :]
        if not path or path == "*":
            return None
        return socket.AF_UNIX, "\0" + path[1:] if path.startswith("@") else path
    if not endpoint.startswith("tcp://"):
        return None
    host, _, port = endpoint[len("tcp://") :].rpartition(":")
    if ";" in host or not host or not port.isdigit():
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return socket.AF_INET, (host, int(port))


def whole_reply(data: bytes) -> bytes | None:
    """The reply's frame if ``data`` is exactly one reply, as a REP socket sends it
    (the empty delimiter, then one last frame, short or long): what :meth:`ReqSocket._parse`
    returns for it, without the buffer. None for anything else (a part, more than one,
    a command), which the buffer's way reads."""
    size = len(data)
    if size < 4 or data[0] != _MORE or data[1] != 0:
        return None
    flags = data[2]
    if flags == 0:
        return data[4:] if data[3] == size - 4 else None
    if flags == _LONG and size >= 11 and _LONG_SIZE.unpack_from(data, 3)[0] == size - 11:
        return data[11:]
    return None


class ReqSocket:
    """One connection to a REP peer. :meth:`connect` (raises ``OSError`` while nobody
    listens), then :meth:`send` a request and :meth:`recv` its reply (None when ``wait``
    seconds passed first; call again to go on waiting)."""

    def __init__(self, endpoint: str) -> None:
        target = address(endpoint)
        if target is None:
            raise ValueError(f"not a tcp:// or ipc:// endpoint this client handles: {endpoint}")
        self.family, self.target = target
        self.endpoint = endpoint
        self.sock: socket.socket | None = None
        self._buffer = bytearray()
        self._rcvtimeo: float | None = None  # the receive timeout the socket has now

    @property
    def connected(self) -> bool:
        return self.sock is not None

    def connect(self, timeout: float) -> None:
        """Open the connection and greet the peer (``timeout``: for each of these steps).
        ``OSError`` (refused, no such file, timed out) if nobody answers. The peer's greeting
        is read before READY is sent: libzmq 4.3 drops a connection whose greeting and
        READY arrive in one read."""
        if self.family == socket.AF_UNIX:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        else:
            sock = socket.socket(self.family, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            if self.family == socket.AF_UNIX:
                sock.connect(self.target)
            else:
                host, port = self.target  # type: ignore[misc]
                sock = _tcp(sock, host, port, timeout)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as libzmq does
            sock.sendall(_GREETING)
            buffer = bytearray()
            while len(buffer) < 64:
                data = sock.recv(4096)
                if data[:1] and not buffer and data[0] != 0xFF:
                    # not a ZeroMQ peer (its greeting's first byte is 0xFF): another
                    # program has the port; retrying would wait for ever, said nowhere
                    raise NotZeroMQ(
                        f"{self.endpoint}: the program listening there is not a Batsim "
                        f"decision process (no ZeroMQ greeting; it said {bytes(data[:32])!r})"
                    )
                if not data:
                    raise ConnectionError("the peer closed the connection during the greeting")
                buffer += data
            _check_greeting(buffer)
            sock.sendall(_READY)
        except BaseException:
            sock.close()
            raise
        del buffer[:64]
        self._buffer = buffer  # the peer's READY may be there already
        sock.settimeout(None)
        self._rcvtimeo = None
        self.sock = sock

    def send(self, data: bytes) -> None:
        """One request: REQ's empty delimiter frame, then ``data`` in one frame."""
        assert self.sock is not None
        size = len(data)
        head = b"\x01\x00" + (bytes((0, size)) if size < 256 else b"\x02" + _LONG_SIZE.pack(size))
        try:
            self.sock.sendall(head + data)
        except OSError as exc:  # reset, broken pipe
            raise PeerClosed(str(exc)) from exc

    def recv(self, wait: float | None) -> bytes | None:
        """The reply's frame, or None when ``wait`` seconds pass first (None: no limit).
        The bound is the kernel's (SO_RCVTIMEO on the blocking socket), set again only
        when ``wait`` changes: a reply that comes costs one ``recv`` system call, not a
        ``poll`` then a ``recv`` (the runner asks for the same ``POLL_S`` at every message
        so that its stop event is looked at while a reply is slow). A signal during the
        wait interrupts the ``recv``; Python runs its handler then waits again."""
        sock = self.sock
        assert sock is not None
        while True:
            if self._buffer:  # what earlier reads left (the peer's READY, a part reply)
                reply = self._parse()
                if reply is not None:
                    return reply
            if wait != self._rcvtimeo:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _timeval(wait))
                self._rcvtimeo = wait
            try:
                data = sock.recv(262144)
            except BlockingIOError:  # SO_RCVTIMEO passed: nothing came within ``wait``
                return None
            except OSError as exc:  # reset
                raise PeerClosed(str(exc)) from exc
            if not data:
                raise PeerClosed("the peer closed the connection")
            if not self._buffer:
                reply = whole_reply(data)
                if reply is not None:
                    return reply
            self._buffer += data

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _parse(self) -> bytes | None:
        """A whole reply from the buffer (consumed), or None if it is not all there."""
        buffer = self._buffer
        frames: list[bytes] = []
        at = 0
        end = len(buffer)
        while True:
            if at + 2 > end:
                return None
            flags = buffer[at]
            if flags & _LONG:
                if at + 9 > end:
                    return None
                (size,) = _LONG_SIZE.unpack_from(buffer, at + 1)
                at += 9
            else:
                size = buffer[at + 1]
                at += 2
            if at + size > end:
                return None
            body = bytes(buffer[at : at + size])
            at += size
            if flags & _COMMAND:
                if body[:6] == b"\x05ERROR":
                    raise ZmtpError(f"the peer sent an ERROR: {body[7:]!r}")
                del buffer[:at]  # READY, PING...: nothing a REQ socket answers here
                at, end = 0, len(buffer)
                continue
            frames.append(body)
            if not flags & _MORE:
                break
        del buffer[:at]
        if len(frames) != 2 or frames[0]:
            raise ZmtpError(
                f"a reply of {len(frames)} frame(s) (a REP socket sends the empty delimiter "
                "and one frame: Batsim's protocol has one-part messages)"
            )
        return frames[1]
