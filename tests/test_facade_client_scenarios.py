"""Client-side scenarios run by the official ``kubernetes`` client against the facade.

Not a test module by itself (no ``test_`` functions): ``test_facade_client.py`` runs these
in-process with the installed client (37.x, pydantic models), and as a script in a child
process with the old client (24.2.0, ``.venv/k8s24`` first on PYTHONPATH):

    python tests/test_facade_client_scenarios.py KUBECONFIG SCENARIO...

The facade side (a ``ManualClock``) is driven by the parent: a scenario that needs
virtual time to pass asks ``driver.advance_when_parked(seconds)``; the parent advances the
clock once the client's watch is parked with nothing left to deliver. Every API answer is
deserialized into the client's typed models by the client itself: a field the models
reject fails the scenario.
"""

from __future__ import annotations

import datetime
import sys
import time
import traceback

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

NS = "scenarios"
UTC = datetime.UTC


class PipeDriver:
    """The child-process side of the driver: asks the parent through stdout."""

    def advance_when_parked(
        self, seconds: float, pods_in=None, label=None, unbound_in=None
    ) -> None:
        """Ask the parent to advance virtual time by ``seconds`` once the watch is parked
        and the store shows ``pods_in=(ns, count)`` pods / ``label=(ns, pod, key, value)`` /
        no unbound pod in namespace ``unbound_in``."""
        import json

        request = {"seconds": seconds, "pods_in": pods_in, "label": label, "unbound_in": unbound_in}
        print(f"ADVANCE_WHEN_PARKED {json.dumps(request)}", flush=True)


def _pod(name: str | None = None, generate: str | None = None, **spec_extra) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, generate_name=generate, labels={"app": "sim"}),
        spec=client.V1PodSpec(
            containers=[
                client.V1Container(
                    name="main",
                    image="busybox:1.36",
                    resources=client.V1ResourceRequirements(
                        requests={"cpu": "500m", "memory": "1Gi"}
                    ),
                )
            ],
            **spec_extra,
        ),
    )


def _expect_status(code: int, fn, *args, **kwargs) -> ApiException:
    try:
        fn(*args, **kwargs)
    except ApiException as exc:
        assert exc.status == code, f"expected HTTP {code}, got {exc.status}: {exc.body}"
        if isinstance(exc.body, bytes):  # old clients with _preload_content=False
            exc.body = exc.body.decode()
        return exc
    raise AssertionError(f"expected HTTP {code}, the call succeeded")


def _ensure_namespace(v1: client.CoreV1Api, name: str) -> None:
    try:
        v1.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    except ApiException as exc:
        assert exc.status == 409, exc.body


def scenario_discovery(api: client.ApiClient, driver) -> None:
    version = client.VersionApi(api).get_code()
    assert version.major == "1" and version.git_version.startswith("v1."), version
    assert client.CoreApi(api).get_api_versions().versions == ["v1"]
    groups = {g.name: g for g in client.ApisApi(api).get_api_versions().groups}
    for name in (
        "apps",
        "batch",
        "coordination.k8s.io",
        "events.k8s.io",
        "metrics.k8s.io",
        "policy",
    ):
        assert name in groups, sorted(groups)
    assert groups["metrics.k8s.io"].preferred_version.version == "v1beta1"
    core = {r.name: r for r in client.CoreV1Api(api).get_api_resources().resources}
    for name in (
        "pods",
        "pods/binding",
        "pods/eviction",
        "pods/status",
        "nodes",
        "events",
        "bindings",
    ):
        assert name in core, sorted(core)
    assert core["pods"].namespaced and not core["nodes"].namespaced
    leases = client.CoordinationV1Api(api).get_api_resources()
    assert [r.name for r in leases.resources] == ["leases"]


