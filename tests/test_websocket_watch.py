"""Watches over WebSocket (issue 26, item 3), as kube-apiserver serves them with
golang.org/x/net/websocket: the handshake's answers, one text message per event (the
bytes of one line of the HTTP stream), pings answered, close frames, the virtual
timeout — and the byte ledger: a parked WebSocket watch is idle, a published event or an
unanswered ping makes it busy."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import threading

import pytest
from wsproto import ConnectionType
from wsproto.connection import Connection
from wsproto.events import CloseConnection, Message, Ping, Pong, TextMessage

from broker.facade import Facade, ManualClock
from broker.facade.objects import make_node

SPEC = {"containers": [{"name": "c", "image": "busybox"}]}
KEY = base64.b64encode(b"0123456789abcdef").decode()
# RFC 6455's accept token of KEY, computed here from its definition
ACCEPT = base64.b64encode(
    hashlib.sha1((KEY + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()
).decode()


class Client:
    """A WebSocket client on a raw socket that counts what it sends and consumes, as
    the runtime counts a scheduler's bytes."""

    def __init__(
        self, facade: Facade, path: str, behind: list | None = None, **headers: str
    ) -> None:
        self.facade = facade
        self.sock = socket.create_connection(("127.0.0.1", facade.port), timeout=10)
        self.port = self.sock.getsockname()[1]
        self.sent = self.consumed = 0
        self.ws = Connection(ConnectionType.CLIENT)
        head = {
            "Host": f"127.0.0.1:{facade.port}",
            "Authorization": f"Bearer {facade.token}",
            "Upgrade": "websocket",
            "Connection": "Upgrade",
            "Sec-WebSocket-Key": KEY,
            "Sec-WebSocket-Version": "13",
            "Origin": f"http://127.0.0.1:{facade.port}",
        }
        for name, value in headers.items():
            name = name.replace("_", "-")
            if value is None:
                head.pop(name, None)
            else:
                head[name] = value
        lines = [f"GET {path} HTTP/1.1"] + [f"{k}: {v}" for k, v in head.items()]
        self.buffer = b""
        # frames made by this client, sent in the same write as the request
        frames = b"".join(self.ws.send(event) for event in behind or [])
        self.send(("\r\n".join(lines) + "\r\n\r\n").encode() + frames)

    def send(self, data: bytes) -> None:
        self.sent += len(data)
        self.sock.sendall(data)

    def read_head(self) -> tuple[str, dict[str, str], bytes]:
        while b"\r\n\r\n" not in self.buffer:
            data = self.sock.recv(65536)
            if not data:
                break
            self.consumed += len(data)
            self.buffer += data
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        status, *lines = head.decode().split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines)
        self.buffer = b""
        self.ws.receive_data(rest)
        return status, headers, rest

    def event(self):
        """The next WebSocket event the server sent (None at EOF)."""
        while True:
            for event in self.ws.events():
                return event
            data = self.sock.recv(65536)
            if not data:
                return None
            self.consumed += len(data)
            self.ws.receive_data(data)

    def idle(self) -> bool:
        return self.facade.connection_idle(self.port, self.sent, self.consumed)


@pytest.fixture(params=[False, True], ids=["stream-thread", "direct-writes"])
def facade(request):
    f = Facade(ManualClock())
    if request.param:
        f.write_watch_events_directly()
    f.store.create("nodes", make_node("n1"))
    f.token = f.add_token("ws")
    with f:
        yield f


def _wait_idle(client: Client) -> bool:
    """Wait (bounded) on the facade's idle notifications until the ledger calls the
    client's connection idle with its own counts."""
    woke = threading.Event()
    client.facade.add_idle_listener(lambda port: woke.set())
    for _ in range(400):  # ~20 s at most on a loaded machine
        if client.idle():
            return True
        woke.wait(0.05)
        woke.clear()
    return client.idle()


