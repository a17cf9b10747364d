"""Issue 17 #11: deleting a namespace deletes its pods through the same path as a pod
delete — running jobs killed, pending ones rejected, capacity released, no ReplicaSet
replacement — in the real server's order: Terminating, content, finalizer, gone."""

from __future__ import annotations

import pytest
from test_facade_http import RawClient

from broker.cluster.cluster import Cluster
from broker.facade import Facade
from broker.facade.clock import ManualClock
from simulator import protocol as p
from simulator.testing import simulation_begins


@pytest.fixture
def world():
    facade = Facade(ManualClock())
    facade.token = facade.add_token("sched")
    cluster = Cluster(facade, facade.clock.now_ns)
    host = {"id": 0, "name": "node-0", "properties": {"core": "2"}}
    cluster.begin(simulation_begins([host], {"job": {"type": "delay", "delay": 10}}))
    cluster.admit_bindings_at_once()
    with facade:
        yield facade, cluster


def _submit(cluster, i, **fields):
    cluster.submit(p.JobSubmitted(f"w0!{i}", {"id": f"w0!{i}", "profile": "job", **fields}))
    cluster.process()
    jp = cluster.jobs[f"w0!{i}"]
    return jp.namespace, jp.name


def _bind(client, namespace, name):
    status, _ = client.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/pods/{name}/binding",
        {"metadata": {"name": name}, "target": {"kind": "Node", "name": "node-0"}},
    )
    assert status == 201


def test_deleting_a_namespace_kills_its_jobs_and_frees_its_nodes(world):
    facade, cluster = world
    client = RawClient(facade)
    running = _submit(cluster, 0, namespace="team")
    owned = _submit(cluster, 1, namespace="team", replicaset="web")
    pending = _submit(cluster, 2, namespace="team")
    elsewhere = _submit(cluster, 3)
    for pod in (running, owned):
        _bind(client, *pod)
    cluster.take_decisions()
    assert cluster.nodes["node-0"].used == {"cpu": 2000, "pods": 2}
    watch = RawClient(facade)
    rv = facade.store.resource_version
    watch.send("GET", f"/api/v1/namespaces?watch=true&resourceVersion={rv}")
    assert watch.head()[0] == 200
    pods_watch = RawClient(facade)
    pods_watch.send("GET", f"/api/v1/namespaces/team/pods?watch=true&resourceVersion={rv}")
    assert pods_watch.head()[0] == 200

    status, body = client.request("DELETE", "/api/v1/namespaces/team")
    assert status == 200
    assert body["kind"] == "Namespace" and body["status"]["phase"] == "Terminating"
    assert body["metadata"]["deletionTimestamp"]
    while cluster.process():
        pass

    decisions = cluster.take_decisions()
    assert [(type(d).__name__, getattr(d, "job_ids", None) or d.job_id) for d in decisions] == [
        ("KillJob", ["w0!0"]),
        ("KillJob", ["w0!1"]),
        ("RejectJob", "w0!2"),
    ]
    assert cluster.nodes["node-0"].used == {"cpu": 0, "pods": 0}
    assert cluster.stats.replacements == 0  # its ReplicaSet went with the namespace
    assert facade.store.get_or_none("namespaces", None, "team") is None
    assert facade.store.get("pods", *elsewhere)["status"]["phase"] == "Pending"
    ns_events = [(e["type"], e["object"]["status"].get("phase"),
                  e["object"]["spec"].get("finalizers")) for e in
                 (watch.event() for _ in range(3))]  # fmt: skip
    assert ns_events == [
        ("MODIFIED", "Terminating", ["kubernetes"]),
        ("MODIFIED", "Terminating", []),
        ("DELETED", "Terminating", []),
    ]
    deleted, seen = [], []
    while len(deleted) < 3 and len(seen) < 20:
        event = pods_watch.event()
        seen.append((event["type"], event["object"]["metadata"]["name"]))
        if event["type"] == "DELETED":
            deleted.append(event["object"]["metadata"]["name"])
    assert sorted(deleted) == sorted(name for _, name in (running, owned, pending)), seen
    # the running ones went as a DELETE takes them: Terminating first, then gone
    assert ("MODIFIED", running[1]) in seen[: seen.index(("DELETED", running[1]))]


def test_content_cannot_be_created_in_a_terminating_namespace(world):
    facade, _ = world
    client = RawClient(facade)
    assert client.request("POST", "/api/v1/namespaces", {"metadata": {"name": "t"}})[0] == 201
    facade.store.terminate_namespace("t")
    pod = {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    status, body = client.request("POST", "/api/v1/namespaces/t/pods", pod)
    assert status == 403 and body["reason"] == "Forbidden"
    assert body["message"] == (
        'pods "x" is forbidden: unable to create new content in namespace t because it is '
        "being terminated"
    )


@pytest.mark.parametrize("name", ["default", "kube-system", "kube-public"])
def test_the_built_in_namespaces_may_not_be_deleted(world, name):
    facade, _ = world
    status, body = RawClient(facade).request("DELETE", f"/api/v1/namespaces/{name}")
    assert status == 403
    assert body["message"] == f'namespaces "{name}" is forbidden: this namespace may not be deleted'


def test_the_namespace_stays_terminating_until_its_pods_containers_stopped(world):
    """Pods go as a DELETE takes them — gracefully: a pod whose app needs 20 s to shut
    down keeps the namespace Terminating (the controller looks again after the grace
    period, in virtual time) and its job runs until it exits."""
    facade, cluster = world
    client = RawClient(facade)
    slow = _submit(
        cluster,
        0,
        namespace="team",
        replicaset="web",
        annotations={"timewarp.io/shutdown-seconds": "20"},
    )
    _bind(client, *slow)
    cluster.take_decisions()
    assert client.request("DELETE", "/api/v1/namespaces/team")[0] == 200
    while cluster.process():
        pass
    assert facade.store.get("pods", *slow)["metadata"]["deletionTimestamp"]
    assert facade.store.get("namespaces", None, "team")["status"]["phase"] == "Terminating"
    assert cluster.take_decisions() == []  # still running: its app is shutting down
    facade.clock.advance(20 * 10**9)
    while cluster.process():
        pass
    assert facade.store.get_or_none("pods", *slow) is None
    assert [type(d).__name__ for d in cluster.take_decisions()] == ["KillJob"]
    assert cluster.stats.replacements == 0  # its ReplicaSet went first, with the namespace
    assert cluster.nodes["node-0"].used == {"cpu": 0, "pods": 0}
    facade.clock.advance(10 * 10**9)  # the controller's next look (the 30 s grace period)
    assert facade.store.get_or_none("namespaces", None, "team") is None
