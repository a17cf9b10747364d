"""The frames of one read from a runtime are applied under one hold of the clock
service's lock, in order, waking the driver at most once (broker/clock/inbox.py)."""

import select
import threading

import pytest

from broker.clock.service import ClockService
from timewarp.wire import clocknet
from timewarp.wire import clockproto as cp


@pytest.fixture
def clock():
    service = ClockService()
    yield service
    service.close()


def _frames(*msgs):
    return cp.Unpacker().feed(cp.pack(msgs))


def _count_notifies(clock, monkeypatch):
    wakes = []
    real = threading.Condition.notify_all

    def counted(cond):
        if cond is clock._cond:
            wakes.append(1)
        real(cond)

    monkeypatch.setattr(threading.Condition, "notify_all", counted)
    return wakes


def test_a_read_of_several_frames_wakes_the_driver_once_and_applies_them_in_order(
    clock, monkeypatch
):
    wakes = _count_notifies(clock, monkeypatch)
    token = clock.registry.add_token("sched")
    frames = _frames(
        cp.hello("sched", 1234, token),
        cp.timer(1, 5_000, [0]),
        cp.state(True, 0, [], 1, 0, 0),
        cp.state(False, 0, [], 0, 1, 0),
    )
    assert len(frames) == 4
    assert clock.inbox.receive(b"c1", frames) is False
    # hello and both reports each could end a wait: the driver hears it once
    assert len(wakes) == 1
    assert clock.inbox.messages_in == 4
    proc = clock.registry.by_identity[b"c1"]
    assert proc.busy is False, "the last report is the one that stands"
    assert clock.next_deadline() == 5_000


def test_a_read_that_wakes_nobody_notifies_nobody(clock, monkeypatch):
    token = clock.registry.add_token("sched")
    clock.inbox.receive(b"c1", _frames(cp.hello("sched", 1234, token)))
    wakes = _count_notifies(clock, monkeypatch)
    clock.inbox.receive(b"c1", _frames(cp.timer(1, 5_000, [0]), cp.now_request(1)))
    assert wakes == []


def test_a_bad_frame_closes_after_what_came_before_it_and_applies_nothing_after(clock):
    token = clock.registry.add_token("sched")
    frames = _frames(cp.hello("sched", 1234, token), cp.timer(1, 5_000, [0]))
    frames += [b"not json", *_frames(cp.timer(2, 3_000, [0]))]
    assert clock.inbox.receive(b"c1", frames) is True
    assert clock.inbox.messages_in == 2
    assert clock.next_deadline() == 5_000, "a timer after the bad frame was set"


def test_a_message_before_hello_closes_and_the_rest_is_not_applied(clock):
    frames = _frames(cp.timer(1, 5_000, [0]), cp.hello("sched", 1234, "t"))
    assert clock.inbox.receive(b"c1", frames) is True
    assert b"c1" not in clock.registry.by_identity


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
            assert select.select([sock], [], [], 5.0)[0], f"stalled after {len(got)} frames"
            data = sock.recv(1 << 16)
            assert data, "the clock service closed the connection"
            got += [cp.decode_to_runtime(f) for f in unpacker.feed(data)]
        assert got[0]["op"] == "welcome"
        assert [m["rid"] for m in got[1:]] == list(range(count))
    finally:
        sock.close()
