"""Watches over WebSocket, as kube-apiserver serves them.

A watch request (``?watch=true`` or a ``/watch/`` path) that asks for an upgrade
(``Upgrade: websocket``, ``Connection`` naming ``upgrade``: apimachinery's
``wsstream.IsWebSocketRequest``) is served by golang.org/x/net/websocket
(``apiserver/pkg/endpoints/handlers/watch.go`` ``HandleWS``), whose handshake decides:

- ``Sec-WebSocket-Version`` other than 13: 400 with ``Sec-WebSocket-Version: 13``;
  no ``Sec-WebSocket-Key``: 400; no ``Origin`` (or one that is not a URL): 403 — the
  server's ``checkOrigin`` ("null origin"), so a client must send one, as
  websocket-client does by default;
- ``Sec-WebSocket-Protocol``: one value is echoed back, whatever it is
  (``v4.channel.k8s.io``, ``base64.channel.k8s.io``, ...: for a watch the channel
  protocols change nothing); more than one is a 400 (x/net picks none);
- otherwise ``101 Switching Protocols`` and each watch event is one **text** message
  holding the JSON event and its newline (JSON encodes as text), exactly the bytes of one
  line of the HTTP stream. What the client sends is read and dropped (``IgnoreReceives``):
  a ping gets its pong, a close frame ends the watch with a close frame (1000), as does
  the end of the watch (its timeout, an error event, the server stopping).

Those refusals are written raw (status line, blank line, the error's text) and the
connection closes, as x/net does on a hijacked connection. The framing itself is
wsproto's (``Framer``); ``server.py`` owns the sockets and the byte ledger.
"""

from __future__ import annotations

import re
import threading
from urllib.parse import urlsplit

from wsproto import ConnectionType
from wsproto.connection import Connection, ConnectionState
from wsproto.events import CloseConnection, Message, Ping
from wsproto.utilities import LocalProtocolError, generate_accept_token

_UPGRADE = re.compile(r"(^|.*,\s*)upgrade($|\s*,)")
NORMAL_CLOSURE = 1000


def is_websocket_request(headers: dict[str, str]) -> bool:
    """``wsstream.IsWebSocketRequest`` on lower-case header names."""
    if headers.get("upgrade", "").lower() != "websocket":
        return False
    return bool(_UPGRADE.match(headers.get("connection", "").lower()))


def _refusal(status: int, reason: str, text: str, extra: str = "") -> bytes:
    return f"HTTP/1.1 {status} {reason}\r\n{extra}\r\n{text}".encode()


def _origin_ok(origin: str) -> bool:
    """Go's ``url.ParseRequestURI``: an absolute URL or an absolute path."""
    if origin.startswith("/"):
        return True
    parts = urlsplit(origin)
    return bool(parts.scheme) and not origin.startswith(" ")


class Control(bytes):
    """A frame already made (a pong, a close): queued on the watcher as it is."""


class Framer:
    """One upgraded connection's frames (wsproto's state machine, behind a lock: events
    are framed by the committing thread, control frames by the stream's)."""

    def __init__(self, protocol: str | None) -> None:
        self.protocol = protocol
        self._ws = Connection(ConnectionType.SERVER)
        self._lock = threading.Lock()

    def message(self, payload: bytes) -> bytes:
        """One watch event as one text message (a made frame passes as it is)."""
        if isinstance(payload, Control):
            return bytes(payload)
        with self._lock:
            return self._ws.send(Message(data=payload.decode("utf-8")))

    def can_close(self) -> bool:
        """A close frame may still be sent (:meth:`close` will not be empty)."""
        with self._lock:
            return self._ws.state in (ConnectionState.OPEN, ConnectionState.REMOTE_CLOSING)

    def close(self) -> bytes:
        """The close frame that ends the watch (nothing if one was sent already)."""
        with self._lock:
            try:
                return self._ws.send(CloseConnection(code=NORMAL_CLOSURE))
            except LocalProtocolError:
                return b""

    def receive(self, data: bytes) -> tuple[list[Control], bool]:
        """What the client sent: the frames to answer (pongs), and whether the watch is
        over (a close frame, or bytes that are not WebSocket frames)."""
        replies: list[Control] = []
        over = False
        with self._lock:
            if self._ws.state is ConnectionState.CLOSED:
                return replies, True
            self._ws.receive_data(data)
            for event in self._ws.events():
                if isinstance(event, Ping) and self._ws.state is ConnectionState.OPEN:
                    replies.append(Control(self._ws.send(event.response())))
                elif isinstance(event, CloseConnection):
                    over = True
                    if self._ws.state is ConnectionState.REMOTE_CLOSING:
                        replies.append(Control(self._ws.send(CloseConnection(code=NORMAL_CLOSURE))))
                    break
        return replies, over


CLOSE_FRAME_BYTES = 4  # a server's close frame with a status code and no reason


def framed_size(frame: bytes | None, framer: Framer | None) -> int:
    """The bytes a queued watch frame takes on an upgraded connection, as the stream
    writes it (the facade's ledger owes them to the reader before they are written):
    an event is one unmasked text message (2, 4 or 10 bytes of head), a made frame is
    itself, the end of the stream is the close frame unless one went out already; None
    (a direct write's backlog) adds nothing."""
    if frame is None:
        return 0
    if isinstance(frame, Control):
        return len(frame)
    if not frame:  # END
        return CLOSE_FRAME_BYTES if framer is None or framer.can_close() else 0
    n = len(frame)
    return n + (2 if n < 126 else 4 if n < 1 << 16 else 10)


def handshake(headers: dict[str, str]) -> tuple[bytes, Framer | None]:
    """The answer to an upgrade request (lower-case header names): the 101 head and the
    connection's framer, or a refusal (raw bytes, then the connection closes) and None."""
    key = headers.get("sec-websocket-key", "").strip()
    if not key:
        return _refusal(400, "Bad Request", "mismatch challenge/response"), None
    if headers.get("sec-websocket-version", "").strip() != "13":
        return _refusal(
            400,
            "Bad Request",
            "missing or bad WebSocket Version",
            "Sec-WebSocket-Version: 13\r\n",
        ), None
    origin = headers.get("origin", "")
    if not origin or not _origin_ok(origin):  # checkOrigin: "null origin"
        return _refusal(403, "Forbidden", ""), None
    offered = headers.get("sec-websocket-protocol", "").strip()
    protocols = [p.strip() for p in offered.split(",")] if offered else []
    if len(protocols) > 1:
        return _refusal(400, "Bad Request", ""), None
    protocol = protocols[0] if protocols else None
    head = (
        "HTTP/1.1 101 Switching Protocols\r\n"
        "Upgrade: websocket\r\n"
        "Connection: Upgrade\r\n"
        f"Sec-WebSocket-Accept: {generate_accept_token(key.encode()).decode()}\r\n"
    )
    if protocol is not None:
        head += f"Sec-WebSocket-Protocol: {protocol}\r\n"
    return (head + "\r\n").encode(), Framer(protocol)
