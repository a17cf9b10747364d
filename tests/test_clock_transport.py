"""The clock transport's writes: what a runtime's socket does not take at once follows,
in order, written by the transport's loop (broker/clock/transport.py)."""

import select

import pytest

from broker.clock.service import ClockService
from timewarp.wire import clocknet
from timewarp.wire import clockproto as cp


@pytest.fixture
def clock():
    service = ClockService()
    yield service
    service.close()


def test_replies_the_socket_does_not_take_at_once_follow_in_order(clock):
    """A runtime that reads late gets every answer, in order: what the socket did not take
    is written by the transport's loop when it can (broker/clock/transport.py)."""
    count = 30_000  # ~1 MB of answers: more than a socket buffer holds
    sock = clocknet.connect(clock.endpoint, 5.0)
    try:
        sock.sendall(cp.pack([cp.hello("sched", 1234, clock.registry.add_token("sched"))]))
        sock.sendall(cp.pack([cp.now_request(rid) for rid in range(count)]))
        unpacker, got = cp.Unpacker(), []
        while len(got) <= count:  # the welcome, then every answer
            # a hang's bound, not a speed check: at load 20 on 2 CPUs the service's loop
            # thread can go seconds without a turn (a 5 s bound failed there once)
            assert select.select([sock], [], [], 60.0)[0], f"stalled after {len(got)} frames"
            data = sock.recv(1 << 16)
            assert data, "the clock service closed the connection"
            got += [cp.decode_to_runtime(f) for f in unpacker.feed(data)]
        assert got[0]["op"] == "welcome"
        assert [m["rid"] for m in got[1:]] == list(range(count))
    finally:
        sock.close()
