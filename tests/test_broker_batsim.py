"""The broker as Batsim's decision process: what it answers to each message, on the wire.

No scheduler process here: the test itself plays the scheduler through the official
client, between Batsim messages, against the broker's facade."""

import json
from pathlib import Path

import pytest
from kubernetes import client, config

from broker.clock.service import ClockService, FacadeClock
from broker.drivers.engine import Broker
from broker.facade import Facade
from broker.k8s.naming import job_id, pod_name
from broker.processes.launcher import Launcher
from simulator import protocol as p
from simulator.testing import simulation_begins


def begins(resources):
    hosts = [
        {"id": i, "name": name, "state": "idle", "properties": props, "zone_properties": {}}
        for i, (name, props) in enumerate(resources)
    ]
    return simulation_begins(
        hosts,
        {
            "one": {
                "type": "delay",
                "delay": 10,
                "cpu": "1",
                "memory": "500Mi",
                "scheduler": "default",
            },
            "frac": {
                "type": "delay",
                "delay": 10,
                "cpu": 0.188,
                "scheduler": "default",
                "labels": {"app": "web"},
                "namespace": "team-a",
            },
        },
        sharing=True,
    )


def submitted(jid, profile="one"):
    return p.JobSubmitted(
        f"w0!{jid}", {"id": f"w0!{jid}", "subtime": 0, "res": 1, "profile": profile}
    )


def wire(broker, now, *payloads):
    """Send one message through the real codec, return the reply as Batsim reads it."""
    message = p.decode(p.encode(p.message(now, *payloads)), "batsim")
    reply = broker.step(message)
    return json.loads(p.encode(p.decode(p.encode(reply), "decision")))


@pytest.fixture
def world(tmp_path):
    clock = ClockService()
    facade = Facade(FacadeClock(clock)).start()
    launcher = Launcher(clock=clock, facade=facade, out_dir=tmp_path)
    broker = Broker(endpoint="tcp://127.0.0.1:*", clock=clock, facade=facade, launcher=launcher)
    config.load_kube_config(str(facade.write_kubeconfig(Path(tmp_path) / "kc", "test")))
    api = client.CoreV1Api()
    yield broker, facade, api
    broker.close()
    facade.stop()
    clock.close()


def bind(api, ns, pod, node):
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name=pod),
        target=client.V1ObjectReference(kind="Node", name=node),
    )
    api.create_namespaced_binding(ns, body, _preload_content=False)


def test_resources_become_nodes(world):
    broker, facade, api = world
    reply = wire(
        broker,
        0.0,
        begins(
            [
                (
                    "Graphene-1.nancy",
                    {"core": "6", "memory": "4Gi", "node_class": "gpu", "gpu": "2"},
                ),
                ("n2", {}),
            ]
        ),
    )
    assert reply == {"now": 0.0, "events": []}
    nodes = {n.metadata.name: n for n in api.list_node().items}
    assert set(nodes) == {"graphene-1.nancy", "n2"}
    gpu = nodes["graphene-1.nancy"]
    assert gpu.status.allocatable["cpu"] == "6" and gpu.status.allocatable["memory"] == "4Gi"
    assert gpu.status.allocatable["nvidia.com/gpu"] == "2"
    assert gpu.metadata.labels["kubernetes.io/hostname"] == "graphene-1.nancy"
    assert gpu.metadata.labels["timewarp.io/node-class"] == "gpu"
    assert nodes["n2"].status.allocatable["cpu"] == "1"  # documented default
    assert any(c.type == "Ready" and c.status == "True" for c in gpu.status.conditions)


def test_jobs_become_pending_pods_with_reversible_names(world):
    broker, facade, api = world
    wire(broker, 0.0, begins([("n1", {"core": "4"})]))
    wire(broker, 1.5, submitted("1"), submitted("x-2", "frac"))
    pod = api.read_namespaced_pod(pod_name("w0!1"), "default")
    assert job_id(pod.metadata.name) == "w0!1"
    assert pod.metadata.annotations["timewarp.io/job-id"] == "w0!1"
    assert pod.spec.scheduler_name == "default"
    assert pod.status.phase == "Pending" and pod.spec.node_name is None
    assert pod.spec.containers[0].resources.requests == {"cpu": "1", "memory": "500Mi"}
    assert pod.metadata.creation_timestamp.timestamp() == pytest.approx(1_767_225_601.5)
    frac = api.read_namespaced_pod(pod_name("w0!x-2"), "team-a")
    assert frac.spec.containers[0].resources.requests == {"cpu": "188m"}
    assert frac.metadata.labels == {"app": "web"}


