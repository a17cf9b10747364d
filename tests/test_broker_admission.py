"""When the kubelet model admits a bound pod. In deterministic mode the binding request
itself admits it (``Cluster.admit_bindings_at_once``): the scheduler finds its pod
Running, and the job started for the simulator, by the time it reads the answer, with the
watch events in the order a kubelet would cause them. Otherwise (lockstep, realtime) the
binding is recorded and admitted at the broker's next ``process()``."""

from __future__ import annotations

import pytest
from test_facade_http import RawClient, wait_idle

from broker.cluster import Cluster
from broker.facade import Facade
from broker.facade.clock import ManualClock
from simulator import protocol as p
from simulator.testing import simulation_begins


def _begin() -> p.SimulationBegins:
    host = {"id": 0, "name": "node-0", "properties": {"core": "2"}}
    return simulation_begins([host], {"one-cpu": {"type": "delay", "delay": 10, "cpu": "1"}})


@pytest.fixture
def world():
    facade = Facade(ManualClock())
    facade.token = facade.add_token("sched")
    cluster = Cluster(facade, facade.clock.now_ns)
    with facade:
        cluster.begin(_begin())
        for i in range(3):
            cluster.submit(p.JobSubmitted(f"w0!{i}", {"id": f"w0!{i}", "profile": "one-cpu"}))
        cluster.process()
        cluster.take_decisions()
        yield facade, cluster


def _pod(cluster: Cluster, i: int) -> tuple[str, str]:
    jp = cluster.jobs[f"w0!{i}"]
    return jp.namespace, jp.name


def _bind(client: RawClient, namespace: str, name: str) -> int:
    status, _ = client.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/pods/{name}/binding",
        {"metadata": {"name": name}, "target": {"kind": "Node", "name": "node-0"}},
    )
    return status


def _phase(facade: Facade, namespace: str, name: str) -> str:
    return facade.store.get("pods", namespace, name)["status"]["phase"]


def test_a_recorded_binding_waits_for_the_next_process(world):
    facade, cluster = world
    ns, name = _pod(cluster, 0)
    client = RawClient(facade)
    assert _bind(client, ns, name) == 201
    assert _phase(facade, ns, name) == "Pending" and cluster.take_decisions() == []
    assert cluster.process()
    assert _phase(facade, ns, name) == "Running"
    assert [type(d).__name__ for d in cluster.take_decisions()] == ["ExecuteJob"]


def test_admitted_within_the_binding_request(world):
    facade, cluster = world
    cluster.admit_bindings_at_once()
    watch = RawClient(facade)
    watch.send(
        "GET",
        "/api/v1/namespaces/default/pods?watch=true&resourceVersion="
        + str(facade.store.resource_version),
    )
    assert watch.head()[0] == 200
    assert wait_idle(facade, watch)
    client = RawClient(facade)
    pods = [_pod(cluster, i) for i in range(3)]
    for ns, name in pods:
        assert _bind(client, ns, name) == 201
        # answered: the kubelet already acted, nothing is left for process()
        assert cluster.process() is False
    # two one-cpu pods fit the two-core node; the kubelet refuses the third
    assert [_phase(facade, ns, name) for ns, name in pods] == ["Running", "Running", "Failed"]
    assert [type(d).__name__ for d in cluster.take_decisions()] == [
        "ExecuteJob",
        "ExecuteJob",
        "RejectJob",
    ]
    assert cluster.stats.rejected_by_kubelet == 1
    # each pod's binding, then the kubelet's reaction to it, before the next binding
    seen = []
    for _ in range(6):
        obj = watch.event()["object"]
        seen.append(
            (obj["metadata"]["name"], bool(obj["spec"].get("nodeName")), obj["status"]["phase"])
        )
    assert seen == [
        (pods[0][1], True, "Pending"),
        (pods[0][1], True, "Running"),
        (pods[1][1], True, "Pending"),
        (pods[1][1], True, "Running"),
        (pods[2][1], True, "Pending"),
        (pods[2][1], True, "Failed"),
    ]


def test_a_refused_binding_admits_nothing(world):
    facade, cluster = world
    cluster.admit_bindings_at_once()
    client = RawClient(facade)
    ns, name = _pod(cluster, 0)
    status, body = client.request(
        "POST",
        f"/api/v1/namespaces/{ns}/pods/{name}/binding",
        {"metadata": {"name": name}, "target": {"kind": "Node", "name": "no-such-node"}},
    )
    assert status == 404 and "no-such-node" in body["message"]
    assert _phase(facade, ns, name) == "Pending" and cluster.take_decisions() == []
    assert _bind(client, ns, name) == 201
    assert _bind(client, ns, name) == 409  # already bound: admitted once only
    assert _phase(facade, ns, name) == "Running"
    assert [type(d).__name__ for d in cluster.take_decisions()] == ["ExecuteJob"]


@pytest.mark.parametrize("at_once", [True, False], ids=["deterministic", "lockstep"])
def test_a_pod_created_then_bound_in_one_step_is_admitted_once(world, at_once):
    """Issue 17 #4: a pod the API created and a scheduler bound before the broker's next
    step was admitted on the "created bound" path and again from the binding — Failed
    OutOfcpu on an empty node, capacity leaked. One admission per pod, in every mode."""
    facade, cluster = world
    cluster.dynamic_jobs = True  # the API pod is a Batsim job (REGISTER_JOB)
    cluster.admit_bindings_at_once(at_once)
    client = RawClient(facade)
    pod = {
        "metadata": {"name": "api-pod", "annotations": {"timewarp.io/duration": "5"}},
        "spec": {
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "2"}}}
            ]
        },
    }
    status, _ = client.request("POST", "/api/v1/namespaces/default/pods", pod)
    assert status == 201
    assert _bind(client, "default", "api-pod") == 201
    while cluster.process():
        pass
    assert _phase(facade, "default", "api-pod") == "Running"
    assert cluster.stats.rejected_by_kubelet == 0 and cluster.stats.bindings == 1
    kinds = [type(d).__name__ for d in cluster.take_decisions()]
    assert kinds == ["RegisterProfile", "RegisterJob", "ExecuteJob"]
    assert cluster.nodes["node-0"].used_cpu_m == 2000  # taken once, not twice
