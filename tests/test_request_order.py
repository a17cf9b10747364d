"""Requests a process has in flight together are handled in the order it sent them: the
runtime numbers them (a header after the request line), the facade's sequencer orders
them per process (broker/facade/facade.py)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from broker.facade import sequencer as sequencer_module
from broker.facade.sequencer import RequestSequencer
from broker.facade.server import Request
from timewarp._core import netio


def request(seq: str | None) -> Request:
    headers = {} if seq is None else {"x-timewarp-seq": seq}
    return Request("GET", "/api/v1/pods", headers, b"", 1234, lambda: None)


def test_the_runtime_numbers_the_first_chunk_of_each_request():
    tagged = netio.tag_request(b"DELETE /api/v1/namespaces/d/pods/p HTTP/1.1\r\nHost: x\r\n\r\n")
    line, header, rest = tagged.split(b"\r\n", 2)
    assert line == b"DELETE /api/v1/namespaces/d/pods/p HTTP/1.1"
    name, _, value = header.partition(b": ")
    assert name == b"X-Timewarp-Seq" and value.split(b".")[1].isdigit()
    assert value.split(b".")[0].startswith(str(os.getpid()).encode() + b"-")
    assert rest == b"Host: x\r\n\r\n"
    again = netio.tag_request(bytearray(b"GET / HTTP/1.1\r\n\r\n"))
    assert int(again.split(b"\r\n")[1].split(b".")[1]) == int(value.split(b".")[1]) + 1
    assert netio.tag_request(b'{"kind": "Binding"}') is None  # a body, not a request
    assert netio.tag_request(b"GET /x HTTP/1.1") is None  # no complete request line
    # numbered once: an event loop's transport tags its write, then hands it to send()
    assert netio.tag_request(tagged) is None


def test_requests_are_handled_in_their_process_order_whatever_the_arrival():
    seq = RequestSequencer()
    handled = []
    threads = []
    for n in (3, 1, 2):  # arrival order
        key = seq.key(request(f"42-ab12cd34.{n}"))

        def handle(key=key):
            seq.wait_turn(*key)
            handled.append(key[1])
            seq.done(*key)

        threads.append(threading.Thread(target=handle))
        threads[-1].start()
    for t in threads:
        t.join(10)
    assert handled == [1, 2, 3]


def test_processes_and_unnumbered_requests_do_not_wait_for_each_other():
    seq = RequestSequencer()
    assert seq.key(request(None)) is None
    assert seq.key(request("garbage")) is None
    a, b = seq.key(request("42-00000000.1")), seq.key(request("42-ffffffff.1"))
    assert a[0] != b[0]  # a later process with the same pid numbers afresh
    seq.wait_turn(*b)
    seq.done(*b)


def test_a_request_whose_predecessor_never_comes_goes_after_a_while(monkeypatch, capsys):
    monkeypatch.setattr(sequencer_module, "GAP_TIMEOUT_S", 0.05)
    seq = RequestSequencer()
    key = seq.key(request("42-ab12cd34.2"))
    seq.wait_turn(*key)  # request 1 was lost on a broken connection
    seq.done(*key)
    assert "request 2 of process 42-ab12cd34 waited" in capsys.readouterr().err
    nxt = seq.key(request("42-ab12cd34.3"))
    seq.wait_turn(*nxt)  # in order again: no wait


# --- issue 25 item 2: every request number is closed, whatever its fate -----------------

_PROCESS = "4242-0badcafe"


def _numbered(n: int, rest: str) -> bytes:
    """A request line, the runtime's number right after it (as netio tags), then ``rest``."""
    line, _, tail = rest.partition("\r\n")
    return f"{line}\r\nX-Timewarp-Seq: {_PROCESS}.{n}\r\n{tail}".encode()


