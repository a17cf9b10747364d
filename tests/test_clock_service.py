"""The clock service seen from a runtime's sockets: the send/receive socket pair and the
standalone autopilot (time moves with no driver thread asking)."""

import contextlib
import threading

import pytest
import zmq

from broker.clock_service import ClockService
from timewarp import clockproto as cp

TIMEOUT_MS = 5000


@pytest.fixture
def service():
    clock = ClockService(endpoint="tcp://127.0.0.1:*")
    yield clock
    clock.close()


def _dealer(ctx, endpoint, routing_id):
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.ROUTING_ID, routing_id)
    sock.connect(endpoint)
    return sock


def _recv(sock):
    assert sock.poll(TIMEOUT_MS), "no answer from the clock service"
    return cp.decode_to_runtime(sock.recv())


def _connect(ctx, endpoint, name):
    rx = _dealer(ctx, endpoint, f"{name}-rx".encode())
    rx.send(cp.encode(cp.hello(name, 1234)))
    assert _recv(rx)["op"] == "welcome"
    tx = _dealer(ctx, endpoint, f"{name}-rx".encode() + cp.SEND_SUFFIX)
    return rx, tx


def test_messages_from_the_send_socket_are_answered_on_the_receive_socket(service):
    ctx = zmq.Context.instance()
    rx, tx = _connect(ctx, service.endpoint, "sched")
    try:
        tx.send(cp.encode(cp.now_request(7)))
        assert _recv(rx) == {"op": "now", "rid": 7, "t": 0}
        assert not tx.poll(100), "the send socket is never written to"
        tx.send(cp.encode(cp.state(False, 0, [], 0, 1, 0)))
        service.wait_quiescent()  # the idle report sent on tx counts for the process
        assert [p.name for p in service.processes()] == ["sched"]
    finally:
        rx.close()
        tx.close()


def test_a_send_socket_of_an_unknown_process_gets_its_error_on_the_receive_side(service):
    ctx = zmq.Context.instance()
    rx = _dealer(ctx, service.endpoint, b"ghost")
    tx = _dealer(ctx, service.endpoint, b"ghost" + cp.SEND_SUFFIX)
    try:
        tx.send(cp.encode(cp.now_request(1)))
        msg = _recv(rx)
        assert msg["op"] == "error"
        assert "did not say hello" in msg["message"]
    finally:
        rx.close()
        tx.close()


def test_autopilot_advances_to_each_deadline_without_a_driver(service):
    ctx = zmq.Context.instance()
    rx, tx = _connect(ctx, service.endpoint, "prog")
    service.engage_autopilot()
    try:
        acks = 0
        seen = []
        for deadline in (5_000, 12_000, 30_000):
            tx.send_multipart(
                [
                    cp.encode(cp.timer(deadline, deadline, [deadline])),
                    cp.encode(cp.state(False, acks, [], 0, 1, 0)),
                ]
            )
            fire = _recv(rx)
            assert fire["op"] == "fire"
            seen.append((fire["ids"], fire["t"]))
            acks += 1
        assert seen == [([5_000], 5_000), ([12_000], 12_000), ([30_000], 30_000)]
        assert service.advances == 3
        # Nothing pending and the process idle: the driver's wait returns.
        tx.send(cp.encode(cp.state(False, acks, [], 0, 1, 0)))
        done = threading.Event()
        threading.Thread(target=lambda: (service.wait_settled(), done.set()), daemon=True).start()
        assert done.wait(5)
    finally:
        rx.close()
        tx.close()


class FakeFacade:
    """How each API connection stands, as the facade's ledger would say."""

    def __init__(self, service, states):
        self.states = dict(states)
        self.service = service
        service.set_io_checker(lambda port, sent, consumed: self.states[port])

    def set(self, **states):
        self.states.update({int(port[1:]): s for port, s in states.items()})
        self.service.notify()


def _waiting(service):
    done = threading.Event()
    threading.Thread(target=lambda: (service.wait_quiescent(), done.set()), daemon=True).start()
    return done


WATCH, BINDING = [100, 10, 10, 1], [200, 20, 20, 2]  # [port, sent, consumed, opening order]


@contextlib.contextmanager
def _idle_but_for(service, facade, io):
    """Process "sched" idle but for threads reading ``io``, a driver waiting for
    quiescence meanwhile; on the way out the readers read everything and it settles."""
    ctx = zmq.Context.instance()
    rx, tx = _connect(ctx, service.endpoint, "sched")
    try:
        tx.send(cp.encode(cp.state(False, 0, io, 0, len(io), 0)))
        done = _waiting(service)
        yield rx
        facade.set(**{f"p{port}": "idle" for port in facade.states})
        tx.send(cp.encode(cp.state(False, 1, [], 0, len(io), 0)))
        assert done.wait(5)
    finally:
        rx.close()
        tx.close()


def _released_ports(rx):
    msg = _recv(rx)
    assert msg["op"] == "io"
    return [port for port, _ in msg["ports"]]


def test_a_response_is_let_go_before_watch_events_and_only_once_they_are_written(
    service, monkeypatch
):
    monkeypatch.setattr("broker.clock_service.FLUSH_GRACE_S", 30.0)
    facade = FakeFacade(service, {100: "flushing", 200: "busy"})
    with _idle_but_for(service, facade, [WATCH, BINDING]) as rx:
        facade.set(p200="ready")  # the binding's answer is there, its watch event is not
        assert not rx.poll(200), "let go while watch events were still being written"
        facade.set(p100="streaming")
        assert _released_ports(rx) == [200, 100]  # both readers at once, the answer first


def test_a_writer_stuck_on_a_full_buffer_does_not_hold_the_reader_back(service, monkeypatch):
    monkeypatch.setattr("broker.clock_service.FLUSH_GRACE_S", 0.0)
    facade = FakeFacade(service, {100: "flushing"})  # and it stays so until the client reads
    with _idle_but_for(service, facade, [WATCH]) as rx:
        assert _released_ports(rx) == [100]


def test_the_broker_reacts_to_what_was_done_before_letting_a_reader_go(service):
    """The hook (the broker: a binding becomes a running pod) runs while every process
    is idle but for data to read; what it writes is read with the rest."""
    facade = FakeFacade(service, {100: "streaming", 200: "idle"})
    calls = []

    def hook():
        calls.append(dict(facade.states))
        if len(calls) == 1:
            facade.states[200] = "ready"  # its commit answered something too
            return True
        return False

    service.set_before_io_release(hook)
    with _idle_but_for(service, facade, [WATCH, BINDING]) as rx:
        assert _released_ports(rx) == [200, 100]  # chosen after the hook's change
        assert calls == [{100: "streaming", 200: "idle"}, {100: "streaming", 200: "ready"}]
