"""A runtime meeting a broker of another clock protocol version stops at the welcome,
naming both versions, instead of failing on the first compact frame it cannot read."""

import contextlib
import socket
import threading

import pytest

from timewarp._core.client import BrokerUnreachable, ClockClient
from timewarp.wire import clockproto as cp

TIMEOUT_S = 10.0


@contextlib.contextmanager
def _broker_welcoming(version):
    """A loopback listener that reads one hello and answers a welcome of ``version``."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(TIMEOUT_S)
    heard = []

    def serve():
        conn, _ = server.accept()
        with conn:
            conn.settimeout(TIMEOUT_S)
            unpacker = cp.Unpacker()
            while not heard:
                heard.extend(cp.decode_to_broker(f) for f in unpacker.feed(conn.recv(65536)))
            conn.sendall(cp.pack([{**cp.welcome(0, 5, 6, "deterministic"), "v": version}]))
            conn.recv(1)  # until the client closes (or the timeout)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{server.getsockname()[1]}", heard
    finally:
        thread.join(TIMEOUT_S)
        server.close()


def test_a_welcome_of_another_version_stops_the_runtime_naming_both():
    with _broker_welcoming(1) as (endpoint, heard):
        client = ClockClient(endpoint, "sched", token="t")
        try:
            with pytest.raises(BrokerUnreachable) as info:
                client.handshake(TIMEOUT_S)
        finally:
            client._sock.close()
    assert f"the broker speaks clock protocol v1, this runtime v{cp.VERSION}" in str(info.value)
    assert heard[0]["v"] == cp.VERSION


def test_a_welcome_of_this_version_is_taken():
    with _broker_welcoming(cp.VERSION) as (endpoint, _heard):
        client = ClockClient(endpoint, "sched", token="t")
        try:
            assert client.handshake(TIMEOUT_S)["op"] == "welcome"
        finally:
            client._sock.close()