def scenario_nodes(api: client.ApiClient, driver) -> None:
    v1 = client.CoreV1Api(api)
    nodes = v1.list_node()
    assert isinstance(nodes.items[0], client.V1Node)
    assert [n.metadata.name for n in nodes.items] == ["node-0", "node-1", "node-2"]
    assert int(nodes.metadata.resource_version) > 0
    assert nodes.items[0].status.allocatable["cpu"] == "4"
    zone_a = v1.list_node(label_selector="zone in (a),kubernetes.io/os=linux")
    assert [n.metadata.name for n in zone_a.items] == ["node-0", "node-2"]
    assert [n.metadata.name for n in v1.list_node(label_selector="zone!=a").items] == ["node-1"]
    assert [n.metadata.name for n in v1.list_node(field_selector="metadata.name=node-1").items] == [
        "node-1"
    ]
    patched = v1.patch_node("node-1", {"metadata": {"labels": {"timewarp/patched": "yes"}}})
    assert patched.metadata.labels["timewarp/patched"] == "yes"
    assert int(patched.metadata.resource_version) > int(nodes.metadata.resource_version)
    status = v1.patch_node_status(
        "node-1",
        {
            "status": {
                "conditions": [
                    {
                        "type": "MemoryPressure",
                        "status": "False",
                        "reason": "Sim",
                        "lastHeartbeatTime": "2024-01-01T00:00:00Z",
                        "lastTransitionTime": "2024-01-01T00:00:00Z",
                    }
                ]
            }
        },
    )
    types = sorted(c.type for c in status.status.conditions)
    assert types == ["MemoryPressure", "Ready"], types  # strategic merge by condition type
    assert v1.read_node("node-1").metadata.labels["timewarp/patched"] == "yes"
    _expect_status(404, v1.read_node, "no-such-node")


def scenario_pods(api: client.ApiClient, driver) -> None:
    v1 = client.CoreV1Api(api)
    _ensure_namespace(v1, NS)
    created = v1.create_namespaced_pod(NS, _pod(generate="job-"))
    name = created.metadata.name
    assert name.startswith("job-") and len(name) == len("job-") + 5, name
    assert created.metadata.uid and created.metadata.creation_timestamp is not None
    assert created.spec.priority == 0 and created.spec.scheduler_name == "default-scheduler"
    assert created.status.phase == "Pending"
    pending = v1.list_pod_for_all_namespaces(
        field_selector="spec.nodeName=,spec.schedulerName=default-scheduler"
    )
    assert name in [p.metadata.name for p in pending.items]
    # Binding through /bindings; the real server answers a Status, which old clients fail
    # to turn into a V1Binding, hence _preload_content=False as schedulers do.
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name=name),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name="node-0"),
    )
    resp = v1.create_namespaced_binding(NS, body, _preload_content=False)
    assert resp.status == 201
    bound = v1.read_namespaced_pod(name, NS)
    assert bound.spec.node_name == "node-0"
    assert any(c.type == "PodScheduled" and c.status == "True" for c in bound.status.conditions)
    exc = _expect_status(
        409, v1.create_namespaced_pod_binding, name, NS, body, _preload_content=False
    )
    assert "already assigned" in exc.body
    assert name not in [
        p.metadata.name for p in v1.list_namespaced_pod(NS, field_selector="spec.nodeName=").items
    ]
    assert name in [
        p.metadata.name for p in v1.list_namespaced_pod(NS, field_selector="spec.nodeName!=").items
    ]
    # The second binding endpoint on another pod.
    other = v1.create_namespaced_pod(NS, _pod(generate="job-")).metadata.name
    body.metadata.name = other
    assert v1.create_namespaced_pod_binding(other, NS, body, _preload_content=False).status == 201
    assert v1.read_namespaced_pod(other, NS).spec.node_name == "node-0"
    # Eviction (policy/v1) deletes the pod.
    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=NS))
    v1.create_namespaced_pod_eviction(name, NS, eviction)
    _expect_status(404, v1.read_namespaced_pod, name, NS)
    deleted = v1.delete_namespaced_pod(other, NS)
    assert deleted.metadata.name == other
    _expect_status(404, v1.delete_namespaced_pod, other, NS)
    # Admission: priority from priorityClassName; unknown class is refused.
    hi = v1.create_namespaced_pod(
        NS, _pod(generate="crit-", priority_class_name="system-node-critical")
    )
    assert hi.spec.priority == 2000001000
    _expect_status(
        403, v1.create_namespaced_pod, NS, _pod(generate="x-", priority_class_name="nope")
    )
    _expect_status(409, v1.create_namespaced_pod, NS, _pod(name=hi.metadata.name))
    _expect_status(404, v1.create_namespaced_pod, "no-such-namespace", _pod(generate="x-"))
    # Status subresource.
    hi.status.phase = "Running"
    running = v1.replace_namespaced_pod_status(hi.metadata.name, NS, hi)
    assert running.status.phase == "Running"
    stale = running
    stale.metadata.resource_version = "1"
    _expect_status(409, v1.replace_namespaced_pod, hi.metadata.name, NS, stale)
    v1.delete_namespaced_pod(hi.metadata.name, NS)


