"""Way (b) of ARCHITECTURE.md with the real client: count the bytes the official client
sends and receives per socket, as timewarp's runtime does, and check that the facade's
ledger calls a connection idle exactly when the client's watch thread is blocked in recv
with nothing left to deliver — and busy as soon as an event is published."""

from __future__ import annotations

import socket
import threading

import pytest

from broker.facade import Facade, ManualClock
from broker.facade.objects import make_node

SPEC = {"containers": [{"name": "c", "image": "busybox"}]}


class ByteCounter:
    """Per local port: bytes sent, bytes received, and whether a thread is inside recv."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.sent: dict[int, int] = {}
        self.consumed: dict[int, int] = {}
        self.in_recv: dict[int, bool] = {}

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real_recv_into, real_sendall = socket.socket.recv_into, socket.socket.sendall
        counter = self

        def is_client() -> bool:
            return not threading.current_thread().name.startswith("facade-")

        def recv_into(sock, buffer, nbytes=0, flags=0):
            if not is_client():
                return real_recv_into(sock, buffer, nbytes, flags)
            port = sock.getsockname()[1]
            with counter.lock:
                counter.in_recv[port] = True
                counter.lock.notify_all()
            try:
                n = real_recv_into(sock, buffer, nbytes, flags)
            finally:
                with counter.lock:
                    counter.in_recv[port] = False
            with counter.lock:
                counter.consumed[port] = counter.consumed.get(port, 0) + n
                counter.lock.notify_all()
            return n

        def sendall(sock, data, flags=0):
            if is_client():
                port = sock.getsockname()[1]
                with counter.lock:
                    counter.sent[port] = counter.sent.get(port, 0) + len(data)
            return real_sendall(sock, data, flags)

        monkeypatch.setattr(socket.socket, "recv_into", recv_into)
        monkeypatch.setattr(socket.socket, "sendall", sendall)

    def blocked_ports(self) -> list[int]:
        with self.lock:
            return [p for p, blocked in self.in_recv.items() if blocked]

    def counts(self, port: int) -> tuple[int, int]:
        with self.lock:
            return self.sent.get(port, 0), self.consumed.get(port, 0)


def wait_until(facade: Facade, predicate, timeout: float = 10.0) -> bool:
    """Wait on the facade's idle notifications (and the counter) with a bound."""
    woke = threading.Event()
    facade.add_idle_listener(lambda port: woke.set())
    for _ in range(int(timeout / 0.05)):
        if predicate():
            return True
        woke.wait(0.05)
        woke.clear()
    return predicate()


@pytest.mark.parametrize("direct", [False, True], ids=["stream-thread", "direct-writes"])
def test_a_parked_official_watch_is_idle_and_a_publish_makes_it_busy(monkeypatch, tmp_path, direct):
    from kubernetes import client, config, watch

    clock = ManualClock()
    facade = Facade(clock)
    if direct:
        facade.write_watch_events_directly()
    facade.store.create("nodes", make_node("n1"))
    kubeconfig = facade.write_kubeconfig(tmp_path / "kc", "sched")
    counter = ByteCounter()
    counter.install(monkeypatch)
    received: list[str] = []
    with facade:
        api = config.new_client_from_config(config_file=str(kubeconfig))
        v1 = client.CoreV1Api(api)

        def watcher() -> None:
            for event in watch.Watch().stream(
                v1.list_namespaced_pod, "default", timeout_seconds=60
            ):
                received.append(event["object"].metadata.name)

        thread = threading.Thread(target=watcher, name="scheduler-watch", daemon=True)
        thread.start()

        def parked_idle() -> int | None:
            for port in counter.blocked_ports():
                if facade.connection_idle(port, *counter.counts(port)):
                    return port
            return None

        assert wait_until(facade, lambda: parked_idle() is not None), "the watch never parked"
        port = parked_idle()
        for i in range(3):
            before = counter.counts(port)
            facade.store.create(
                "pods", {"metadata": {"name": f"p{i}"}, "spec": SPEC}, namespace="default"
            )
            # Published: a client that has not consumed it is never idle, whatever its
            # thread is doing. (With direct writes the event may already be read by now:
            # the counts of before the publish are the ones that must not be idle.)
            assert not facade.connection_idle(port, *before)
            assert wait_until(facade, lambda i=i: len(received) == i + 1 and parked_idle() == port)
        assert received == ["p0", "p1", "p2"]
        clock.advance(59 * 10**9)
        assert parked_idle() == port and thread.is_alive(), "59 virtual seconds: still parked"
        clock.advance(1 * 10**9)  # the virtual timeout ends the stream
        thread.join(timeout=10)
        assert not thread.is_alive()
        api.close()
