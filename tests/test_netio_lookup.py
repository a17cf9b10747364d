"""The facade connection of a socket (timewarp/_core/netio.py ``_lookup``) is found by
descriptor first: that fast path must give the same answer as the weak table, also
when a closed connection's descriptor is reused; and a send counts its bytes on the
connection it looked up before sending."""

import socket
import threading

import pytest

from timewarp._core import current, netio
from timewarp._core import runtime as _runtime


@pytest.fixture
def facade(monkeypatch):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    monkeypatch.setattr(netio, "_facade", server.getsockname())
    monkeypatch.setattr(netio, "_conns", netio.weakref.WeakKeyDictionary())
    monkeypatch.setattr(netio, "_by_fd", {})
    yield server
    server.close()


def _connect(server):
    client = socket.create_connection(server.getsockname())
    peer, _ = server.accept()
    return client, peer


def test_an_api_connection_is_found_again_and_a_reused_descriptor_is_a_new_one(facade):
    first, peer = _connect(facade)
    conn = netio._lookup(first)
    assert conn is not None and netio._lookup(first) is conn
    fd = first.fileno()
    first.close()
    peer.close()
    # the next connection gets the lowest free descriptor: the one just closed
    second, peer2 = _connect(facade)
    try:
        assert second.fileno() == fd, "the OS did not reuse the descriptor"
        again = netio._lookup(second)
        assert again is not None and again is not conn
        assert netio._lookup(second) is again
    finally:
        second.close()
        peer2.close()


def test_a_socket_to_anything_else_is_not_an_api_connection(facade):
    other = socket.socket()
    other.bind(("127.0.0.1", 0))
    other.listen()
    client = socket.create_connection(other.getsockname())
    try:
        assert netio._lookup(client) is None
        assert netio._lookup(client) is None
    finally:
        client.close()
        other.close()


def test_sendall_counts_its_bytes_on_the_api_connection(facade, monkeypatch):
    rt = _runtime.Runtime(now_ns=0, epoch_ns=0, mono_ns=0, mode="deterministic", poke=lambda: None)
    monkeypatch.setattr(current, "ACTIVE", rt)
    client, peer = _connect(facade)
    try:
        sendall = netio._sending(socket.socket.sendall, False)
        sendall(client, b"x" * 100)
        sendall(client, b"y" * 23)
        assert netio._lookup(client).sent == 123
    finally:
        client.close()
        peer.close()


def test_reads_are_gated_for_tracked_threads_only():
    rt = _runtime.Runtime(now_ns=0, epoch_ns=0, mono_ns=0, mode="deterministic", poke=lambda: None)
    rt.adopt_main()
    assert rt.reads_gated()  # the main thread, adopted: tracked
    seen = []
    t = threading.Thread(target=lambda: seen.extend([rt.reads_gated(), rt.reads_gated()]))
    t.start()
    t.join()
    assert seen == [False, False]  # a thread the runtime did not see start
    free = _runtime.Runtime(now_ns=0, epoch_ns=0, mono_ns=0, mode="realtime", poke=lambda: None)
    free.adopt_main()
    assert not free.reads_gated()
