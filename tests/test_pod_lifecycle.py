"""A pod's life on its node in virtual time: start-up (image pulls, container start),
readiness probes, graceful deletion — and Batkube's inputs unchanged by default."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from kubernetes import client, config
from test_deployments import (
    NS,
    Script,
    active,
    deployment,
    new_template,
    pods_of,
    rs_sizes,
    template,
)

from broker.cluster.pod_lifecycle import NodeImages, plan_start
from broker.drivers.inprocess import InProcessRun
from broker.k8s import naming

BATKUBE = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "batkube"
# sha256 of out_jobs.csv's rows for these inputs, taken on main before the pod lifecycle
# existed (a7070af, broker in process with the first-fit binder, dynamic jobs on)
BEFORE = {
    (
        "200_delay170.json",
        16,
        1,
    ): "b4b79b54d13c52b28eb85d1b538181ac223c04158a0642aa6b249d593d6d9d05",
    (
        "spaced_200_delay170.json",
        16,
        1,
    ): "802ef9806b599d53bb0cffea0e1d0e91b2d288c47267c0e4b4a20e0b914f2c5c",
    ("KIT_10h_80.json", 1, 6): "a97a42fcdf9201b0c66050b7a3bcb574f83ff1b53f429928a0a144c1fbc8871e",
}


@pytest.fixture
def world(tmp_path):
    run = InProcessRun(tmp_path, nodes=2, cores=4)
    yield run
    run.close()


def _rows_digest(tmp_path: Path, jobs, profiles, nodes: int, cores: int) -> str:
    run = InProcessRun(tmp_path, nodes=nodes, cores=cores)
    try:
        run.run(jobs, profiles)
        rows = "\n".join(",".join(r.values()) for r in run.rows())
    finally:
        run.close()
    return hashlib.sha256(rows.encode()).hexdigest()


@pytest.mark.parametrize(("workload", "nodes", "cores"), list(BEFORE))
@pytest.mark.parametrize("explicit_zeros", [False, True])
def test_batkube_inputs_give_the_same_bytes_as_before(
    tmp_path, workload, nodes, cores, explicit_zeros
):
    path = BATKUBE / "workloads" / workload
    if not path.is_file():
        pytest.skip("../shared/data is not beside this checkout")
    data = json.loads(path.read_text())
    if explicit_zeros:  # the start-up model's keys at their defaults change nothing
        for profile in data["profiles"].values():
            profile["timewarp"] = {
                "imagePullSeconds": 0,
                "containerStartSeconds": 0,
                "shutdownSeconds": 0,
            }
    digest = _rows_digest(tmp_path, data["jobs"], data["profiles"], nodes, cores)
    assert digest == BEFORE[(workload, nodes, cores)]


# ----------------------------------------------------------------------- start-up


def test_jobs_start_after_the_image_pull_and_container_start(world):
    """Two jobs at t=0 (one per node) each pull the image (8 s) and start 2 s later; a job
    at t=20 finds the image on its node and starts at 22. Batsim's job starts when its
    container does."""
    profiles = {
        "web": {
            "type": "delay", "delay": 30, "cpu": "1", "image": "shop/web:1.0",
            "timewarp": {"imagePullSeconds": 8, "containerStartSeconds": 2},
        }
    }  # fmt: skip
    jobs = [
        {"id": str(i), "subtime": t, "res": 1, "profile": "web"} for i, t in enumerate((0, 0, 20))
    ]
    script = Script(world)
    script.look(5, lambda: world.store.get("pods", NS, naming.pod_name("w0!0")))
    script.run((jobs, profiles))
    rows = {r["job_id"]: r for r in world.rows()}
    assert [(float(rows[i]["starting_time"]), float(rows[i]["finish_time"])) for i in "012"] == [
        (10.0, 40.0), (10.0, 40.0), (22.0, 52.0)
    ]  # fmt: skip
    waiting = script.seen[5]["status"]
    assert waiting["phase"] == "Pending"
    assert waiting["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
    conditions = {c["type"]: c for c in waiting["conditions"]}
    assert conditions["Ready"]["status"] == "False"
    assert conditions["Ready"]["reason"] == "ContainersNotReady"
    assert conditions["Ready"]["message"] == "containers with unready status: [main]"
    assert conditions["Initialized"]["status"] == "True"
    said = [
        (e["reason"], e["message"], e["involvedObject"]["name"])
        for e in world.store.list("events", NS)[0]
        if e["source"]["component"] == "kubelet"
    ]
    first = naming.pod_name("w0!0")
    assert ("Pulling", 'Pulling image "shop/web:1.0"', first) in said
    assert (
        "Pulled",
        'Successfully pulled image "shop/web:1.0" in 8s (8s including waiting)',
        first,
    ) in said
    third = naming.pod_name("w0!2")
    assert ("Pulled", 'Container image "shop/web:1.0" already present on machine', third) in said
    assert ("Started", "Started container main", third) in said


def test_the_start_plan_serialises_pulls_per_node():
    images = NodeImages()
    pod = {
        "metadata": {"annotations": {"timewarp.io/image-pull-seconds": "5"}},
        "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]},
    }
    plan = plan_start(pod, images, 0)
    assert [(i, b, e) for i, b, e in plan.pulls] == [
        ("x", 0, 5 * 10**9),
        ("y", 5 * 10**9, 10 * 10**9),
    ]
    other = {"metadata": pod["metadata"], "spec": {"containers": [{"name": "c", "image": "z"}]}}
    assert plan_start(other, images, 10**9).start_ns == 15 * 10**9  # waits for the puller
    never = {
        "metadata": pod["metadata"],
        "spec": {"containers": [{"name": "n", "image": "w", "imagePullPolicy": "Never"}]},
    }
    assert plan_start(never, images, 0).start_ns == 0


def test_a_bad_timing_annotation_is_reported_and_taken_as_zero(world):
    bad = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "odd", "annotations": {"timewarp.io/container-start-seconds": "soon"}},
        "spec": template()["spec"],
    }
    script = Script(world).create(0, "pods", bad)
    script.run()
    warnings = [
        e["message"] for e in world.store.list("events", NS)[0] if e["reason"] == "InvalidTiming"
    ]
    assert warnings == [
        "timewarp: timewarp.io/container-start-seconds='soon' is not a number of seconds >= 0; taken as 0"
    ]


@pytest.mark.parametrize(
    ("probe", "start", "ready"),
    [
        ({"initialDelaySeconds": 5, "periodSeconds": 10}, 0, 10),
        ({"initialDelaySeconds": 0, "periodSeconds": 10}, 0, 0),
        ({"initialDelaySeconds": 5, "periodSeconds": 10, "successThreshold": 2}, 0, 20),
        ({"initialDelaySeconds": 3, "periodSeconds": 4}, 2, 8),
    ],
)
def test_readiness_follows_the_probe_ticks(probe, start, ready):
    annotations = {"timewarp.io/container-start-seconds": str(start)} if start else {}
    pod = {
        "metadata": {"annotations": annotations},
        "spec": {
            "containers": [
                {"name": "w", "image": "x", "readinessProbe": {"httpGet": {"port": 80}, **probe}}
            ]
        },
    }
    plan = plan_start(pod, NodeImages(), 0)
    assert (plan.start_ns, plan.ready_ns) == (start * 10**9, ready * 10**9)


def test_only_ready_pods_count_as_ready_replicas(world):
    probed = template(duration="1000")
    probed["spec"]["containers"][0]["readinessProbe"] = {
        "httpGet": {"path": "/healthz", "port": 8080}, "initialDelaySeconds": 15, "periodSeconds": 10,
    }  # fmt: skip
    script = Script(world).create(0, "deployments.apps", deployment(2, template=probed))
    status = lambda: world.store.get("deployments.apps", NS, "web")["status"]  # noqa: E731
    script.look(5, status).look(25, status)
    script.look(6, lambda: active(pods_of(world, app="web"))[0]["status"])
    script.run()
    early, late = script.seen[5], script.seen[25]
    assert (
        early["replicas"],
        early.get("readyReplicas", 0),
        early.get("availableReplicas", 0),
    ) == (2, 0, 0)
    assert {c["type"]: c["reason"] for c in early["conditions"]}[
        "Available"
    ] == "MinimumReplicasUnavailable"
    assert (late["readyReplicas"], late["availableReplicas"]) == (2, 2)
    pod = script.seen[6]
    assert pod["phase"] == "Running"
    [container] = pod["containerStatuses"]
    assert (container["ready"], container["started"], list(container["state"])) == (
        False,
        True,
        ["running"],
    )


# -------------------------------------------------------------------- termination


def _api(world):
    kubeconfig = world.facade.write_kubeconfig(world.tmp / "kc", "test")
    return client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))


def _deleted_states(world):
    """The last state of every pod the store deletes (the DELETED event's object)."""
    gone = {}

    def listener(key, event, obj):
        if key == "pods" and event == "DELETED":
            gone[obj["metadata"]["name"]] = (world.clock.now_ns / 1e9, json.loads(json.dumps(obj)))

    world.store.add_listener(listener)
    return gone


def _bare(name, duration="100", shutdown=None, **spec):
    annotations = {"timewarp.io/duration": duration}
    if shutdown is not None:
        annotations["timewarp.io/shutdown-seconds"] = str(shutdown)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {**template()["spec"], **spec},
    }


