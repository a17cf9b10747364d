"""The facade's HTTP surface, byte by byte: status codes, paths, chunked watches, TLS, and
the quiescence ledger the broker relies on."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from broker.facade import ApiError, Facade, Hooks, ManualClock
from broker.facade.objects import make_node

ROOT = Path(__file__).resolve().parent.parent
OLD_CLIENT = ROOT / ".venv" / "k8s24"
POD = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


@pytest.fixture
def facade():
    clock = ManualClock()
    f = Facade(clock, history_limit=5, bookmark_interval_s=60)
    f.store.create("nodes", make_node("n1"))
    f.token = f.add_token("sched")
    with f:
        yield f


class RawClient:
    """One keep-alive connection speaking HTTP/1.1 by hand; counts bytes like the runtime."""

    def __init__(self, facade: Facade, token: str | None = "default") -> None:
        self.sock = socket.create_connection((facade.host, facade.port))
        self.token = facade.token if token == "default" else token
        self.port = self.sock.getsockname()[1]
        self.sent = 0
        self.consumed = 0
        self.buf = b""

    def send(
        self, method: str, path: str, body: object = None, headers: dict | None = None
    ) -> None:
        data = (
            b""
            if body is None
            else (body if isinstance(body, bytes) else json.dumps(body).encode())
        )
        lines = [f"{method} {path} HTTP/1.1", "Host: x", f"Content-Length: {len(data)}"]
        if self.token:
            lines.append(f"Authorization: Bearer {self.token}")
        for k, v in (headers or {}).items():
            lines.append(f"{k}: {v}")
        raw = ("\r\n".join(lines) + "\r\n\r\n").encode() + data
        self.sock.sendall(raw)
        self.sent += len(raw)

    def _recv(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        self.consumed += len(chunk)
        self.buf += chunk

    def _take(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._recv()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._recv()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def head(self) -> tuple[int, dict[str, str]]:
        status = int(self._line().split()[1])
        headers = {}
        while line := self._line():
            k, v = line.decode().split(":", 1)
            headers[k.strip().lower()] = v.strip()
        return status, headers

    def response(self) -> tuple[int, dict]:
        status, headers = self.head()
        body = self._take(int(headers["content-length"]))
        ctype = headers["content-type"]
        return status, (json.loads(body) if "json" in ctype else {"text": body.decode()})

    def request(self, method: str, path: str, body: object = None, headers: dict | None = None):
        self.send(method, path, body, headers)
        return self.response()

    def chunk(self) -> bytes:
        size = int(self._line(), 16)
        data = self._take(size)
        assert self._take(2) == b"\r\n"
        return data

    def event(self) -> dict:
        data = self.chunk()
        assert data.endswith(b"\n") and data.count(b"\n") == 1, "one event per chunk"
        return json.loads(data)

    def close(self) -> None:
        self.sock.close()


def wait_idle(facade: Facade, client: RawClient, expect: bool = True) -> bool:
    """Wait (bounded) until the ledger says the connection is idle at the client's counts."""
    woke = threading.Event()
    facade.add_idle_listener(lambda port: woke.set() if port == client.port else None)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if facade.connection_idle(client.port, client.sent, client.consumed) == expect:
            return True
        woke.wait(0.05)
        woke.clear()
    return False


# --- status codes and paths -------------------------------------------------------------


def test_missing_or_unknown_token_is_401_status(facade):
    for token in (None, "nope"):
        c = RawClient(facade, token=token)
        status, body = c.request("GET", "/api/v1/nodes")
        assert status == 401 and body["kind"] == "Status" and body["reason"] == "Unauthorized"
    assert RawClient(facade, token=None).request("GET", "/healthz") == (200, {"text": "ok"})


def test_percent_encoded_paths_are_decoded(facade):
    facade.store.create("pods", {**POD, "metadata": {"name": "a.b-1", "namespace": "default"}})
    c = RawClient(facade)
    status, body = c.request("GET", "/api/v1/namespaces/%64efault/pods/a%2Eb%2D1")
    assert status == 200 and body["metadata"]["name"] == "a.b-1"


@pytest.mark.parametrize("value", ["true", "True", "1"])
def test_watch_flag_spellings(facade, value):
    c = RawClient(facade)
    c.send("GET", f"/api/v1/nodes?watch={value}")
    status, headers = c.head()
    assert status == 200 and headers["transfer-encoding"] == "chunked"
    event = c.event()
    assert event["type"] == "ADDED" and event["object"]["metadata"]["name"] == "n1"