def test_binding_executes_the_job_at_the_decision_time(world):
    broker, facade, api = world
    wire(broker, 0.0, begins([("n1", {"core": "1"}), ("n2", {"core": "1"})]))
    wire(broker, 0.0, submitted("1"))
    bind(api, "default", pod_name("w0!1"), "n2")
    reply = wire(broker, 0.25, p.RequestedCall())
    assert reply == {
        "now": 0.25,
        "events": [
            {"timestamp": 0.25, "type": "EXECUTE_JOB", "data": {"job_id": "w0!1", "alloc": "1"}}
        ],
    }
    pod = api.read_namespaced_pod(pod_name("w0!1"), "default")
    assert pod.status.phase == "Running" and pod.spec.node_name == "n2"
    assert pod.status.container_statuses[0].state.running is not None
    reply = wire(broker, 10.25, p.JobCompleted("w0!1", "COMPLETED_SUCCESSFULLY", 0, p.ProcSet(1)))
    assert reply["events"] == []
    pod = api.read_namespaced_pod(pod_name("w0!1"), "default")
    assert pod.status.phase == "Succeeded"
    term = pod.status.container_statuses[0].state.terminated
    assert term.exit_code == 0 and term.reason == "Completed"
    assert (term.finished_at - term.started_at).total_seconds() == 10


def test_over_allocation_is_refused_like_a_kubelet(world):
    broker, facade, api = world
    wire(broker, 0.0, begins([("n1", {"core": "1"})]))
    wire(broker, 0.0, submitted("1"), submitted("2"))
    bind(api, "default", pod_name("w0!1"), "n1")
    bind(api, "default", pod_name("w0!2"), "n1")
    reply = wire(broker, 1.0, p.RequestedCall())
    assert [(e["type"], e["data"]["job_id"]) for e in reply["events"]] == [
        ("EXECUTE_JOB", "w0!1"),
        ("REJECT_JOB", "w0!2"),
    ]
    refused = api.read_namespaced_pod(pod_name("w0!2"), "default")
    assert refused.status.phase == "Failed" and refused.status.reason == "OutOfcpu"
    assert "requested: 1000, used: 1000, capacity: 1000" in refused.status.message


def test_eviction_of_a_running_pod_kills_its_job(world):
    broker, facade, api = world
    wire(broker, 0.0, begins([("n1", {"core": "1"})]))
    wire(broker, 0.0, submitted("1"))
    bind(api, "default", pod_name("w0!1"), "n1")
    wire(broker, 1.0, p.RequestedCall())
    api.create_namespaced_pod_eviction(
        pod_name("w0!1"),
        "default",
        client.V1Eviction(metadata=client.V1ObjectMeta(name=pod_name("w0!1"), namespace="default")),
        _preload_content=False,
    )
    reply = wire(broker, 2.0, p.RequestedCall())
    assert reply["events"] == [
        {"timestamp": 2.0, "type": "KILL_JOB", "data": {"job_ids": ["w0!1"]}}
    ]


def test_timers_become_exact_calls_me_later_never_twice(world):
    broker, facade, api = world
    wire(broker, 0.0, begins([("n1", {})]))
    fired = []
    broker.clock.call_at(2_500_000_000, lambda: fired.append(broker.clock.now_ns))
    reply = wire(broker, 1.0, submitted("1"))
    assert reply["events"][-1] == {
        "timestamp": 1.0,
        "type": "CALL_ME_LATER",
        "data": {"timestamp": 2.5},
    }
    reply = wire(broker, 1.5, p.RequestedCall())  # something else happens first
    assert all(e["type"] != "CALL_ME_LATER" for e in reply["events"])  # already requested
    assert fired == []
    wire(broker, 2.5, p.RequestedCall())
    assert fired == [2_500_000_000]


def test_a_timer_below_the_microsecond_is_released_by_its_requested_call(world):
    """Batsim prints every time to the microsecond, often rounding down: the call asked
    for 1/3 s comes back stamped 0.333333, before the deadline. It is still that call's
    answer and releases the timer at its deadline (deterministic mode used to wait for a
    later time that never came, then hang)."""
    broker, facade, api = world
    wire(broker, 0.0, begins([("n1", {})]))
    fired = []
    broker.clock.call_at(333_333_333, lambda: fired.append(broker.clock.now_ns))
    reply = wire(broker, 0.0, submitted("1"))
    assert reply["events"][-1]["data"] == {"timestamp": 0.333333333}
    wire(broker, 0.333333, p.RequestedCall())
    assert fired == [333_333_333]


