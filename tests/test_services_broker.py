"""The broker's side of services with traffic: the Deployment and HPA appear at start,
the service's pods get the traffic while they run and are Ready, their usage reaches
metrics.k8s.io and their concurrency custom.metrics.k8s.io on the metrics tick — read
back through the official client — and the simulation is kept alive until the traffic
ends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from broker.cluster.cluster import Cluster
from broker.cluster.traffic_driver import TrafficDriver, replica_state
from broker.facade import Facade, ManualClock
from simulator.testing import simulation_begins
from simulator.workload import load_workload

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "inputs" / "service_step" / "workload.json"


def spec(tmp_path: Path, **traffic):
    doc = json.loads(EXAMPLE.read_text())
    service = doc["services"][0]
    service["traffic"] = {"type": "constant", "rate": 10, "duration": 120, **traffic}
    service["startup_delay"] = 0  # pods Ready at their binding: the ticks below are exact
    file = tmp_path / "w.json"
    file.write_text(json.dumps(doc))
    return load_workload(file, "w0", 8).services[0]


def make_cluster(tmp_path: Path, **traffic):
    clock = ManualClock()
    facade = Facade(clock)
    cluster = Cluster(facade, clock.now_ns)
    cluster.services = TrafficDriver([spec(tmp_path, **traffic)], facade.store, clock)
    hosts = [
        {"id": i, "name": f"node{i}", "properties": {"core": "4", "memory": "16Gi"}}
        for i in range(8)
    ]
    cluster.begin(simulation_begins(hosts, {}, workload="w0"))
    return clock, facade, cluster


def settle(facade: Facade, cluster: Cluster) -> list[str]:
    """Let the controllers act, bind every pending pod (a first-fit scheduler, node by
    node) and let the kubelet model admit them; returns the service's pod names."""
    nodes = sorted(cluster.nodes)
    for _ in range(10):
        while cluster.process():
            pass
        pending = facade.store.list("pods", "default", field_selector="spec.nodeName=")[0]
        if not pending:
            break
        for pod in sorted(pending, key=lambda q: q["metadata"]["name"]):
            node = min(nodes, key=lambda n: cluster.nodes[n].used_cpu_m)
            name = pod["metadata"]["name"]
            cluster.inbox.on_bind("default", name, node)
            facade.store.bind("default", name, node)
    cluster.refresh_metrics()
    return sorted(p["metadata"]["name"] for p in facade.store.list("pods", "default")[0])


def advance(clock: ManualClock, cluster: Cluster, t_ns: int) -> None:
    """Time moves as the broker moves it: the cluster's due work, then the metrics."""
    clock.advance_to(t_ns)
    while cluster.process():
        pass
    cluster.refresh_metrics()


def scale(facade: Facade, replicas: int) -> None:
    def set_replicas(obj):
        obj["spec"]["replicas"] = replicas

    facade.store.update("deployments.apps", "default", "web", set_replicas)


def test_the_deployment_and_the_hpa_are_there_at_start(tmp_path) -> None:
    _clock, facade, cluster = make_cluster(tmp_path)
    dep = facade.store.get("deployments.apps", "default", "web")
    assert dep["spec"]["replicas"] == 1
    assert (
        dep["spec"]["template"]["metadata"]["annotations"]["timewarp.io/container-start-seconds"]
        == "0"
    )
    assert dep["spec"]["template"]["metadata"]["annotations"]["timewarp.io/serve-until"] == "120"
    hpa = facade.store.get("horizontalpodautoscalers.autoscaling", "default", "web")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "web"
    # the traffic lasts 120 s: the run may not end before
    cluster.all_submitted = True
    assert not cluster.all_done()


def test_service_pods_publish_the_traffics_usage_on_the_metrics_tick(tmp_path) -> None:
    clock, facade, cluster = make_cluster(tmp_path)
    [pod_a] = settle(facade, cluster)
    board = facade.metrics
    assert board.pod_items("default") == []  # no metrics before the first scrape
    advance(clock, cluster, 14 * 10**9)
    assert board.pod_items("default") == []
    advance(clock, cluster, 16 * 10**9)
    [((ns, name), sample)] = board.pod_items("default")
    assert (ns, name) == ("default", pod_a)
    assert sample.timestamp_ns == 15 * 10**9 and sample.window_s == 15
    cpu, memory = sample.usage["web"]
    assert 0.2e9 < cpu < 0.8e9  # 10 req/s x 50 ms = 0.5 core, give or take the draws
    assert memory == 512 * 1024**2
    [(pod, concurrency, stamp, window, labels)] = board.custom_items("default", "concurrency")
    assert pod == pod_a and stamp == 15 * 10**9 and labels["app"] == "web"
    assert 0.2 < concurrency < 2
    # the node's usage includes the service pod's
    node_name = facade.store.get("pods", "default", pod_a)["spec"]["nodeName"]
    [node] = [s for n, s in board.node_items() if n == node_name]
    assert node.usage[""][0] == cpu