def test_errors_are_status_objects_with_the_right_codes(facade):
    c = RawClient(facade)
    cases = [
        (("GET", "/api/v1/namespaces/default/pods/none"), 404, "NotFound"),
        (("GET", "/api/v1/nodes?labelSelector=a%20in%20(b"), 400, "BadRequest"),
        (("GET", "/api/v1/pods?fieldSelector=spec.bogus%3Dx"), 400, "BadRequest"),
        (("GET", "/api/v1/nodes?watch=1&timeoutSeconds=soon"), 400, "BadRequest"),
        (("POST", "/api/v1/namespaces/default/pods", b"{not json"), 400, "BadRequest"),
        (
            ("POST", "/api/v1/namespaces/default/pods", {"metadata": {"name": "x"}, "spec": {}}),
            422,
            "Invalid",
        ),
        (
            (
                "POST",
                "/api/v1/namespaces/default/pods",
                {"metadata": {"name": "Bad_Name"}, "spec": POD["spec"]},
            ),
            422,
            "Invalid",
        ),
        (
            (
                "POST",
                "/apis/apps/v1/namespaces/default/replicasets",
                {"metadata": {"name": "r"}, "spec": {}},
            ),
            422,
            "Invalid",
        ),
        (("POST", "/api/v1/namespaces/nowhere/pods", POD), 404, "NotFound"),
        (("GET", "/apis/nope.example.com/v1"), 404, "NotFound"),
        (("PATCH", "/api/v1/nodes/n1", {"metadata": {}}), 415, "UnsupportedMediaType"),
        (("GET", "/api/v1/namespaces/default/bindings"), 405, "MethodNotAllowed"),
        (("DELETE", "/apis/metrics.k8s.io/v1beta1/nodes/n1"), 405, "MethodNotAllowed"),
        (("GET", "/api/v1/nodes/n1/eviction"), 404, "NotFound"),
    ]
    for args, code, reason in cases:
        status, body = c.request(*args)
        assert (status, body["code"], body["reason"], body["kind"]) == (
            code,
            code,
            reason,
            "Status",
        ), (args, body)
    assert c.request("POST", "/api/v1/namespaces/default/pods", POD)[0] == 201
    status, body = c.request("POST", "/api/v1/namespaces/default/pods", POD)
    assert (status, body["reason"]) == (409, "AlreadyExists")


def test_protobuf_is_refused_with_406(facade):
    status, body = RawClient(facade).request(
        "GET", "/api/v1/nodes", headers={"Accept": "application/vnd.kubernetes.protobuf"}
    )
    assert status == 406 and "protobuf" in body["message"]
    status, _ = RawClient(facade).request(
        "GET",
        "/api/v1/nodes",
        headers={"Accept": "application/vnd.kubernetes.protobuf, application/json"},
    )
    assert status == 200


def test_eviction_body_without_apiversion_and_kind_is_accepted(facade):
    facade.store.create("pods", {**POD, "metadata": {"name": "victim", "namespace": "default"}})
    c = RawClient(facade)
    status, body = c.request(
        "POST", "/api/v1/namespaces/default/pods/victim/eviction", {"metadata": {"name": "victim"}}
    )
    assert status == 201 and body["status"] == "Success"
    assert facade.store.get_or_none("pods", "default", "victim") is None
    facade.store.create("pods", {**POD, "metadata": {"name": "v2", "namespace": "default"}})
    status, _ = c.request(
        "POST",
        "/api/v1/namespaces/default/pods/v2/eviction",
        {"apiVersion": "policy/v1beta1", "kind": "Eviction", "metadata": {"name": "v2"}},
    )
    assert status == 201


def test_binding_returns_status_and_hooks_can_refuse(facade):
    refused = []

    def on_bind(ns, pod, node):
        if node == "full":
            refused.append(pod)
            raise ApiError(422, f"node {node} cannot take pod {pod}")

    facade.api.hooks = Hooks(on_bind=on_bind)
    facade.store.create("pods", {**POD, "metadata": {"name": "b", "namespace": "default"}})
    c = RawClient(facade)
    target = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "b"},
        "target": {"kind": "Node", "name": "full"},
    }
    status, body = c.request("POST", "/api/v1/namespaces/default/bindings", target)
    assert (status, body["message"], refused) == (422, "node full cannot take pod b", ["b"])
    assert "nodeName" not in facade.store.get("pods", "default", "b")["spec"]
    target["target"]["name"] = "n1"
    status, body = c.request("POST", "/api/v1/namespaces/default/pods/b/binding", target)
    assert status == 201 and body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
    assert facade.store.get("pods", "default", "b")["spec"]["nodeName"] == "n1"


