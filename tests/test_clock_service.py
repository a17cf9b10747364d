"""The clock service seen from a runtime's sockets: the send/receive socket pair and the
standalone autopilot (time moves with no driver thread asking)."""

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