def _refusals(token: str) -> list[tuple[str, list[bytes], str]]:
    """(how, what the client sends — in pieces, how it ends: "read" the answer and
    close, "eof": half-close and wait for the server to close, "reset": RST)."""
    from broker.facade.server import MAX_BODY, MAX_HEAD

    auth = f"Authorization: Bearer {token}\r\n"
    post = "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\n"
    return [
        (
            "401, no body (keep-alive)",
            ["GET /api/v1/nodes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer no\r\n\r\n"],
            "read",
        ),
        (
            "401 with a body",
            [f"{post}Authorization: Bearer no\r\nContent-Length: 10\r\n\r\n0123456789"],
            "read",
        ),
        ("413 declared", [f"{post}{auth}Content-Length: {MAX_BODY + 1}\r\n\r\n"], "read"),
        (
            "413 chunked",
            [
                f"{post}{auth}Transfer-Encoding: chunked\r\n\r\n",
                f"{MAX_BODY + 1:x}\r\n" + "x" * (MAX_BODY + 1) + "\r\n",
            ],
            "read",
        ),
        ("400 malformed body", [f"{post}{auth}Transfer-Encoding: chunked\r\n\r\nzz\r\n"], "read"),
        (
            "431 head too large",
            [f"GET /api/v1/nodes HTTP/1.1\r\n{auth}X-Big: {'b' * (MAX_HEAD + 10)}\r\n\r\n"],
            "read",
        ),
        ("400 malformed head", ["GET /api/v1/nodes HTTP/1.1\r\nthis is no header\r\n\r\n"], "read"),
        (
            "404 from the API",
            [f"GET /api/v1/namespaces/default/pods/nope HTTP/1.1\r\nHost: x\r\n{auth}\r\n"],
            "read",
        ),
        ("closed mid-body", [f'{post}{auth}Content-Length: 100\r\n\r\n{{"kind"'], "eof"),
        ("closed mid-head", ["GET /api/v1/nodes HTTP/1.1\r\nHost: x\r\n"], "eof"),
        ("reset mid-body", [f'{post}{auth}Content-Length: 100\r\n\r\n{{"kind"'], "reset"),
    ]


def _closed_through(seq: RequestSequencer, n: int) -> bool:
    """Bounded wait until the sequencer has closed every number up to ``n``."""
    pause = threading.Event()
    for _ in range(1000):
        if seq.next_number(_PROCESS) > n:
            return True
        pause.wait(0.01)
    return False


def test_refused_requests_close_their_numbers_and_the_next_one_never_waits(facade):
    """A request refused at the head (401), 4xx, reset, too large or malformed once
    left its number open: the process's next request waited GAP_TIMEOUT_S of wall time
    for it, then went out of order."""
    import socket
    import struct

    seq = facade._sequencer
    refusals = _refusals(facade.token)
    for n, (how, pieces, end) in enumerate(refusals, 1):
        sock = socket.create_connection((facade.host, facade.port), timeout=30)
        try:
            for i, piece in enumerate(pieces):
                data = piece.encode() if isinstance(piece, str) else piece
                sock.sendall(_numbered(n, data.decode()) if i == 0 else data)
            if end == "read":
                assert sock.recv(65536).startswith(b"HTTP/1.1 4"), how
            elif end == "eof":
                sock.shutdown(socket.SHUT_WR)
                while sock.recv(65536):
                    pass
            else:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        finally:
            sock.close()
        assert _closed_through(seq, n), f"request {n} ({how}) left its number open"
    n = len(refusals) + 1
    sock = socket.create_connection((facade.host, facade.port), timeout=30)
    with sock:
        head = (
            f"GET /api/v1/nodes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {facade.token}\r\n\r\n"
        )
        sock.sendall(_numbered(n, head))
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
    assert seq.gap_causes == []  # no wall-clock wait decided anything


def test_a_wall_clock_gap_is_counted_and_reported_as_a_non_deterministic_advance(
    facade, monkeypatch
):
    """A predecessor that never reached the facade: its successor goes after
    GAP_TIMEOUT_S of wall time, and the run's figures say so, with the cause."""
    import io
    import socket
    from types import SimpleNamespace

    from broker.drivers.engine import Broker
    from commands import report

    monkeypatch.setattr(sequencer_module, "GAP_TIMEOUT_S", 0.05)
    with socket.create_connection((facade.host, facade.port), timeout=30) as sock:
        head = (
            f"GET /api/v1/nodes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {facade.token}\r\n\r\n"
        )
        sock.sendall(_numbered(2, head))  # number 1 never comes
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
    order = "request order: request 2 of process 4242-0badcafe handled after 0.05 s of wall time without request 1"
    assert facade.request_order_causes == [order]
    stall = "stall guard at t=1.000000000 s: 'sched' not in a virtual wait"
    broker = SimpleNamespace(
        cluster=SimpleNamespace(stats=SimpleNamespace()),
        clock=SimpleNamespace(
            stall=SimpleNamespace(nondeterministic_causes=[stall]), fires=0, now_ns=0
        ),
        facade=facade,
        progress=SimpleNamespace(messages=0),
    )
    stats = Broker._result(broker, True).stats
    assert stats["nondeterministic_advances"] == 2
    assert stats["nondeterministic_causes"] == [stall, order]
    fig = report.summarise(Path("/nonexistent/out"), stats, wall_s=1.0)
    text = io.StringIO()
    report.print_summary(fig, text)
    assert "request 2 of process 4242-0badcafe" in text.getvalue()