def test_watch_resume_from_compacted_version_reports_410_as_error_event(facade):
    facade.store.create("pods", {**POD, "metadata": {"name": "w", "namespace": "default"}})
    old = facade.store.resource_version
    for i in range(10):
        facade.store.patch("pods", "default", "w", {"metadata": {"labels": {"i": str(i)}}})
    c = RawClient(facade)
    c.send("GET", f"/api/v1/namespaces/default/pods?watch=1&resourceVersion={old}")
    assert c.head()[0] == 200
    event = c.event()
    assert (
        event["type"] == "ERROR"
        and event["object"]["code"] == 410
        and event["object"]["reason"] == "Expired"
    )
    assert c.chunk() == b""  # the stream ends
    recent = facade.store.resource_version - 2
    c.send(
        "GET", f"/api/v1/namespaces/default/pods?watch=1&resourceVersion={recent}&timeoutSeconds=1"
    )
    c.head()
    assert [c.event()["object"]["metadata"]["labels"]["i"] for _ in range(2)] == ["8", "9"]


def test_list_pagination_with_limit_and_continue(facade):
    for i in range(5):
        facade.store.create("nodes", make_node(f"m{i}"))
    c = RawClient(facade)
    names, token = [], ""
    while True:
        status, body = c.request("GET", f"/api/v1/nodes?limit=2&continue={token}")
        names += [i["metadata"]["name"] for i in body["items"]]
        token = body["metadata"].get("continue")
        if not token:
            break
    assert names == ["m0", "m1", "m2", "m3", "m4", "n1"]


# --- the quiescence ledger ---------------------------------------------------------------


def test_ledger_counts_request_and_response_bytes_exactly(facade):
    c = RawClient(facade)
    assert facade.connection_idle(c.port, 0, 0)
    c.request("GET", "/api/v1/nodes")
    assert wait_idle(facade, c)
    state = facade.connections()[c.port]
    assert (state["received"], state["written"], state["last_request"]) == (
        c.sent,
        c.consumed,
        "GET /api/v1/nodes",
    )
    assert not facade.connection_idle(c.port, c.sent, c.consumed - 1)
    assert not facade.connection_idle(c.port, c.sent + 1, c.consumed)
    assert not facade.connection_idle(c.port + 1 if c.port < 65535 else c.port - 1, 10, 0)


def test_ledger_marks_a_parked_watch_busy_before_publish_returns(facade):
    clock = facade.clock
    c = RawClient(facade)
    c.send(
        "GET",
        "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=100&allowWatchBookmarks=true",
    )
    assert c.head()[0] == 200
    assert wait_idle(facade, c), "a watch with nothing to deliver is parked, i.e. idle"
    assert facade.token_stats("sched").watches == 1 and facade.token_stats("sched").in_flight == 0
    facade.store.create("pods", {**POD, "metadata": {"name": "x", "namespace": "default"}})
    # No window: the event is accounted for before create() returned.
    assert not facade.connection_idle(c.port, c.sent, c.consumed)
    assert c.event()["type"] == "ADDED"
    assert wait_idle(facade, c)
    clock.advance(60 * 10**9)  # bookmark due
    assert not facade.connection_idle(c.port, c.sent, c.consumed)
    bookmark = c.event()
    assert bookmark["type"] == "BOOKMARK"
    assert bookmark["object"]["metadata"]["resourceVersion"] == str(facade.store.resource_version)
    assert wait_idle(facade, c)
    clock.advance_to(98 * 10**9)  # 2 s before the end: a last bookmark (the watch cache's)
    assert not facade.connection_idle(c.port, c.sent, c.consumed)
    assert c.event()["type"] == "BOOKMARK"
    assert wait_idle(facade, c)
    clock.advance_to(100 * 10**9)  # the timeout ends the stream
    assert not facade.connection_idle(c.port, c.sent, c.consumed)
    assert c.chunk() == b""
    assert wait_idle(facade, c)