def _names(events) -> list[tuple[str, str]]:
    return [(e["type"], e["object"].metadata.name) for e in events]


def scenario_watch(api: client.ApiClient, driver) -> None:
    v1 = client.CoreV1Api(api)
    ns = "watching"
    _ensure_namespace(v1, ns)
    p1 = v1.create_namespaced_pod(ns, _pod(name="p1"))
    listed = v1.list_namespaced_pod(ns)
    p2 = v1.create_namespaced_pod(ns, _pod(name="p2"))
    started = time.monotonic()
    # Resume from the list's resourceVersion: only what happened after it.
    driver.advance_when_parked(30)
    events = list(
        watch.Watch().stream(
            v1.list_namespaced_pod,
            ns,
            resource_version=listed.metadata.resource_version,
            timeout_seconds=30,
        )
    )
    assert _names(events) == [("ADDED", "p2")], _names(events)
    assert isinstance(events[0]["object"], client.V1Pod)
    assert events[0]["object"].metadata.resource_version == p2.metadata.resource_version
    # No resourceVersion: the current state first, as ADDED events, then live changes.
    driver.advance_when_parked(30, pods_in=(ns, 3))
    seen = []
    w = watch.Watch()
    for event in w.stream(v1.list_namespaced_pod, ns, timeout_seconds=30):
        seen.append(event)
        if len(seen) == 2:
            v1.create_namespaced_pod(ns, _pod(name="p3"))
    assert _names(seen) == [("ADDED", "p1"), ("ADDED", "p2"), ("ADDED", "p3")], _names(seen)
    # Label and field selectors on a watch; a change that stops matching is a DELETED.
    driver.advance_when_parked(30, label=(ns, "p1", "app", "other"))
    seen = []
    for event in watch.Watch().stream(
        v1.list_namespaced_pod,
        ns,
        label_selector="app=sim",
        field_selector="metadata.name!=p3",
        timeout_seconds=30,
    ):
        seen.append(event)
        if len(seen) == 2:
            v1.patch_namespaced_pod("p1", ns, {"metadata": {"labels": {"app": "other"}}})
    assert _names(seen) == [("ADDED", "p1"), ("ADDED", "p2"), ("DELETED", "p1")], _names(seen)
    # Bookmarks: one per virtual minute and one 2 s before the end (as the watch cache
    # sends them), carrying a resourceVersion to resume from.
    driver.advance_when_parked(150)
    seen = list(
        watch.Watch().stream(
            v1.list_namespaced_pod,
            ns,
            resource_version=p1.metadata.resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=150,
        )
    )
    kinds = [e["type"] for e in seen]
    assert kinds.count("BOOKMARK") == 3, kinds
    bookmark_rv = seen[-1]["raw_object"]["metadata"]["resourceVersion"]
    assert int(bookmark_rv) >= int(p2.metadata.resource_version)
    # 410 Gone: history compacted past the resourceVersion we ask for.
    for i in range(60):
        v1.patch_namespaced_pod("p2", ns, {"metadata": {"annotations": {"n": str(i)}}})
    try:
        list(
            watch.Watch().stream(
                v1.list_namespaced_pod,
                ns,
                resource_version=listed.metadata.resource_version,
                timeout_seconds=30,
            )
        )
    except ApiException as exc:
        assert exc.status == 410, exc
    else:
        raise AssertionError("a watch from a compacted resourceVersion must fail with 410")
    assert time.monotonic() - started < 20, "watch timeouts must run in virtual time"