def test_a_deleted_pod_terminates_gracefully_in_virtual_time(world):
    """Deleted at 10: ``quick`` exits 20 s after the signal (Succeeded, exit 0); ``stubborn``
    outlives its 30 s grace period and is killed at 40 (Failed, 137); ``finishing``'s job
    ends at 15, within its grace period, and it goes then; ``forced`` (grace 0) goes at
    once. Their Batsim jobs are killed when they go."""
    gone = _deleted_states(world)
    answers = {}

    def delete_all():
        api = _api(world)
        for name, grace in (
            ("quick", None),
            ("stubborn", None),
            ("finishing", None),
            ("forced", 0),
        ):
            answers[name] = api.delete_namespaced_pod(name, NS, grace_period_seconds=grace)

    script = Script(world)
    script.create(0, "pods", _bare("quick", shutdown=20))
    script.create(0, "pods", _bare("stubborn", shutdown=600))
    script.create(0, "pods", _bare("finishing", duration="15", shutdown=600))
    script.create(0, "pods", _bare("forced"))
    script.at(10, delete_all)
    script.look(11, lambda: world.store.get("pods", NS, "quick")["metadata"])
    script.run()
    marked = script.seen[11]
    assert (marked["deletionGracePeriodSeconds"], marked["deletionTimestamp"]) == (
        30, answers["quick"].metadata.deletion_timestamp.strftime("%Y-%m-%dT%H:%M:%SZ")
    )  # fmt: skip
    assert answers["quick"].metadata.deletion_timestamp is not None
    when = {name: t for name, (t, _) in gone.items()}
    assert when == {"forced": 10.0, "finishing": 15.0, "quick": 30.0, "stubborn": 40.0}
    assert gone["quick"][1]["status"]["phase"] == "Succeeded"
    exit_code = gone["stubborn"][1]["status"]["containerStatuses"][0]["state"]["terminated"][
        "exitCode"
    ]
    assert (gone["stubborn"][1]["status"]["phase"], exit_code) == ("Failed", 137)
    rows = {r["job_id"]: r for r in world.rows()}
    finish = {
        name: (
            float(rows[f"default.{name}"]["finish_time"]),
            rows[f"default.{name}"]["final_state"],
        )
        for name in when
    }
    assert finish == {
        "forced": (10.0, "COMPLETED_KILLED"),
        "finishing": (15.0, "COMPLETED_SUCCESSFULLY"),
        "quick": (30.0, "COMPLETED_KILLED"),
        "stubborn": (40.0, "COMPLETED_KILLED"),
    }