def test_a_response_too_big_for_the_socket_buffers_is_ready_while_it_is_written(facade):
    """A deterministic-mode client reads a response only once the broker sees the
    connection "ready"; while the server still blocks writing a response the kernel
    cannot buffer whole (a 10,000-node list), the connection must not look "busy" — that
    was a deadlock (seen relisting 10,000 nodes after a 410)."""
    big = {"metadata": {"name": "big", "namespace": "default"}, "data": {"x": "y" * (48 << 20)}}
    facade.store.create("configmaps", big)
    c = RawClient(facade)
    c.send("GET", "/api/v1/namespaces/default/configmaps/big")
    status, headers = c.head()  # a first part arrived; the rest waits in the server
    assert status == 200
    changed = threading.Event()
    facade.add_idle_listener(lambda port: changed.set() if port == c.port else None)
    deadline = time.monotonic() + 10
    state = facade.connection_state(c.port, c.sent, c.consumed)
    while state == "busy" and time.monotonic() < deadline:
        changed.wait(0.05)
        changed.clear()
        state = facade.connection_state(c.port, c.sent, c.consumed)
    assert state == "ready"
    c.sock.settimeout(30)
    body = json.loads(c._take(int(headers["content-length"])))
    assert len(body["data"]["x"]) == 48 << 20
    assert wait_idle(facade, c)


def test_watch_timeout_is_virtual_and_ends_the_stream(facade):
    clock = facade.clock
    c = RawClient(facade)
    c.send("GET", "/api/v1/nodes?watch=1&timeoutSeconds=30")
    c.head()
    assert c.event()["type"] == "ADDED"
    assert wait_idle(facade, c)
    clock.advance(29 * 10**9)
    assert facade.connection_idle(c.port, c.sent, c.consumed), "29 virtual seconds: still parked"
    clock.advance(1 * 10**9)
    assert not facade.connection_idle(c.port, c.sent, c.consumed)
    assert c.chunk() == b""
    assert wait_idle(facade, c)
    assert facade.token_stats("sched").watches == 0
    status, _ = c.request("GET", "/api/v1/nodes")  # the connection is reusable
    assert status == 200


def test_client_that_goes_away_detaches_its_watch(facade):
    c = RawClient(facade)
    c.send("GET", "/api/v1/nodes?watch=1")
    c.head()
    c.event()
    assert wait_idle(facade, c)
    assert facade.store.watcher_count() == 1
    closed = threading.Event()
    facade.add_idle_listener(lambda port: closed.set() if port == c.port else None)
    c.close()
    # The server polls for vanished clients twice a second, then closes and notifies.
    assert closed.wait(5)
    assert facade.store.watcher_count() == 0
    assert facade.token_stats("sched").watches == 0


def test_small_requests_do_not_stall_on_delayed_acks(facade):
    c = RawClient(facade)
    c.request("GET", "/api/v1/nodes")
    started = time.perf_counter()
    for _ in range(50):
        c.request("GET", "/api/v1/nodes/n1")
    per_request = (time.perf_counter() - started) / 50
    assert per_request < 0.03, (
        f"{per_request * 1000:.1f} ms per request (a 40 ms stall means Nagle/delayed ACK)"
    )


# --- in-cluster configuration over HTTPS -------------------------------------------------

INCLUSTER_SCRIPT = """
import sys
from broker.facade import redirect_incluster_config
from kubernetes import client, config
assert redirect_incluster_config()
config.load_incluster_config()
names = [n.metadata.name for n in client.CoreV1Api().list_node().items]
print(",".join(names))
"""


