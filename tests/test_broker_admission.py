"""When the kubelet model admits a bound pod. In deterministic mode the binding request
itself admits it (``Cluster.admit_bindings_at_once``): the scheduler finds its pod
Running, and the job started for the simulator, by the time it reads the answer, with the
watch events in the order a kubelet would cause them. Otherwise (lockstep, realtime) the
binding is recorded and admitted at the broker's next ``process()``."""

from __future__ import annotations

import pytest
from test_facade_http import RawClient, wait_idle

from broker.cluster.cluster import Cluster
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


# --------------------------------------------------------------------------- shapes


def _shaped_world(props: dict, at_once: bool = True):
    facade = Facade(ManualClock())
    facade.token = facade.add_token("sched")
    cluster = Cluster(facade, facade.clock.now_ns)
    host = {"id": 0, "name": "node-0", "properties": props}
    cluster.begin(simulation_begins([host], {"job": {"type": "delay", "delay": 10}}))
    cluster.admit_bindings_at_once(at_once)
    return facade, cluster


def _submit(cluster: Cluster, i: int, **fields) -> tuple[str, str]:
    job = {"id": f"w0!{i}", "profile": "job", **fields}
    cluster.submit(p.JobSubmitted(f"w0!{i}", job))
    cluster.process()
    jp = cluster.jobs[f"w0!{i}"]
    return jp.namespace, jp.name


def test_a_gpu_pod_beyond_the_nodes_gpus_fails_OutOf_its_resource_with_a_kubelet_event():
    facade, cluster = _shaped_world({"core": "8", "gpu": "2"})
    with facade:
        client = RawClient(facade)
        pods = [_submit(cluster, i, requests={"nvidia.com/gpu": 2}) for i in range(2)]
        limits = facade.store.get("pods", *pods[0])["spec"]["containers"][0]["resources"]
        assert limits == {
            "requests": {"cpu": "1", "nvidia.com/gpu": "2"},
            "limits": {"nvidia.com/gpu": "2"},  # an extended resource: limit = request
        }
        for ns, name in pods:
            assert _bind(client, ns, name) == 201
        assert [_phase(facade, *pod) for pod in pods] == ["Running", "Failed"]
        failed = facade.store.get("pods", *pods[1])["status"]
        assert failed["reason"] == "OutOfnvidia.com/gpu"
        assert failed["message"] == (
            "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, "
            "requested: 2, used: 2, capacity: 2"
        )
        events, _ = facade.store.list("events", "default")
        story = [e for e in events if e["involvedObject"]["name"] == pods[1][1]]
        # the scheduler's Scheduled (the binding went through), then the kubelet's refusal
        assert [e["reason"] for e in story] == ["Scheduled", "OutOfnvidia.com/gpu"]
        event = story[1]
        assert (event["type"], event["reason"], event["source"]) == (
            "Warning",
            "OutOfnvidia.com/gpu",
            {"component": "kubelet"},
        )
        assert [type(d).__name__ for d in cluster.take_decisions()] == ["ExecuteJob", "RejectJob"]


def test_a_binding_to_a_cordoned_node_runs_as_on_a_real_cluster():
    """Cordoning is the scheduler's business (NodeUnschedulable): a kubelet runs what is
    bound to it, NoSchedule taints included."""
    facade, cluster = _shaped_world({"unschedulable": "true", "taints": "team=a:NoSchedule"})
    with facade:
        node = facade.store.get("nodes", None, "node-0")
        assert node["spec"]["unschedulable"] is True
        assert {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"} in node["spec"][
            "taints"
        ]
        ns, name = _submit(cluster, 0)
        assert _bind(RawClient(facade), ns, name) == 201
        assert _phase(facade, ns, name) == "Running"


def test_a_NoExecute_taint_refuses_a_pod_that_does_not_tolerate_it():
    facade, cluster = _shaped_world({"taints": "maintenance=yes:NoExecute"})
    with facade:
        client = RawClient(facade)
        plain = _submit(cluster, 0)
        tolerant = _submit(
            cluster,
            1,
            tolerations=[{"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}],
        )
        for ns, name in (plain, tolerant):
            assert _bind(client, ns, name) == 201
        status = facade.store.get("pods", *plain)["status"]
        assert (status["phase"], status["reason"], status["message"]) == (
            "Failed",
            "TaintToleration",
            "Pod was rejected: Predicate TaintToleration failed",
        )
        assert _phase(facade, *tolerant) == "Running"


def test_the_kubelet_reads_the_node_labels_as_they_are_now():
    """A scheduler that labels a node through the API (``kubectl label``) then binds a pod
    with that nodeSelector gets it admitted; one that removed the label gets NodeAffinity."""
    facade, cluster = _shaped_world({"core": "4", "labels": "env=staging"})
    with facade:
        client = RawClient(facade)
        first = _submit(cluster, 0, nodeSelector={"env": "prod"})
        second = _submit(cluster, 1, nodeSelector={"env": "staging"})
        status, _ = client.request(
            "PATCH",
            "/api/v1/nodes/node-0",
            {"metadata": {"labels": {"env": "prod"}}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert status == 200
        assert _bind(client, *first) == 201 and _bind(client, *second) == 201
        assert _phase(facade, *first) == "Running"
        assert facade.store.get("pods", *second)["status"]["reason"] == "NodeAffinity"


def test_the_pod_count_is_admitted_against_allocatable_pods_and_released_at_the_end():
    facade, cluster = _shaped_world({"allocatable": "cpu=4,pods=1"})
    with facade:
        client = RawClient(facade)
        pods = [_submit(cluster, i) for i in range(3)]
        assert _bind(client, *pods[0]) == 201 and _bind(client, *pods[1]) == 201
        assert facade.store.get("pods", *pods[1])["status"]["reason"] == "OutOfpods"
        cluster.complete(p.JobCompleted("w0!0", "COMPLETED_SUCCESSFULLY", 0, []))
        assert cluster.nodes["node-0"].used == {"cpu": 0, "pods": 0}
        assert _bind(client, *pods[2]) == 201
        assert _phase(facade, *pods[2]) == "Running"