def scenario_events(api: client.ApiClient, driver) -> None:
    v1 = client.CoreV1Api(api)
    _ensure_namespace(v1, NS)
    now = datetime.datetime(2024, 1, 1, tzinfo=UTC)
    ref = client.V1ObjectReference(kind="Pod", name="some-pod", namespace=NS, api_version="v1")
    ev = v1.create_namespaced_event(
        NS,
        client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name="some-pod."),
            involved_object=ref,
            reason="Scheduled",
            message="Successfully assigned",
            type="Normal",
            first_timestamp=now,
            last_timestamp=now,
            count=1,
            source=client.V1EventSource(component="my-scheduler"),
        ),
    )
    assert ev.metadata.name.startswith("some-pod.")
    listed = v1.list_namespaced_event(
        NS, field_selector="involvedObject.name=some-pod,reason=Scheduled"
    )
    assert [e.metadata.name for e in listed.items] == [ev.metadata.name]
    assert isinstance(listed.items[0], client.CoreV1Event)
    events_v1 = client.EventsV1Api(api)
    new = events_v1.create_namespaced_event(
        NS,
        client.EventsV1Event(
            metadata=client.V1ObjectMeta(generate_name="some-pod."),
            event_time=datetime.datetime(2024, 1, 1, 0, 0, 1, 250000, tzinfo=UTC),
            reason="Scheduled",
            action="Binding",
            note="assigned to node-0",
            type="Normal",
            reporting_controller="my-scheduler",
            reporting_instance="my-scheduler-1",
            regarding=ref,
        ),
    )
    assert new.event_time.microsecond == 250000
    assert len(events_v1.list_namespaced_event(NS).items) == 1


def scenario_leases(api: client.ApiClient, driver) -> None:
    leases = client.CoordinationV1Api(api)
    t0 = datetime.datetime(2024, 1, 1, tzinfo=UTC)
    lease = leases.create_namespaced_lease(
        "kube-system",
        client.V1Lease(
            metadata=client.V1ObjectMeta(name="my-scheduler"),
            spec=client.V1LeaseSpec(
                holder_identity="a", lease_duration_seconds=15, acquire_time=t0, renew_time=t0
            ),
        ),
    )
    assert lease.spec.holder_identity == "a"
    got = leases.read_namespaced_lease("my-scheduler", "kube-system")
    got.spec.renew_time = t0 + datetime.timedelta(seconds=10)
    renewed = leases.replace_namespaced_lease("my-scheduler", "kube-system", got)
    assert renewed.spec.renew_time == t0 + datetime.timedelta(seconds=10)
    # Optimistic concurrency: a competitor holding the old version loses.
    got.spec.holder_identity = "b"
    _expect_status(409, leases.replace_namespaced_lease, "my-scheduler", "kube-system", got)
    assert leases.read_namespaced_lease("my-scheduler", "kube-system").spec.holder_identity == "a"


