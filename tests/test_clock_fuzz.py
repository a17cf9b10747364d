"""The clock socket fuzzed as a hostile local user would (issue 27): garbage, truncated,
huge and deeply nested frames, hellos with wrong or missing tokens, messages from
connections that never said hello. Whatever comes, the clock's thread lives, no intruder
is registered (so none is awaited or blamed), and a legitimate process's run goes on."""

import contextlib
import select
import socket

from hypothesis import given
from hypothesis import strategies as st

from broker.clock.service import ClockService
from timewarp.wire import clocknet
from timewarp.wire import clockproto as cp

TIMEOUT_S = 5.0

_VALID = [
    cp.now_request(1),
    cp.timer(1, 10**9, [0]),
    cp.cancel(1),
    cp.state(True, 0, [], 1, 0, 0),
    cp.stacks("x"),
    cp.bye(),
]
_names = st.sampled_from(["sched", "sched#2", "intruder", ""]) | st.text(max_size=20)
_tokens = st.none() | st.text(max_size=40)
_hellos = st.builds(
    lambda name, pid, token: cp.pack([cp.hello(name, pid, token)]),
    _names,
    st.integers(0, 2**70),
    _tokens,
)
_garbage = st.binary(max_size=300).map(lambda b: b + b"\n")
_compact_garbage = st.builds(  # a compact frame's op, then anything
    lambda op, payload: op + b" " + payload + b"\n",
    st.sampled_from([b"state", b"timer", b"now", b"cancel", b"harden", b"fire", b"io"]),
    st.binary(max_size=200) | st.text("0123456789abcdefABCDEF \t", max_size=200).map(str.encode),
)
_truncated = st.tuples(st.sampled_from(_VALID), st.integers(1, 40)).map(
    lambda v: cp.pack([v[0]])[: v[1]]
)
_deep = st.tuples(
    st.sampled_from([("[", "]"), ('{"a":', "}"), ('{"op":"state","io":[', "]}")]),
    st.integers(1, 200_000),
).map(lambda v: (v[0][0] * v[1] + v[0][1] * v[1] + "\n").encode())
_huge = st.sampled_from(
    [
        b'{"op":"stacks","text":"' + b"x" * 1_000_000 + b'"}\n',
        b"9" * 1_000_000 + b"\n",
        b'{"op":"now","rid":' + b"9" * 5000 + b"}\n",
    ]
)
_unasked = st.sampled_from(_VALID).map(lambda m: cp.pack([m]))
_frames = st.one_of(_garbage, _compact_garbage, _truncated, _deep, _huge, _hellos, _unasked)


def _served_to_the_end(sock):
    """Close our side; True once the service closed its side too (having read and handled
    everything we sent), False if it went silent."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)
    while select.select([sock], [], [], TIMEOUT_S)[0]:
        try:
            if not sock.recv(65536):
                return True
        except OSError:  # reset: closed too
            return True
    return False


def _recv(sock, unpacker):
    while True:
        assert select.select([sock], [], [], TIMEOUT_S)[0], "no answer from the clock"
        frames = unpacker.feed(sock.recv(65536))
        if frames:
            assert len(frames) == 1
            return cp.decode_to_runtime(frames[0])


@given(st.lists(st.lists(_frames, min_size=1, max_size=4), min_size=1, max_size=3))
def test_no_frame_kills_the_clock_or_joins_it(attacks):
    with ClockService(stall_timeout=30) as clock:
        token = clock.expect("sched")
        for frames in attacks:  # one connection each
            with contextlib.closing(clocknet.connect(clock.endpoint, TIMEOUT_S)) as sock:
                with contextlib.suppress(OSError):  # refused and closed under us
                    for frame in frames:
                        sock.sendall(frame)
                assert _served_to_the_end(sock), "the clock stopped serving"
        assert clock.transport._thread.is_alive()
        assert [(p.name, p.connected) for p in clock.registry.processes()] == [("sched", False)]
        # the launched process joins and its run goes on: a timer is set, time moves to
        # it, the timer fires
        with contextlib.closing(clocknet.connect(clock.endpoint, TIMEOUT_S)) as sock:
            unpacker = cp.Unpacker()
            sock.sendall(cp.pack([cp.hello("sched", 1, token)]))
            assert _recv(sock, unpacker)["op"] == "welcome"
            sock.sendall(cp.pack([cp.timer(7, 10**9, [0]), cp.state(False, 0, [], 0, 1, 0)]))
            clock.wait_quiescent()
            assert clock.next_deadline() == 10**9
            clock.advance_to(10**9)
            assert clock.release_due(wait=False) == 1
            assert _recv(sock, unpacker) == {"op": "fire", "ids": [7], "t": 10**9}
        assert clock.stall.stall_reports == []
