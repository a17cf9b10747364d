"""simulator.zmtp: the simulator's REQ side without libzmq, against libzmq's REP socket
(what every decision process binds): replies of every frame size over TCP and IPC, a
peer that binds late, a peer that goes away, endpoints it leaves to libzmq."""

from __future__ import annotations

import threading

import pytest
import zmq
from hypothesis import given, settings
from hypothesis import strategies as st

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


def _silent_rep() -> tuple[zmq.Socket, str, threading.Event, threading.Event]:
    """A REP socket that takes one request and never answers; ``asked`` is set once the
    request is there. Unless ``done`` is set within 30 s of it, the socket closes (the
    REQ side sees PeerClosed): a wait that does not end as it should fails, not hangs."""
    socket = zmq.Context.instance().socket(zmq.REP)
    endpoint = f"tcp://127.0.0.1:{socket.bind_to_random_port('tcp://127.0.0.1')}"
    asked, done = threading.Event(), threading.Event()

    def take() -> None:
        if socket.poll(30_000):
            socket.recv()
            asked.set()
        if not done.wait(30):
            socket.close(linger=0)

    threading.Thread(target=take, daemon=True).start()
    return socket, endpoint, asked, done


def test_a_bounded_wait_returns_none_and_the_reply_still_comes_after_it():
    """The wait is the kernel's receive timeout, changed only when the wait changes: each
    bounded wait returns None (no reply yet), an unbounded one blocks until the reply."""
    endpoint, thread = _rep("tcp://127.0.0.1", 1)
    req = zmtp.ReqSocket(endpoint)
    req.connect(10.0)
    req.send(b"one")
    assert req.recv(float("inf")) == b"re:one"  # (an infinite wait: no limit, as None)
    req.close()
    thread.join(10)
    socket, endpoint, asked, done = _silent_rep()
    try:
        req = zmtp.ReqSocket(endpoint)
        req.connect(10.0)
        req.send(b"nobody answers")
        assert asked.wait(30)
        for wait in (0.05, 0.05, 1e-9, 0.02):  # the same wait again, one below a microsecond
            assert req.recv(wait) is None
        done.set()
        socket.send(b"late")
        assert req.recv(30.0) == b"late"
        req.close()
    finally:
        done.set()
        socket.close(linger=0)


def test_stop_ends_a_wait_for_a_reply_over_the_plain_socket(tmp_path):
    """`timewarp sim`'s Ctrl-C/SIGTERM: ``stop`` set while the REQ side waits in ``recv``
    for a reply that does not come ends the run (Aborted), not a wait forever."""
    from simulator import runner
    from simulator.inputs import make_sim, write_platform, write_workload

    platform = write_platform(tmp_path / "platform.xml", 1)
    workload = write_workload(
        tmp_path / "w.json",
        [{"id": "1", "subtime": 0, "res": 1, "profile": "p"}],
        {"p": {"type": "delay", "delay": 5}},
    )
    sim = make_sim(platform, [workload])
    socket, endpoint, asked, done = _silent_rep()
    stop = threading.Event()
    helper = threading.Thread(target=lambda: asked.wait(30) and stop.set())
    helper.start()  # the request is there, the simulator waits for its reply: stop it
    try:
        with pytest.raises(runner.Aborted, match="stopped while waiting for a reply"):
            runner.run(sim, endpoint, stop=stop)
    finally:
        done.set()
        helper.join(30)
        socket.close(linger=0)


def _frame(flags: int, body: bytes, long: bool) -> bytes:
    if long:
        return bytes((flags | 2,)) + len(body).to_bytes(8, "big") + body
    return bytes((flags, len(body))) + body


replies = st.builds(
    lambda flags, body, long, before, after: (
        before + _frame(1, b"", False) + _frame(flags, body, long) + after
    ),
    st.sampled_from([0, 0, 1, 4]),  # the last frame, or one with more to come, or a command
    st.binary(max_size=300),
    st.booleans(),
    st.sampled_from([b"", b"\x04\x06\x05READY"]),  # a command before it
    st.sampled_from([b"", b"\x01", b"\x01\x00\x00\x01x"]),  # a part of the next one after
)


@settings(max_examples=500)
@given(replies | st.binary(max_size=20))
def test_a_whole_reply_read_at_once_is_what_the_buffer_would_give(data):
    """The fast path (a read that is exactly one reply) against the buffer's parser:
    when it answers, the parser gives the same frame and leaves nothing behind."""
    fast = zmtp.whole_reply(data)
    if fast is None:
        return
    req = zmtp.ReqSocket("tcp://127.0.0.1:1")
    req._buffer = bytearray(data)
    assert req._parse() == fast and type(fast) is bytes
    assert not req._buffer