def test_a_prestop_sleep_delays_the_signal(world):
    gone = _deleted_states(world)
    hooked = _bare("hooked")
    hooked["spec"]["containers"][0]["lifecycle"] = {"preStop": {"sleep": {"seconds": 5}}}
    script = Script(world).create(0, "pods", hooked)
    script.at(10, lambda: _api(world).delete_namespaced_pod("hooked", NS))
    script.run()
    assert gone["hooked"][0] == 15.0


def test_a_pending_pod_is_deleted_at_once(world):
    world.bind_enabled = False
    gone = _deleted_states(world)
    script = Script(world).create(0, "pods", _bare("waiting", shutdown=20))
    script.at(1, lambda: _api(world).delete_namespaced_pod("waiting", NS))
    script.at(2, lambda: setattr(world, "bind_enabled", True))
    script.run()
    assert gone["waiting"][0] == 1.0


def test_scale_down_leaves_terminating_pods_out_of_the_count_and_recreate_waits(world):
    slow = template(duration="1000")
    slow["metadata"]["annotations"]["timewarp.io/shutdown-seconds"] = "20"
    script = Script(world).create(
        0, "deployments.apps", deployment(2, template=slow, strategy={"type": "Recreate"})
    )
    script.at(10, lambda: world.store.set_replicas("deployments.apps", NS, "web", 1))
    script.look(11, lambda: (
        world.store.get("deployments.apps", NS, "web")["status"]["replicas"],
        len(pods_of(world, app="web")),
    ))  # fmt: skip
    script.at(40, lambda: new_template(world))
    script.look(
        50, lambda: [r["spec"]["replicas"] for r in world.store.list("replicasets.apps", NS)[0]]
    )
    script.look(
        61,
        lambda: rs_sizes(world),
    )
    script.run()
    assert script.seen[11] == (1, 2)  # one Terminating pod: still there, not counted
    assert script.seen[50] == [0]  # the old pod is still terminating: no new ReplicaSet yet
    assert script.seen[61] == [0, 1]


