"""simulator.zmtp: the simulator's REQ side without libzmq, against libzmq's REP socket
(what every decision process binds): replies of every frame size over TCP and IPC, a
peer that binds late, a peer that goes away, endpoints it leaves to libzmq."""

from __future__ import annotations

import threading

import pytest
import zmq

from simulator import zmtp


def _rep(endpoint: str, replies: int, close_after: bool = False) -> tuple[str, threading.Thread]:
    context = zmq.Context.instance()
    socket = context.socket(zmq.REP)
    socket.setsockopt(zmq.LINGER, 10_000)  # a reply is sent whole before the socket goes
    if endpoint.startswith("tcp://"):
        endpoint = f"{endpoint}:{socket.bind_to_random_port(endpoint)}"
    else:
        socket.bind(endpoint)

    def serve() -> None:
        try:
            for _ in range(replies):
                if not socket.poll(30_000):
                    return
                request = socket.recv()
                socket.send(b"re:" + request)
            if close_after and socket.poll(30_000):
                socket.recv()  # a request it never answers: the connection goes
        finally:
            socket.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return endpoint, thread


@pytest.mark.parametrize("transport", ["tcp", "ipc"])
def test_requests_and_replies_of_every_frame_size(transport, tmp_path):
    base = "tcp://127.0.0.1" if transport == "tcp" else f"ipc://{tmp_path / 'rep.sock'}"
    sizes = [0, 1, 252, 253, 300, 70_000, 600_000]  # short and long frames, many reads
    endpoint, thread = _rep(base, len(sizes))
    req = zmtp.ReqSocket(endpoint)
    req.connect(10.0)
    for size in sizes:
        request = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
        req.send(request)
        assert req.recv(30.0) == b"re:" + request
    req.close()
    thread.join(10)


def test_a_peer_that_is_not_listening_is_refused_and_one_that_leaves_is_peer_closed():
    with pytest.raises(OSError):
        zmtp.ReqSocket("tcp://127.0.0.1:1").connect(1.0)
    endpoint, thread = _rep("tcp://127.0.0.1", 1, close_after=True)
    req = zmtp.ReqSocket(endpoint)
    req.connect(10.0)
    req.send(b"one")
    assert req.recv(30.0) == b"re:one"
    req.send(b"two")
    with pytest.raises(zmtp.PeerClosed):
        for _ in range(30):  # until the REP socket is closed (a bounded wait)
            req.recv(1.0)
    thread.join(10)


@pytest.mark.parametrize(
    "endpoint, handled",
    [
        ("tcp://127.0.0.1:5555", True),
        ("tcp://localhost:5555", True),
        ("tcp://[::1]:5555", True),
        ("ipc:///tmp/x.sock", True),
        ("ipc://@abstract", True),
        ("inproc://broker", False),
        ("tcp://eth0;127.0.0.1:5555", False),
        ("tcp://127.0.0.1:*", False),
        ("ipc://*", False),
    ],
)
def test_the_endpoints_it_handles(endpoint, handled):
    assert (zmtp.address(endpoint) is not None) is handled
