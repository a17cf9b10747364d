"""The facade frames ordinary responses by hand from head templates (``server._head``):
the bytes, and whether the connection is kept, must be h11's own for every request shape
— pinned against ``_encode_h11`` (h11 framing the same response) on a twin connection."""

from __future__ import annotations

import h11
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.facade import server
from broker.facade.server import _REASONS, HttpServer, Ledger, Response, _Wire


class _NoSocket:
    def recv(self, n: int) -> bytes:  # pragma: no cover - everything is fed beforehand
        raise AssertionError("the test feeds every byte")


def _server() -> HttpServer:
    srv = HttpServer(lambda request: Response(200, b""), Ledger())
    srv._listener.close()  # never started: only its framing is used
    return srv


def _read(wire: _Wire) -> None:
    """Take one request off ``wire`` as the request loop does (its method noted)."""
    wire.begin_request()
    event = wire.h.next_event()
    assert isinstance(event, h11.Request)
    wire.method = event.method.decode()
    while not isinstance(event, h11.EndOfMessage | type(h11.NEED_DATA)):
        event = wire.h.next_event()


def _request(method: str, version: str, connection: str | None, body: bytes) -> bytes:
    head = f"{method} /api/v1/namespaces/default/pods/p/binding HTTP/{version}\r\nHost: x\r\n"
    if connection is not None:
        head += f"Connection: {connection}\r\n"
    if body:
        head += f"Content-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


def _outcome(encode: object, wire: _Wire, resp: Response) -> bytes | str:
    """The bytes, or the refusal h11 raised (a body on a 204, say)."""
    try:
        return encode(wire, resp)  # type: ignore[operator]
    except h11.LocalProtocolError as exc:
        return f"refused: {exc}"


_value = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789 ;=/,.", max_size=20).map(str.strip)


@settings(max_examples=300, deadline=None)
@given(
    method=st.sampled_from(["GET", "POST", "HEAD", "PUT", "DELETE"]),
    version=st.sampled_from(["1.1", "1.0"]),
    connection=st.sampled_from([None, "close", "keep-alive", "Keep-Alive, close", "upgrade"]),
    status=st.sampled_from([*_REASONS, 299, 204, 304]),
    content_type=st.sampled_from(["application/json", "text/plain; charset=utf-8"]),
    extra=st.lists(
        st.tuples(
            st.sampled_from(["Warning", "Audit-Id", "Location", "Connection", "X-" + "a" * 3]),
            _value,
        ),
        max_size=2,
    ),
    body=st.binary(max_size=40),
    request_body=st.sampled_from([b"", b'{"kind":"Binding"}']),
    body_read=st.booleans(),
    pipelined=st.booleans(),
)
def test_hand_framing_is_h11s(
    method: str,
    version: str,
    connection: str | None,
    status: int,
    content_type: str,
    extra: list[tuple[str, str]],
    body: bytes,
    request_body: bytes,
    body_read: bool,
    pipelined: bool,
) -> None:
    srv = _server()
    resp = Response(status, body, content_type, extra)
    raw = _request(method, version, connection, request_body)
    if not body_read and request_body:
        raw = raw[: -len(request_body)]  # refused before its body: h11 is left waiting
        pipelined = False  # (what follows would be taken for the body)
    follow = _request("GET", "1.1", None, b"") if pipelined else b""
    ours, theirs = _Wire(_NoSocket()), _Wire(_NoSocket())  # type: ignore[arg-type]
    for wire in (ours, theirs):
        wire.feed(raw + follow)
        wire.drained = False
        _read(wire)
    assert _outcome(srv._encode, ours, resp) == _outcome(srv._encode_h11, theirs, resp)
    assert ours.reusable() == theirs.reusable()
    if ours.reusable():  # the next request on the kept connection reads the same
        for wire in (ours, theirs):
            wire.next_cycle()
            assert wire.drained == (not pipelined)
        if pipelined:
            for wire in (ours, theirs):
                _read(wire)
            again = Response(200, b"{}")
            assert srv._encode(ours, again) == srv._encode_h11(theirs, again)
            assert ours.reusable() and theirs.reusable()


def test_common_responses_are_framed_by_hand() -> None:
    """The point of it: a kept-alive JSON answer does not go through h11's send (which
    validates every header twice per response)."""
    srv = _server()
    wire = _Wire(_NoSocket())  # type: ignore[arg-type]
    wire.feed(_request("POST", "1.1", None, b"{}"))
    wire.drained = False
    _read(wire)
    data = srv._encode(wire, Response(201, b'{"kind":"Status"}'))
    assert wire.by_hand and wire.h.our_state is h11.SEND_RESPONSE
    assert data.startswith(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n")
    assert data.endswith(
        b'\r\nContent-Length: 17\r\nCache-Control: no-cache, private\r\n\r\n{"kind":"Status"}'
    )
    assert wire.reusable()


def test_a_header_h11_refuses_is_refused_by_hand_too() -> None:
    srv = _server()
    wire = _Wire(_NoSocket())  # type: ignore[arg-type]
    wire.feed(_request("GET", "1.1", None, b""))
    wire.drained = False
    _read(wire)
    bad = Response(200, b"", extra_headers=[("Warning", "a\r\nSet-Cookie: x")])
    try:
        srv._encode(wire, bad)
    except h11.LocalProtocolError:
        pass
    else:
        raise AssertionError("a header with CR LF was framed")
    assert len(server._HEADS) <= server._HEADS_MAX


@settings(max_examples=200, deadline=None)
@given(frame=st.binary(min_size=1, max_size=5000))
def test_watch_chunks_are_h11s_and_sized_exactly(frame: bytes) -> None:
    """A watch event's chunk is what h11 writes for the same data, and the ledger's
    ``framed_size`` (what the client is owed) is its exact length."""
    h = h11.Connection(h11.SERVER)
    h.receive_data(b"GET /api/v1/pods?watch=1 HTTP/1.1\r\nHost: x\r\n\r\n")
    h.next_event()
    h.send(h11.Response(status_code=200, headers=[(b"Transfer-Encoding", b"chunked")]))
    assert server._chunk(frame) == h.send(h11.Data(data=frame))
    assert server.framed_size(frame, True) == len(server._chunk(frame))
    assert server.framed_size(frame, False) == len(frame)
    assert server.framed_size(server.END, True) == len(h.send(h11.EndOfMessage()))