@pytest.mark.parametrize("old", [False, True], ids=["client-37", "client-24"])
def test_load_incluster_config_reaches_the_facade_over_https(tmp_path, subprocess_env, old):
    if old and not (OLD_CLIENT / "kubernetes").is_dir():
        pytest.skip("run scripts/setup-venv.sh: .venv/k8s24 missing")
    f = Facade(ManualClock(), tls=True)
    f.store.create("nodes", make_node("secure-node"))
    env = dict(subprocess_env)
    env.update(f.write_incluster(tmp_path / "sa", "incluster-scheduler"))
    if old:
        env["PYTHONPATH"] = os.pathsep.join([str(OLD_CLIENT), str(ROOT)])
    with f:
        assert f.url.startswith("https://")
        out = subprocess.run(
            [sys.executable, "-c", INCLUSTER_SCRIPT],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "secure-node"
    assert f.token_stats("incluster-scheduler").requests == 1


def test_chunked_request_bodies_and_connection_close(facade):
    c = RawClient(facade)
    body = json.dumps({"metadata": {"name": "chunky"}, "spec": POD["spec"]}).encode()
    half = len(body) // 2
    raw = (
        f"POST /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {facade.token}\r\n"
        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    ).encode()
    raw += f"{half:x}\r\n".encode() + body[:half] + b"\r\n"
    raw += f"{len(body) - half:x}\r\n".encode() + body[half:] + b"\r\n0\r\n\r\n"
    c.sock.sendall(raw)
    c.sent += len(raw)
    status, created = c.response()
    assert status == 201 and created["metadata"]["name"] == "chunky"
    assert c.sock.recv(1) == b"", "Connection: close is honoured"


def test_malformed_request_line_is_400_and_closes(facade):
    c = RawClient(facade)
    c.sock.sendall(b"NONSENSE\r\n\r\n")
    status, body = c.response()
    assert status == 400 and "request line" in body["message"]
    assert c.sock.recv(1) == b""


def test_subresource_verbs_are_checked(facade):
    facade.store.create("pods", {**POD, "metadata": {"name": "s", "namespace": "default"}})
    c = RawClient(facade)
    assert c.request("GET", "/api/v1/namespaces/default/pods/s/binding")[0] == 405
    assert c.request("DELETE", "/api/v1/namespaces/default/pods/s/status")[0] == 405
    status, pod = c.request("GET", "/api/v1/namespaces/default/pods/s/status")
    assert status == 200 and pod["status"]["phase"] == "Pending"
    status, pod = c.request(
        "PATCH",
        "/api/v1/namespaces/default/pods/s/status",
        {"status": {"phase": "Running"}, "spec": {"nodeName": "sneaky"}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert status == 200 and pod["status"]["phase"] == "Running" and "nodeName" not in pod["spec"]
    status, body = c.request(
        "PATCH",
        "/api/v1/namespaces/default/pods/s",
        {"spec": {"nodeName": "sneaky"}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert status == 422 and "binding" in body["message"]


def test_send_initial_events_ends_with_the_marked_bookmark(facade):
    c = RawClient(facade)
    c.send(
        "GET",
        "/api/v1/nodes?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
    )
    c.head()
    assert c.event()["type"] == "ADDED"
    bookmark = c.event()
    assert bookmark["type"] == "BOOKMARK"
    assert bookmark["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert bookmark["object"]["metadata"]["resourceVersion"] == str(facade.store.resource_version)


def test_legacy_watch_paths_and_single_object_watch(facade):
    facade.store.create("pods", {**POD, "metadata": {"name": "one", "namespace": "default"}})
    facade.store.create("pods", {**POD, "metadata": {"name": "two", "namespace": "default"}})
    c = RawClient(facade)
    c.send("GET", "/api/v1/watch/namespaces/default/pods/two")
    c.head()
    assert c.event()["object"]["metadata"]["name"] == "two"
    facade.store.patch("pods", "default", "one", {"metadata": {"labels": {"x": "y"}}})
    facade.store.patch("pods", "default", "two", {"metadata": {"labels": {"x": "y"}}})
    event = c.event()
    assert (event["type"], event["object"]["metadata"]["name"]) == ("MODIFIED", "two")


def test_delete_collection_and_namespace_cascade(facade):
    c = RawClient(facade)
    assert c.request("POST", "/api/v1/namespaces", {"metadata": {"name": "team"}})[0] == 201
    for name in ("a", "b"):
        body = {"metadata": {"name": name, "labels": {"k": name}}, "data": {"x": "1"}}
        assert c.request("POST", "/api/v1/namespaces/team/configmaps", body)[0] == 201
        assert (
            c.request("POST", "/api/v1/namespaces/team/pods", {**POD, "metadata": {"name": name}})[
                0
            ]
            == 201
        )
    assert c.request("DELETE", "/api/v1/namespaces/team/configmaps?labelSelector=k%3Da")[0] == 200
    assert [
        i["metadata"]["name"]
        for i in c.request("GET", "/api/v1/namespaces/team/configmaps")[1]["items"]
    ] == ["b"]
    status, body = c.request("DELETE", "/api/v1/namespaces/team")
    # as the real server: the namespace, Terminating (its content is deleted, then it)
    assert status == 200 and body["metadata"]["name"] == "team"
    assert body["status"]["phase"] == "Terminating"
    assert c.request("GET", "/api/v1/namespaces/team/pods")[1]["items"] == []
    assert c.request("GET", "/api/v1/namespaces/team")[0] == 404


KUBECONFIG_SCRIPT = """
from kubernetes import client, config
config.load_kube_config()
print(",".join(n.metadata.name for n in client.CoreV1Api().list_node().items))
"""


@pytest.mark.parametrize("old", [False, True], ids=["client-37", "client-24"])
def test_unmodified_load_kube_config_with_KUBECONFIG(tmp_path, subprocess_env, old):
    if old and not (OLD_CLIENT / "kubernetes").is_dir():
        pytest.skip("run scripts/setup-venv.sh: .venv/k8s24 missing")
    f = Facade(ManualClock())
    f.store.create("nodes", make_node("plain-node"))
    env = dict(subprocess_env, KUBECONFIG=str(f.write_kubeconfig(tmp_path / "kc", "proc-1")))
    if old:
        env["PYTHONPATH"] = os.pathsep.join([str(OLD_CLIENT), str(ROOT)])
    with f:
        out = subprocess.run(
            [sys.executable, "-c", KUBECONFIG_SCRIPT],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "plain-node"
    assert f.token_stats("proc-1").requests == 1


def test_queued_watch_events_are_owed_to_their_reader_before_they_are_written(facade, monkeypatch):
    """What the broker needs to let deterministic readers go: data waiting on a watch says
    "streaming" where a response says "ready" (responses are let go first), and events
    published but not yet written by the connection's thread are owed all the same
    (``written`` counts them, framed): a reader let go reads exactly them, however late
    that thread writes — a loaded machine never decides how much it reads."""
    from broker.facade.server import HttpServer

    w = RawClient(facade)
    w.send("GET", "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=100")
    assert w.head()[0] == 200
    assert wait_idle(facade, w)
    gate = threading.Event()
    send_batch = HttpServer._send_batch

    def late(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        assert gate.wait(10), "the test never opened the gate"
        return send_batch(self, *args, **kwargs)

    monkeypatch.setattr(HttpServer, "_send_batch", late)
    for name in ("a", "b", "c"):
        facade.store.create("pods", {**POD, "metadata": {"name": name, "namespace": "default"}})
    assert facade.connection_state(w.port, w.sent, w.consumed) == "streaming"
    owed = facade.ledger.written(w.port)
    assert owed > w.consumed
    gate.set()
    assert [w.event()["type"] for _ in range(3)] == ["ADDED"] * 3
    assert w.consumed == owed and not w.buf  # exactly what was owed, framed as written
    assert wait_idle(facade, w)
    r = RawClient(facade)
    r.send("GET", "/api/v1/namespaces/default/pods/a")
    changed = threading.Event()
    facade.add_idle_listener(lambda port: changed.set())
    deadline = time.monotonic() + 5
    while facade.connection_state(r.port, r.sent, r.consumed) == "busy":
        assert time.monotonic() < deadline, "the response was never written"
        changed.wait(0.05)
        changed.clear()
    assert facade.connection_state(r.port, r.sent, r.consumed) == "ready"
    assert r.response()[0] == 200
    conn = next(c for c in facade.ledger._conns.values() if c.peer_port == w.port)
    with facade.ledger.lock:
        conn.queued += 1  # a frame that owes no byte (an HTTP/1.0 stream's end)
    try:
        assert facade.connection_state(w.port, w.sent, w.consumed) == "flushing"
    finally:
        with facade.ledger.lock:
            conn.queued -= 1


def test_framed_sizes_are_what_the_wire_carries():
    """The ledger's count of queued frames is the bytes written for them: a chunk, the
    chunked end as h11 writes it, bare frames and nothing at the end on HTTP/1.0."""
    import h11

    from broker.facade.server import CHUNKED_END, _chunk, framed_size
    from broker.facade.watch import END

    frame = b'{"type":"ADDED","object":{}}\n'
    assert framed_size(frame, chunked=True) == len(_chunk(frame))
    assert framed_size(frame, chunked=False) == len(frame)
    assert framed_size(END, chunked=False) == 0
    assert framed_size(None, chunked=True) == 0
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    conn.next_event(), conn.next_event()
    conn.send(h11.Response(status_code=200, headers=[("Transfer-Encoding", "chunked")]))
    assert conn.send(h11.EndOfMessage()) == CHUNKED_END
    assert framed_size(END, chunked=True) == len(CHUNKED_END)


# --- watch events written by the committing thread (deterministic mode) ----------------


def _parked_watch(facade: Facade) -> RawClient:
    w = RawClient(facade)
    w.send("GET", "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=100")
    assert w.head()[0] == 200
    assert wait_idle(facade, w)
    return w


def test_direct_watch_writes_are_sent_before_the_commit_returns(facade):
    facade.write_watch_events_directly()
    w = _parked_watch(facade)
    for name in ("a", "b", "c"):
        facade.store.create("pods", {**POD, "metadata": {"name": name, "namespace": "default"}})
        # on the wire already: nothing left for the stream's thread ("flushing")
        assert facade.connection_state(w.port, w.sent, w.consumed) == "streaming"
    assert [w.event()["object"]["metadata"]["name"] for _ in range(3)] == ["a", "b", "c"]
    assert wait_idle(facade, w)


def test_direct_watch_writes_a_full_socket_cannot_take_are_finished_in_order(facade):
    """A client that does not read: the first events fill the socket buffers, the rest of
    a frame and the events after it wait for the stream's thread — owed to the client all
    the same, so the connection says "streaming" and ``written`` counts them — and the
    client then reads every event, whole and in order, exactly what was owed."""
    facade.write_watch_events_directly()
    w = _parked_watch(facade)
    filler = "x" * (256 << 10)
    names = [f"p{i:02d}" for i in range(40)]  # ~10 MiB: more than the kernel buffers
    states = set()
    for name in names:
        pod = {**POD, "metadata": {"name": name, "namespace": "default"}, "filler": filler}
        facade.store.create("pods", pod)
        states.add(facade.connection_state(w.port, w.sent, w.consumed))
    assert states == {"streaming"}
    owed = facade.ledger.written(w.port)
    w.sock.settimeout(30)
    got = []
    for _ in names:
        event = w.event()
        assert event["type"] == "ADDED" and event["object"]["filler"] == filler
        got.append(event["object"]["metadata"]["name"])
    assert got == names
    assert w.consumed == owed and not w.buf
    assert wait_idle(facade, w)
    facade.store.create("pods", {**POD, "metadata": {"name": "after", "namespace": "default"}})
    assert facade.connection_state(w.port, w.sent, w.consumed) == "streaming"
    assert w.event()["object"]["metadata"]["name"] == "after"
    assert wait_idle(facade, w)


def test_a_direct_watch_ends_with_its_timeout_after_its_events(facade):
    facade.write_watch_events_directly()
    w = _parked_watch(facade)
    facade.store.create("pods", {**POD, "metadata": {"name": "a", "namespace": "default"}})
    facade.clock.advance_to(100 * 10**9)  # the timeout ends the stream
    assert w.event()["object"]["metadata"]["name"] == "a"
    assert w.chunk() == b""
    assert wait_idle(facade, w)
    assert w.request("GET", "/api/v1/namespaces/default/pods/a")[0] == 200  # reusable


def test_requests_wait_for_the_cluster_when_the_facade_is_told_to_hold_them():
    """Under `timewarp simulate` the schedulers start before SIMULATION_BEGINS brings the
    nodes: a program that lists the nodes once, at start, must see them, as it would on a
    real cluster (lightkube_binder saw none, now and then, on a loaded machine)."""
    import select

    f = Facade(ManualClock(), hold_until_cluster=True)
    f.token = f.add_token("sched")
    with f:
        client = RawClient(f)
        client.send("GET", "/api/v1/nodes")
        # held: no answer, and the connection counts as busy (not quiescent) meanwhile
        assert select.select([client.sock], [], [], 0.5)[0] == []
        assert not f.connection_idle(client.port, client.sent, client.consumed)
        f.store.create("nodes", make_node("n1"))
        f.cluster_ready()
        status, body = client.response()
        assert status == 200
        assert [n["metadata"]["name"] for n in body["items"]] == ["n1"]
        client.close()


def test_a_facade_stopped_before_the_cluster_exists_answers_what_it_held():
    f = Facade(ManualClock(), hold_until_cluster=True)
    f.token = f.add_token("sched")
    f.start()
    client = RawClient(f)
    client.send("GET", "/api/v1/nodes")
    stopper = threading.Thread(target=f.stop)
    stopper.start()
    stopper.join(30)
    assert not stopper.is_alive()
    client.close()