def scenario_workloads(api: client.ApiClient, driver) -> None:
    apps, batch, v1 = client.AppsV1Api(api), client.BatchV1Api(api), client.CoreV1Api(api)
    _ensure_namespace(v1, NS)
    template = client.V1PodTemplateSpec(
        metadata=client.V1ObjectMeta(labels={"app": "web"}), spec=_pod().spec
    )
    selector = client.V1LabelSelector(match_labels={"app": "web"})
    rs = apps.create_namespaced_replica_set(
        NS,
        client.V1ReplicaSet(
            metadata=client.V1ObjectMeta(name="web"),
            spec=client.V1ReplicaSetSpec(replicas=2, selector=selector, template=template),
        ),
    )
    assert rs.metadata.generation == 1 and rs.spec.replicas == 2
    everywhere = apps.list_replica_set_for_all_namespaces().items
    assert [(r.metadata.namespace, r.metadata.name) for r in everywhere] == [
        ("lifecycle", "owner"),
        (NS, "web"),
    ]
    assert [r.metadata.name for r in apps.list_namespaced_replica_set(NS).items] == ["web"]
    dep = apps.create_namespaced_deployment(
        NS,
        client.V1Deployment(
            metadata=client.V1ObjectMeta(name="web"),
            spec=client.V1DeploymentSpec(selector=selector, template=template),
        ),
    )
    assert dep.spec.replicas == 1 and dep.spec.strategy.type == "RollingUpdate"
    assert apps.read_namespaced_deployment("web", NS).metadata.uid == dep.metadata.uid
    job = batch.create_namespaced_job(
        NS,
        client.V1Job(
            metadata=client.V1ObjectMeta(name="batch-1"),
            spec=client.V1JobSpec(
                template=client.V1PodTemplateSpec(
                    spec=client.V1PodSpec(containers=_pod().spec.containers, restart_policy="Never")
                )
            ),
        ),
    )
    assert job.spec.completions == 1 and job.spec.backoff_limit == 6
    assert [j.metadata.name for j in batch.list_namespaced_job(NS).items] == ["batch-1"]


def scenario_metrics(api: client.ApiClient, driver) -> None:
    custom = client.CustomObjectsApi(api)
    nodes = custom.list_cluster_custom_object("metrics.k8s.io", "v1beta1", "nodes")
    assert nodes["kind"] == "NodeMetricsList"
    usage = {i["metadata"]["name"]: i["usage"] for i in nodes["items"]}
    assert usage["node-0"] == {"cpu": "250000000n", "memory": "123456Ki"}, usage
    one = custom.get_cluster_custom_object("metrics.k8s.io", "v1beta1", "nodes", "node-1")
    assert one["usage"]["cpu"] == "1500000000n"
    pod = custom.get_namespaced_custom_object(
        "metrics.k8s.io", "v1beta1", "default", "pods", "busy"
    )
    assert pod["containers"] == [
        {"name": "main", "usage": {"cpu": "100000000n", "memory": "2048Ki"}}
    ]
    zone_b = custom.list_cluster_custom_object(
        "metrics.k8s.io", "v1beta1", "nodes", label_selector="zone=b"
    )
    assert [i["metadata"]["name"] for i in zone_b["items"]] == ["node-1"]


def scenario_unauthorized(api: client.ApiClient, driver) -> None:
    for token in (None, "wrong-token"):
        conf = client.Configuration()
        conf.host = api.configuration.host
        if token:
            conf.api_key = {"authorization": f"Bearer {token}", "BearerToken": f"Bearer {token}"}
        with client.ApiClient(conf) as anonymous:
            exc = _expect_status(401, client.CoreV1Api(anonymous).list_node)
            assert '"reason":"Unauthorized"' in exc.body.replace(" ", "")


def scenario_lifecycle(api: client.ApiClient, driver) -> None:
    """Pods as the broker's kubelet writes them deserialize into typed models."""
    v1 = client.CoreV1Api(api)
    pods = {p.metadata.name: p for p in v1.list_namespaced_pod("lifecycle").items}
    assert pods["running"].status.phase == "Running"
    assert all(cs.ready and cs.state.running for cs in pods["running"].status.container_statuses)
    done = pods["succeeded"].status.container_statuses[0].state.terminated
    assert (pods["succeeded"].status.phase, done.exit_code, done.reason) == (
        "Succeeded",
        0,
        "Completed",
    )
    failed = pods["failed"].status.container_statuses[0].state.terminated
    assert (pods["failed"].status.phase, failed.exit_code, failed.reason) == (
        "Failed",
        137,
        "OOMKilled",
    )
    assert (pods["rejected"].status.phase, pods["rejected"].status.reason) == ("Failed", "OutOfcpu")
    owner = pods["running"].metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.controller) == ("ReplicaSet", "owner", True)
    assert (
        v1.list_namespaced_pod("lifecycle", field_selector="status.phase=Running")
        .items[0]
        .metadata.name
        == "running"
    )