def test_a_timer_within_the_instant_of_a_message_is_due_at_it_and_needs_no_call(world):
    broker, facade, api = world
    wire(broker, 0.0, begins([("n1", {})]))
    fired = []
    broker.clock.call_at(1_000_000_300, lambda: fired.append(broker.clock.now_ns))
    broker.clock.call_at(1_000_000_800, lambda: fired.append(broker.clock.now_ns))
    reply = wire(broker, 1.0, submitted("1"))
    assert fired == [1_000_000_300]  # prints as 1.000000: Batsim cannot tell it from now
    # the other prints as 1.000001: asked for, and after Batsim's clock (up to 1.0000005)
    assert reply["events"][-1]["data"] == {"timestamp": 1.0000008}
    assert wire(broker, 1.000001, p.RequestedCall())["events"] == []
    assert fired == [1_000_000_300, 1_000_000_800]


def test_a_requested_call_answers_only_a_call_it_can_be_the_answer_to(world):
    broker, facade, api = world
    wire(broker, 0.0, begins([("n1", {})]))
    fired = []
    broker.clock.call_at(2_000_000_000, lambda: fired.append(broker.clock.now_ns))
    wire(broker, 0.0, submitted("1"))
    wire(broker, 1.5, p.RequestedCall())  # not the answer to the call at 2 s
    assert fired == []
    # SimGrid may end the waiter up to 1e-9 s early: 1.9999999995 prints 2.000000 anyway;
    # 1.9999994999 would print 1.999999 — one nanosecond of slack covers the precision
    wire(broker, 2.0, p.RequestedCall())
    assert fired == [2_000_000_000]


def test_the_end_of_the_workload_stops_further_calls(world):
    broker, facade, api = world
    wire(broker, 0.0, begins([("n1", {})]))
    broker.clock.call_at(100_000_000_000, lambda: None)
    wire(broker, 0.0, submitted("1"), p.Notify("no_more_static_job_to_submit"))
    bind(api, "default", pod_name("w0!1"), "n1")
    wire(broker, 1.0, p.RequestedCall())
    reply = wire(broker, 11.0, p.JobCompleted("w0!1", "COMPLETED_SUCCESSFULLY", 0, p.ProcSet(0)))
    assert reply == {"now": 11.0, "events": []}  # nothing keeps Batsim alive
    assert wire(broker, 11.0, p.SimulationEnds()) == {"now": 11.0, "events": []}


def test_an_evicted_replicaset_pod_is_replaced_by_a_pending_one(world):
    broker, facade, api = world
    wire(broker, 0.0, begins([("n1", {"core": "2"}), ("n2", {"core": "2"})]))
    job = {"id": "w0!web-1", "subtime": 0, "res": 1, "profile": "one", "replicaset": "web"}
    wire(broker, 0.0, p.JobSubmitted("w0!web-1", job))
    rs = client.AppsV1Api().read_namespaced_replica_set("web", "default")
    pod = api.read_namespaced_pod(pod_name("w0!web-1"), "default")
    assert pod.metadata.owner_references[0].kind == "ReplicaSet"
    assert pod.metadata.owner_references[0].uid == rs.metadata.uid
    bind(api, "default", pod.metadata.name, "n1")
    wire(broker, 1.0, p.RequestedCall())
    api.create_namespaced_pod_eviction(
        pod.metadata.name,
        "default",
        client.V1Eviction(
            metadata=client.V1ObjectMeta(name=pod.metadata.name, namespace="default")
        ),
        _preload_content=False,
    )
    reply = wire(broker, 2.0, p.RequestedCall())
    assert reply["events"] == [
        {"timestamp": 2.0, "type": "KILL_JOB", "data": {"job_ids": ["w0!web-1"]}}
    ]
    pods = api.list_namespaced_pod("default", label_selector="timewarp.io/replicaset=web").items
    assert len(pods) == 1
    new = pods[0]
    assert new.metadata.name.startswith("web-") and new.status.phase == "Pending"
    assert new.spec.node_name is None and new.metadata.owner_references[0].name == "web"
    bind(api, "default", new.metadata.name, "n2")
    reply = wire(broker, 3.0, p.RequestedCall())
    assert reply["events"] == []  # a replacement runs outside Batsim's accounting
    assert api.read_namespaced_pod(new.metadata.name, "default").status.phase == "Running"


def test_after_begin_runs_once_when_the_nodes_exist(world):
    """The hook the command tunes its heap in (commands/simulating/heap.py,
    freeze_cluster) comes after SIMULATION_BEGINS made the nodes, and only then."""
    broker, facade, _ = world
    seen = []
    broker.after_begin = lambda: seen.append(facade.store.count("nodes"))
    wire(broker, 0.0, begins([("n1", {}), ("n2", {})]))
    assert seen == [2]
    wire(broker, 1.0, submitted(1))
    assert seen == [2]