# ------------------------------------------------------------- services' pods in Batsim


def _service(replicas=2, until=100, **extra):
    tpl = template(duration=None)
    tpl["metadata"]["annotations"] = {"timewarp.io/serve-until": str(until), **extra}
    return deployment(replicas, template=tpl)


def test_a_services_pods_are_batsim_jobs_that_live_as_long_as_the_service(world):
    """A Deployment serving until t=100: its pods' jobs end at 100 (however late they
    started), a pod scaled away is killed when it goes, and the simulation lasts until the
    service ends, not until the workload's only job (10 s) does."""
    jobs = [{"id": "1", "subtime": 0, "res": 1, "profile": "short"}]
    profiles = {"short": {"type": "delay", "delay": 10, "cpu": "1"}}
    script = Script(world).create(0, "deployments.apps", _service(2, until=100))
    script.at(50, lambda: world.store.set_replicas("deployments.apps", NS, "web", 3))
    script.at(70, lambda: world.store.set_replicas("deployments.apps", NS, "web", 1))
    sim = script.run((jobs, profiles))
    assert sim.now == pytest.approx(100.0)
    spans = sorted(
        (float(r["starting_time"]), float(r["finish_time"]), r["final_state"])
        for r in world.rows()
        if r["workload_name"] == naming.API_WORKLOAD
    )
    # which two go at 70 is the ReplicaSet's choice; either way: two killed at 70, one
    # served to the end, 0-70 + 0-70 + 50-100 or 0-70 + 50-70 + 0-100 = 190 s of jobs
    assert sorted((finish, state) for _, finish, state in spans) == [
        (70.0, "COMPLETED_KILLED"), (70.0, "COMPLETED_KILLED"), (100.0, "COMPLETED_SUCCESSFULLY")
    ]  # fmt: skip
    assert sum(finish - start for start, finish, _ in spans) == pytest.approx(190.0)
    # every pod is gone or finished when the service ends: nothing runs outside Batsim
    assert world.cluster.stats.pods_outside_batsim == 0
    assert all(q["status"]["phase"] == "Succeeded" for q in pods_of(world, app="web"))


def test_a_service_pod_that_starts_after_the_service_ended_exits_at_once(world):
    late = _service(1, until=5, **{"timewarp.io/container-start-seconds": "8"})
    script = Script(world).create(0, "deployments.apps", late)
    script.run()
    [pod] = pods_of(world, app="web")
    assert pod["status"]["phase"] == "Succeeded"
    state = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (state["exitCode"], state["reason"]) == (0, "Completed")
    assert not [r for r in world.rows() if r["workload_name"] == naming.API_WORKLOAD]