def test_a_second_ready_pod_shares_the_traffic(tmp_path) -> None:
    clock, facade, cluster = make_cluster(tmp_path)
    settle(facade, cluster)
    advance(clock, cluster, 30 * 10**9)
    scale(facade, 2)
    pods = settle(facade, cluster)
    assert len(pods) == 2
    advance(clock, cluster, 61 * 10**9)
    rps = {
        pod: value
        for pod, value, *_ in facade.metrics.custom_items("default", "requests_per_second")
    }
    assert rps == pytest.approx(dict.fromkeys(pods, 5.0), abs=0.2)  # round-robin
    rows = cluster.services.rows
    assert [r.time for r in rows] == [15, 30, 45, 60]
    assert [r.ready_replicas for r in rows] == [1, 1, 2, 2]
    assert [r.desired_replicas for r in rows] == [1, 1, 2, 2]


def test_the_custom_metric_through_the_official_client(tmp_path) -> None:
    from kubernetes import client, config

    clock, facade, cluster = make_cluster(tmp_path)
    [pod_a] = settle(facade, cluster)
    advance(clock, cluster, 16 * 10**9)
    kubeconfig = facade.write_kubeconfig(tmp_path / "kubeconfig", "test")
    with facade:
        api = config.new_client_from_config(config_file=str(kubeconfig))
        custom = client.CustomObjectsApi(api)
        listing = custom.list_namespaced_custom_object(
            "custom.metrics.k8s.io",
            "v1beta1",
            "default",
            "pods/*/concurrency",
            label_selector="app=web",
        )
        assert listing["kind"] == "MetricValueList"
        [item] = listing["items"]
        assert item["describedObject"]["name"] == pod_a and item["metricName"] == "concurrency"
        assert item["windowSeconds"] == 15 and item["value"].endswith("m")
        none = custom.list_namespaced_custom_object(
            "custom.metrics.k8s.io",
            "v1beta1",
            "default",
            "pods/*/concurrency",
            label_selector="app=api",
        )
        assert none["items"] == []
        pods = custom.list_namespaced_custom_object("metrics.k8s.io", "v1beta1", "default", "pods")
        assert [p["metadata"]["name"] for p in pods["items"]] == [pod_a]
        assert pods["items"][0]["window"] == "15s"
        api.close()


def test_replica_state_reads_limits_requests_and_readiness() -> None:
    pod = {
        "metadata": {},
        "spec": {
            "containers": [{"resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "2"}}}]
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]},
    }
    state = replica_state(pod)
    assert (state.limit_cores, state.request_cores, state.ready) == (2.0, 0.5, False)
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert replica_state(pod) is None
    pod["metadata"] = {}
    pod["status"]["phase"] = "Pending"
    assert replica_state(pod) is None


def test_the_hpa_sample_scales_the_deployment_through_the_facade(tmp_path) -> None:
    """One sync of sample_schedulers/hpa against the facade with the official client:
    it reads the HPA, the scale, the pods and metrics.k8s.io, patches the scale and
    writes the HPA's status; the Deployment controller makes the second pod."""
    from kubernetes import config

    from sample_schedulers.hpa.controller import HpaController

    # 40 req/s x 50 ms = 2 cores of work on one 1-cpu pod: utilisation ~100 % of its
    # request (it is saturated) against a 50 % target → ceil(1 × 100/50) = 2
    clock, facade, cluster = make_cluster(tmp_path, rate=40)
    settle(facade, cluster)
    clock.advance_to(400 * 10**9 // 10)  # 40 s: two ticks visible
    cluster.refresh_metrics()
    kubeconfig = facade.write_kubeconfig(tmp_path / "kubeconfig", "hpa")
    with facade:
        api = config.new_client_from_config(config_file=str(kubeconfig))
        HpaController(api).sync_all()
        api.close()
    dep = facade.store.get("deployments.apps", "default", "web")
    assert dep["spec"]["replicas"] == 2
    status = facade.store.get("horizontalpodautoscalers.autoscaling", "default", "web")["status"]
    assert (status["currentReplicas"], status["desiredReplicas"]) == (1, 2)
    [metric] = status["currentMetrics"]
    assert metric["resource"]["name"] == "cpu"
    assert metric["resource"]["current"]["averageUtilization"] >= 95
    conditions = {c["type"]: c["reason"] for c in status["conditions"]}
    assert conditions["AbleToScale"] == "SucceededRescale"
    assert conditions["ScalingActive"] == "ValidMetricFound"
    assert "lastScaleTime" in status
    events = facade.store.list("events", "default")[0]
    assert any(e.get("reason") == "SuccessfulRescale" for e in events)
    assert len(settle(facade, cluster)) == 2