@pytest.mark.parametrize(
    "headers, status, extra",
    [
        ({}, "HTTP/1.1 101 Switching Protocols", None),
        ({"Sec-WebSocket-Protocol": "v4.channel.k8s.io"}, "HTTP/1.1 101 Switching Protocols", "v4.channel.k8s.io"),
        ({"Sec-WebSocket-Protocol": "base64.channel.k8s.io"}, "HTTP/1.1 101 Switching Protocols", "base64.channel.k8s.io"),
        ({"Sec-WebSocket-Protocol": "v4.base64.channel.k8s.io"}, "HTTP/1.1 101 Switching Protocols", "v4.base64.channel.k8s.io"),
        ({"Sec-WebSocket-Protocol": "v4.channel.k8s.io, base64.channel.k8s.io"}, "HTTP/1.1 400 Bad Request", ""),
        ({"Origin": None}, "HTTP/1.1 403 Forbidden", ""),
        ({"Sec-WebSocket-Version": "8"}, "HTTP/1.1 400 Bad Request", "missing or bad WebSocket Version"),
        ({"Sec-WebSocket-Key": None}, "HTTP/1.1 400 Bad Request", "mismatch challenge/response"),
    ],
    ids=["plain", "v4", "base64", "v4.base64", "two-protocols", "no-origin", "version-8", "no-key"],
)  # fmt: skip
def test_the_handshake_answers_as_the_api_server(facade, headers, status, extra):
    client = Client(facade, "/api/v1/nodes?watch=true", **headers)
    got, answer, rest = client.read_head()
    assert got == status
    if status.startswith("HTTP/1.1 101"):
        assert answer["Upgrade"] == "websocket" and answer["Connection"] == "Upgrade"
        assert answer["Sec-WebSocket-Accept"] == ACCEPT
        assert answer.get("Sec-WebSocket-Protocol") == extra
        # the channel protocols change nothing for a watch: a JSON text message
        event = client.event()
        assert isinstance(event, TextMessage)
        assert json.loads(event.data)["object"]["metadata"]["name"] == "n1"
    else:  # refused: x/net's raw answer (status, blank line, its error), then closed
        body = rest + b"".join(iter(lambda: client.sock.recv(65536), b""))
        assert body.decode() == extra
        assert answer == ({"Sec-WebSocket-Version": "13"} if "Version" in extra else {})


def test_each_event_is_one_text_message_and_a_parked_websocket_watch_is_idle(facade):
    http = socket.create_connection(("127.0.0.1", facade.port), timeout=10)
    client = Client(facade, "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=60")
    assert client.read_head()[0] == "HTTP/1.1 101 Switching Protocols"
    assert _wait_idle(client), "the watch never parked"
    for i in range(2):
        before = (client.sent, client.consumed)
        facade.store.create(
            "pods", {"metadata": {"name": f"p{i}"}, "spec": SPEC}, namespace="default"
        )
        assert not facade.connection_idle(client.port, *before)
        event = client.event()
        assert isinstance(event, TextMessage) and event.message_finished
        # the bytes of one line of the HTTP watch stream, newline included
        assert event.data.endswith("}\n") and event.data.count("\n") == 1
        assert json.loads(event.data)["type"] == "ADDED"
        assert json.loads(event.data)["object"]["metadata"]["name"] == f"p{i}"
        assert _wait_idle(client)
    # a ping is owed its pong: busy until the pong is read
    client.send(client.ws.send(Ping(payload=b"tw")))
    assert not client.idle()
    assert client.event() == Pong(payload=b"tw")
    assert _wait_idle(client)
    # the virtual timeout ends the watch with a close frame (1000), then the connection
    facade.clock.advance(59 * 10**9)
    assert _wait_idle(client)
    facade.clock.advance(1 * 10**9)
    closing = client.event()
    assert isinstance(closing, CloseConnection) and closing.code == 1000
    assert client.event() is None
    assert _wait_idle(client)
    assert facade.token_stats("ws").watches == 0
    http.close()


def test_a_close_from_the_client_ends_the_watch_with_a_close_frame(facade):
    client = Client(facade, "/api/v1/nodes?watch=true")
    client.read_head()
    assert isinstance(client.event(), TextMessage)
    client.send(client.ws.send(CloseConnection(code=1001, reason="bye")))
    closing = client.event()
    assert isinstance(closing, CloseConnection) and closing.code == 1000
    assert client.event() is None
    assert _wait_idle(client)
    assert facade.token_stats("ws").watches == 0


def test_a_v1_hpa_watch_over_websocket_speaks_v1(facade):
    client = Client(facade, "/apis/autoscaling/v1/horizontalpodautoscalers?watch=1")
    client.read_head()
    hpa = {
        "metadata": {"name": "web"},
        "spec": {"maxReplicas": 3, "scaleTargetRef": {"kind": "Deployment", "name": "web"}},
    }
    facade.store.create("horizontalpodautoscalers.autoscaling", hpa, namespace="default")
    event = json.loads(client.event().data)
    assert event["object"]["apiVersion"] == "autoscaling/v1"
    assert event["object"]["spec"]["maxReplicas"] == 3
    client.send(client.ws.send(Message(data="ignored")))  # read and dropped
    client.send(client.ws.send(CloseConnection(code=1000)))
    assert isinstance(client.event(), CloseConnection)


def test_frames_sent_right_behind_the_request_are_answered_after_the_initial_events(facade):
    """A client that pings in the same write as its handshake: the ping (buffered behind
    the request) is taken in and answered once the initial events are out."""
    client = Client(facade, "/api/v1/nodes?watch=true", behind=[Ping(payload=b"early")])
    assert client.read_head()[0] == "HTTP/1.1 101 Switching Protocols"
    first = client.event()
    assert isinstance(first, TextMessage) and '"name":"n1"' in first.data
    assert client.event() == Pong(payload=b"early")
    assert _wait_idle(client)
