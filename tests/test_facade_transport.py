"""The facade's transport under misuse (issue 17 items 1, 5, 6): connections the server
closes, work refused before authentication, bounded heads, bodies and chunk lines, and
an accept loop that survives running out of file descriptors."""

from __future__ import annotations

import json
import select
import socket
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

import pytest

from broker.facade import Facade
from broker.facade.server import MAX_BODY, MAX_HEAD

ROOT = Path(__file__).resolve().parent.parent
WAIT_S = 30.0  # a bound on waits for answers, not a performance expectation


def _connect(facade: Facade) -> socket.socket:
    sock = socket.create_connection((facade.host, facade.port), timeout=WAIT_S)
    return sock


def _read_all(sock: socket.socket) -> bytes:
    """Everything until the server closes the connection."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def _status(response: bytes) -> tuple[int, dict]:
    head, _, body = response.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body) if body.startswith(b"{") else {}


# --- item 1: closing is normal HTTP ----------------------------------------------------


@pytest.mark.parametrize(
    "request_head",
    [
        "GET /api/v1/nodes HTTP/1.1\r\nHost: x\r\nConnection: close\r\n",
        "GET /api/v1/nodes HTTP/1.0\r\n",
        "NONSENSE\r\n",  # answered 400, then closed
    ],
)
def test_a_connection_the_server_closes_is_ready_then_idle_never_busy(facade, request_head):
    sock = _connect(facade)
    port = sock.getsockname()[1]
    raw = f"{request_head}Authorization: Bearer {facade.token}\r\n\r\n".encode()
    if request_head.startswith("NONSENSE"):
        raw = b"NONSENSE\r\n\r\n"
    sock.sendall(raw)
    response = _read_all(sock)  # EOF: the server closed it (and unregistered it first)
    assert response.startswith(b"HTTP/1.1 ")
    # The runtime of a client that has not read yet is told to read; once it has, idle.
    assert facade.connection_state(port, len(raw), 0) == "ready"
    assert not facade.connection_idle(port, len(raw), 0)
    assert facade.connection_state(port, len(raw), len(response)) == "idle"
    assert facade.connection_idle(port, len(raw), len(response))
    sock.close()


def test_urllib_requests_each_on_their_own_closed_connection_are_served(facade):
    """urllib.request: one connection per request, ``Connection: close``."""
    for _ in range(3):
        req = urllib.request.Request(
            f"{facade.url}/api/v1/nodes", headers={"Authorization": f"Bearer {facade.token}"}
        )
        with urllib.request.urlopen(req, timeout=WAIT_S) as resp:
            assert json.load(resp)["items"][0]["metadata"]["name"] == "n1"


def test_a_new_connection_on_a_closed_ones_port_starts_afresh(facade):
    from broker.facade.server import Connection

    ledger = facade.ledger
    old = Connection(5555, None)
    old.written = 100
    ledger.register(old)
    ledger.unregister(old)
    assert ledger.state(5555, 10, 0) == "ready"
    ledger.register(Connection(5555, None))
    assert ledger.state(5555, 0, 0) == "idle"


# --- item 6: no work before authentication; bounded lines and bodies ---------------------


def test_an_unauthenticated_body_is_never_read(facade):
    sock = _connect(facade)
    # 64 MiB announced, not one byte sent: the answer comes from the head alone.
    sock.sendall(
        b"POST /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: x\r\n"
        b"Authorization: Bearer wrong\r\nContent-Length: 67108864\r\n\r\n"
    )
    status, body = _status(_read_all(sock))
    assert (status, body["reason"]) == (401, "Unauthorized")


def test_a_wrong_token_without_a_body_keeps_the_connection(facade):
    sock = _connect(facade)
    for _ in range(2):
        sock.sendall(b"GET /api/v1/nodes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer no\r\n\r\n")
        head = sock.recv(65536)
        assert head.startswith(b"HTTP/1.1 401 ")
    sock.close()


def test_a_body_above_the_api_servers_limit_is_refused_before_it_is_read(facade):
    sock = _connect(facade)
    sock.sendall(
        f"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\n"
        f"Authorization: Bearer {facade.token}\r\nContent-Length: {MAX_BODY + 1}\r\n\r\n".encode()
    )
    status, body = _status(_read_all(sock))
    assert status == 413
    assert body["reason"] == "RequestEntityTooLarge"
    assert body["message"] == "Request entity too large: limit is 3145728"


def test_a_chunked_body_is_cut_off_at_the_limit(facade):
    sock = _connect(facade)
    sock.sendall(
        f"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\n"
        f"Authorization: Bearer {facade.token}\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
    )
    piece = b"x" * 65536
    try:
        for _ in range(MAX_BODY // len(piece) + 2):
            sock.sendall(b"10000\r\n" + piece + b"\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass  # refused and closed while we were still sending: what we expect
    status, _ = _status(_read_all(sock))
    assert status == 413


def test_an_unterminated_chunk_size_line_is_refused_not_buffered(facade):
    sock = _connect(facade)
    sock.sendall(
        f"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\n"
        f"Authorization: Bearer {facade.token}\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
    )
    try:
        for _ in range(64):  # 4 MiB of "1111…" with no line end
            sock.sendall(b"1" * 65536)
    except (BrokenPipeError, ConnectionResetError):
        pass
    status, _ = _status(_read_all(sock))
    assert status in (400, 431)


def test_a_head_above_the_limit_is_431(facade):
    sock = _connect(facade)
    try:
        sock.sendall(
            b"GET /api/v1/nodes HTTP/1.1\r\nHost: x\r\nX-Big: "
            + b"a" * (MAX_HEAD + 10)
            + b"\r\n\r\n"
        )
    except (BrokenPipeError, ConnectionResetError):
        pass
    status, body = _status(_read_all(sock))
    assert status == 431 and body["reason"] == "RequestHeaderFieldsTooLarge"


def test_many_one_byte_chunks_make_one_body(facade):
    """60,000 one-byte chunks (assembled in linear time: the parser keeps a list)."""
    doc = json.dumps(
        {"metadata": {"name": "many-chunks"}, "data": {"k": "v" * (60_000 - 50)}}
    ).encode()
    body = b"".join(b"1\r\n" + doc[i : i + 1] + b"\r\n" for i in range(len(doc))) + b"0\r\n\r\n"
    sock = _connect(facade)
    sock.sendall(
        f"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\n"
        f"Authorization: Bearer {facade.token}\r\nTransfer-Encoding: chunked\r\n"
        "Connection: close\r\n\r\n".encode()
        + body
    )
    status, created = _status(_read_all(sock))
    assert status == 201 and created["metadata"]["name"] == "many-chunks"


# --- item 5: out of file descriptors ---------------------------------------------------

_LOW_FD_SERVER = textwrap.dedent(
    """
    import resource, sys
    sys.path.insert(0, {root!r})
    from broker.facade import Facade, ManualClock
    f = Facade(ManualClock())
    token = f.add_token("s")
    f.start()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    import os
    used = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (used + 20, hard))
    print(f.port, token, flush=True)
    sys.stdin.read()  # until the test is done
    print("accept errors", f._server.accept_errors, flush=True)
    """
)


def test_the_facade_keeps_accepting_after_running_out_of_descriptors(tmp_path):
    script = tmp_path / "server.py"
    script.write_text(_LOW_FD_SERVER.format(root=str(ROOT)))
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        port, token = proc.stdout.readline().split()
        # Far more connections than the server has descriptors for, held open: it runs out.
        crowd = [
            socket.create_connection(("127.0.0.1", int(port)), timeout=WAIT_S) for _ in range(60)
        ]
        assert select.select([proc.stderr], [], [], WAIT_S)[0], "the server never ran out"
        warning = proc.stderr.readline()
        assert "cannot accept a connection" in warning
        for sock in crowd:
            sock.close()
        # Descriptors come back as the server notices the closes: a new client is served.
        sock = socket.create_connection(("127.0.0.1", int(port)), timeout=WAIT_S)
        sock.sendall(
            f"GET /api/v1/nodes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        status, body = _status(_read_all(sock))
        if status != 200:  # said in full: the server's log carries the traceback
            proc.stdin.close()
            pytest.fail(f"{status} {body} — server's log:\n{proc.stderr.read()[-4000:]}")
        assert body["kind"] == "NodeList"
        proc.stdin.close()
        assert int(proc.stdout.read().split()[-1]) > 0
        assert "cannot accept a connection" not in proc.stderr.read()  # said once only
    finally:
        proc.kill()
        proc.wait()