def scenario_scheduler_loop(api: client.ApiClient, driver) -> None:
    """An ordinary watch-based scheduler: pending pods of its schedulerName, least-loaded
    node by cpu requests, binding, an Event per decision."""
    v1 = client.CoreV1Api(api)
    ns = "sched"
    _ensure_namespace(v1, ns)
    for i in range(6):
        v1.create_namespaced_pod(ns, _pod(name=f"job-{i}", scheduler_name="tiny"))
    v1.create_namespaced_pod(ns, _pod(name="not-mine"))  # default-scheduler: not ours
    nodes = [n.metadata.name for n in v1.list_node().items]
    load = dict.fromkeys(nodes, 0)
    decisions = []
    driver.advance_when_parked(30, unbound_in=(ns, "tiny"))
    stream = watch.Watch().stream(
        v1.list_namespaced_pod,
        ns,
        field_selector="spec.schedulerName=tiny,spec.nodeName=",
        timeout_seconds=30,
    )
    for event in stream:
        pod = event["object"]
        if event["type"] != "ADDED":
            continue  # a bound pod leaves the selection as DELETED
        node = min(nodes, key=lambda n: (load[n], n))
        target = client.V1ObjectReference(kind="Node", name=node)
        body = client.V1Binding(metadata=client.V1ObjectMeta(name=pod.metadata.name), target=target)
        v1.create_namespaced_binding(ns, body, _preload_content=False)
        load[node] += 500
        decisions.append((pod.metadata.name, node))
        v1.create_namespaced_event(
            ns,
            client.CoreV1Event(
                metadata=client.V1ObjectMeta(generate_name=f"{pod.metadata.name}."),
                involved_object=client.V1ObjectReference(
                    kind="Pod", name=pod.metadata.name, namespace=ns, uid=pod.metadata.uid
                ),
                reason="Scheduled",
                message=f"Successfully assigned {ns}/{pod.metadata.name} to {node}",
                type="Normal",
                source=client.V1EventSource(component="tiny"),
            ),
        )
    assert decisions == [(f"job-{i}", nodes[i % 3]) for i in range(6)], decisions
    bound = {p.metadata.name: p.spec.node_name for p in v1.list_namespaced_pod(ns).items}
    assert bound == {**dict(decisions), "not-mine": None}
    events = v1.list_namespaced_event(ns, field_selector="reason=Scheduled,source=tiny").items
    assert len(events) == 6


def scenario_dynamic(api: client.ApiClient, driver) -> None:
    from kubernetes.dynamic import DynamicClient

    dyn = DynamicClient(api)
    nodes = dyn.resources.get(api_version="v1", kind="Node")
    assert [n.metadata.name for n in nodes.get().items] == ["node-0", "node-1", "node-2"]
    leases = dyn.resources.get(api_version="coordination.k8s.io/v1", kind="Lease")
    assert leases.namespaced
    rs = dyn.resources.get(api_version="apps/v1", kind="ReplicaSet")
    assert rs.get(namespace="default").items == []


SCENARIOS = {
    name[len("scenario_") :]: fn for name, fn in globals().items() if name.startswith("scenario_")
}


def main(argv: list[str]) -> int:
    kubeconfig, names = argv[0], argv[1:]
    failed = 0
    for name in names:
        api = config.new_client_from_config(config_file=kubeconfig)
        try:
            SCENARIOS[name](api, PipeDriver())
            print(f"PASSED {name}", flush=True)
        except Exception:
            failed += 1
            print(f"FAILED {name}", flush=True)
            traceback.print_exc()
        finally:
            api.close() if hasattr(api, "close") else None
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
