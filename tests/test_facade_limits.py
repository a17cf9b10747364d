"""Bounded memory and robust fan-out (issue 17 items 7 and 8): watch history bounded by
bytes as well as count, a watcher that never reads dropped as the API server drops it,
memory flat after large writes, and a commit that reaches everyone whatever one raises."""

from __future__ import annotations

import gc
import http.client
import json
import socket
import tracemalloc

import pytest

from broker.facade import ApiError, Facade, ManualClock
from broker.facade.store import Store

WAIT_S = 30.0


def _cm(name: str, size: int) -> dict:
    return {"metadata": {"name": name, "namespace": "default"}, "data": {"blob": "x" * size}}


def test_history_is_bounded_by_bytes_as_well_as_by_count():
    store = Store(ManualClock(), history_limit=1000, history_bytes=1 << 20)
    store.create("configmaps", _cm("c", 10))
    first_rv = int(store.resource_version)
    for i in range(20):
        store.replace("configmaps", _cm("c", 200_000 + i), namespace="default", name="c")
    assert store.history_size("configmaps") < 10  # 20 events of ~200 kB: only ~5 fit
    with pytest.raises(ApiError) as info:
        store.watch("configmaps", resource_version=str(first_rv))
    assert info.value.code == 410
    recent = store.watch("configmaps", resource_version=str(int(store.resource_version) - 1))
    assert len(recent.drain()) == 1


def test_a_commit_reaches_every_watcher_and_listener_whatever_one_raises():
    store = Store(ManualClock())
    broken, healthy = store.watch("pods"), store.watch("pods")
    broken.offer = lambda event, **kw: 1 / 0  # a bug in one watcher's filter
    heard: list[str] = []

    def bad_listener(key, type_, obj):
        raise RuntimeError("listener bug")

    store.add_listener(bad_listener)
    store.add_listener(lambda key, type_, obj: heard.append(obj["metadata"]["name"]))
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    with pytest.raises(RuntimeError, match="listener bug"):
        store.create("pods", pod, namespace="default")
    assert heard == ["p"], "the listener after the failing one was called"
    assert [json.loads(f)["type"] for f in healthy.drain()] == ["ADDED"]
    assert broken.ended, "the failing watcher is ended (its client re-lists)"
    assert store.get("pods", "default", "p")["metadata"]["name"] == "p"  # committed


def _put(facade: Facade, name: str, size: int) -> int:
    conn = http.client.HTTPConnection(facade.host, facade.port, timeout=WAIT_S)
    body = json.dumps(_cm(name, size)).encode()
    conn.request(
        "PUT",
        f"/api/v1/namespaces/default/configmaps/{name}",
        body=body,
        headers={"Authorization": f"Bearer {facade.token}", "Content-Type": "application/json"},
    )
    status = conn.getresponse().status
    conn.close()
    return status


def test_memory_stays_flat_with_large_writes_and_a_watcher_that_never_reads():
    """30 writes of 2.5 MB to one object, watched by a client that reads nothing, then
    deleted: what the facade still holds is bounded by its limits, not by the 75 MB
    written (tracemalloc counts Python's allocations exactly: no RSS noise)."""
    facade = Facade(ManualClock(), history_bytes=4 << 20)
    facade.store.watch_queue_bytes = 2 << 20
    facade.token = facade.add_token("sched")
    with facade:
        facade.store.create("configmaps", _cm("big", 10))
        idle = socket.create_connection((facade.host, facade.port), timeout=WAIT_S)
        idle.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        idle.sendall(
            f"GET /api/v1/namespaces/default/configmaps?watch=1 HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {facade.token}\r\n\r\n".encode()
        )
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for i in range(30):
                assert _put(facade, "big", 2_500_000 + i) == 200
            facade.store.delete("configmaps", "default", "big")
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert held < 16 << 20, f"{held / 2**20:.0f} MiB held after 75 MB written and deleted"
        assert facade.store.dropped_watchers == 1
        assert facade.store.watcher_count() == 0
        # The client that never read finds, when it finally reads, the events that were
        # held for it and then the end of its watch (a clean end: it re-watches).
        data = b""
        while not data.endswith(b"\r\n0\r\n\r\n"):
            chunk = idle.recv(1 << 20)
            assert chunk, "the connection closed before the end of the stream"
            data += chunk
        idle.close()


def test_a_watcher_dropped_for_not_reading_frees_its_queue():
    store = Store(ManualClock())
    store.watch_queue_bytes = 100_000
    store.create("configmaps", _cm("c", 10))
    dropped = []
    watcher = store.watch("configmaps", on_overflow=lambda: dropped.append(True))
    watcher.drain()  # the initial ADDED
    for i in range(10):
        store.replace("configmaps", _cm("c", 30_000 + i), namespace="default", name="c")
    assert dropped == [True] and watcher.overflowed and watcher.ended
    frames = watcher.drain()
    assert frames[-1] == b"" and len(frames) <= 5  # END, after what fitted
    assert store.watcher_count() == 0 and store.dropped_watchers == 1
