"""apps/v1 ReplicaSets and Deployments reconciled by the broker's controllers, in virtual
time, against the embedded simulator in process (``broker.drivers.inprocess``: a first-fit binder
plays the scheduler), and the ReplicaSet controller's choice of victims."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.controllers import victims
from broker.controllers.deployment import compute_hash, equal_ignore_hash, resolve_fenceposts
from broker.drivers.inprocess import InProcessRun
from broker.facade.objects import format_time
from broker.k8s import naming
from simulator import protocol as p

NS = "default"
ONE_STATIC = (
    [{"id": "1", "subtime": 0, "res": 1, "profile": "long"}],
    {"long": {"type": "delay", "delay": 100, "cpu": "1", "scheduler": "default"}},
)


@pytest.fixture
def world(tmp_path):
    run = InProcessRun(tmp_path, nodes=4, cores=4)
    yield run
    run.close()


def template(image="nginx:1.25", duration="1000", labels=None, **spec):
    pod_spec = {
        "containers": [{"name": "web", "image": image, "resources": {"requests": {"cpu": "1"}}}]
    }
    pod_spec.update(spec)
    meta = {"labels": labels or {"app": "web"}}
    if duration is not None:
        meta["annotations"] = {"timewarp.io/duration": duration}
    return {"metadata": meta, "spec": pod_spec}


def _workload(kind, replicas, name, spec):
    body = {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": "web"}},
        "template": template(),
    }
    body.update(spec)
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": body}


def deployment(replicas=3, name="web", **spec):
    return _workload("Deployment", replicas, name, spec)


def replicaset(replicas=3, name="cache", **spec):
    return _workload("ReplicaSet", replicas, name, spec)


class Script:
    """Things to do at virtual instants, from SIMULATION_BEGINS on (through the store,
    as API requests would: admission included)."""

    def __init__(self, world: InProcessRun) -> None:
        self.world = world
        self.steps: list[tuple[float, object]] = []
        self.seen: dict[float, object] = {}

    def at(self, t: float, fn) -> Script:
        self.steps.append((t, fn))
        return self

    def look(self, t: float, fn) -> Script:
        return self.at(t, lambda: self.seen.__setitem__(t, fn()))

    def create(self, t: float, key: str, obj: dict) -> Script:
        store, hooks = self.world.store, self.world.facade.hooks
        return self.at(t, lambda: store.create(key, obj, namespace=NS, prepare=hooks.on_create))

    def before(self, message) -> None:
        if any(isinstance(e.data, p.SimulationBegins) for e in message.events):
            for t, fn in self.steps:
                if t == 0:
                    fn()
                else:
                    self.world.clock.call_at(int(t * 1e9), fn)

    def run(self, workload=ONE_STATIC):
        return self.world.run(*workload, before=self.before)


def pods_of(world, **labels):
    selector = ",".join(f"{k}={v}" for k, v in labels.items()) or None
    return world.store.list("pods", NS, label_selector=selector)[0]


def active(pods):
    return [
        q for q in pods
        if q["status"].get("phase") not in ("Succeeded", "Failed")
        and not q["metadata"].get("deletionTimestamp")
    ]  # fmt: skip


def new_template(world):
    """Change the Deployment ``web``'s template (a label ``v: "2"``): a new rollout."""
    world.store.patch(
        "deployments.apps", NS, "web",
        {"spec": {"template": {"metadata": {"labels": {"app": "web", "v": "2"}}}}},
    )  # fmt: skip


def rs_sizes(world):
    """The ``spec.replicas`` of the namespace's ReplicaSets, smallest first."""
    return sorted(r["spec"]["replicas"] for r in world.store.list("replicasets.apps", NS)[0])


def events(world, component):
    found = [e for e in world.store.list("events", NS)[0] if e["source"]["component"] == component]
    return [
        e["message"] for e in sorted(found, key=lambda e: int(e["metadata"]["resourceVersion"]))
    ]


# ------------------------------------------------------------------ ReplicaSet controller


def test_an_api_replicaset_creates_its_pods_and_reports_them(world):
    script = Script(world).create(0, "replicasets.apps", replicaset(3))
    script.look(1, lambda: world.store.get("replicasets.apps", NS, "cache"))
    script.run()
    rs = script.seen[1]
    assert rs["status"] == {
        "replicas": 3,
        "fullyLabeledReplicas": 3,
        "readyReplicas": 3,
        "availableReplicas": 3,
        "observedGeneration": 1,
    }
    pods = pods_of(world, app="web")
    assert len(active(pods)) == 3
    for pod in pods:
        meta = pod["metadata"]
        assert meta["name"].startswith("cache-") and len(meta["name"]) == len("cache-") + 5
        [owner] = meta["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
            "ReplicaSet", "cache", rs["metadata"]["uid"], True
        )  # fmt: skip
        assert pod["spec"]["restartPolicy"] == "Always"
    created = events(world, "replicaset-controller")
    assert sorted(created)[:3] == sorted(f"Created pod: {q['metadata']['name']}" for q in pods)[:3]
    # its pods are Batsim jobs of the k8s workload (timewarp.io/duration on the template)
    k8s = [r for r in world.rows() if r["workload_name"] == naming.API_WORKLOAD]
    assert len(k8s) >= 3


def test_scaling_a_replicaset_down_deletes_unready_pods_first_then_the_newest(world):
    """Two pods stay Pending (no room), four run; scaling 6 -> 3 deletes the two Pending
    ones, then the most recently created Running one."""
    world.bind_enabled = True
    script = Script(world)
    script.create(0, "replicasets.apps", replicaset(2))
    script.at(40, lambda: world.store.set_replicas("replicasets.apps", NS, "cache", 4))
    script.at(80, lambda: setattr(world, "bind_enabled", False))
    script.at(80, lambda: world.store.set_replicas("replicasets.apps", NS, "cache", 6))
    script.look(81, lambda: {q["metadata"]["name"]: q for q in active(pods_of(world, app="web"))})
    script.at(90, lambda: world.store.set_replicas("replicasets.apps", NS, "cache", 3))
    script.look(91, lambda: {q["metadata"]["name"] for q in active(pods_of(world, app="web"))})
    script.run()
    before = script.seen[81]
    pending = {n for n, q in before.items() if not q["spec"].get("nodeName")}
    running = sorted(
        (q["metadata"]["creationTimestamp"], n)
        for n, q in before.items()
        if q["spec"].get("nodeName")
    )
    assert len(pending) == 2 and len(running) == 4
    newest = running[-1][1]
    assert script.seen[91] == set(before) - pending - {newest}


def test_deleting_a_replicaset_deletes_its_pods_and_orphans_are_adopted(world):
    orphan = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "stray", "labels": {"app": "web"}},
        "spec": template()["spec"],
    }
    script = Script(world).create(0, "pods", orphan).create(0, "replicasets.apps", replicaset(2))
    script.look(1, lambda: [q["metadata"] for q in active(pods_of(world, app="web"))])
    script.at(5, lambda: world.store.delete("replicasets.apps", NS, "cache"))
    script.look(6, lambda: active(pods_of(world, app="web")))
    script.run()
    metas = {m["name"]: m for m in script.seen[1]}
    assert len(metas) == 2 and "stray" in metas  # adopted, counted: one pod created
    assert metas["stray"]["ownerReferences"][0]["name"] == "cache"
    assert script.seen[6] == []


def test_a_relabelled_pod_is_released_and_replaced(world):
    def relabel():
        name = sorted(q["metadata"]["name"] for q in pods_of(world, app="web"))[0]
        world.store.patch("pods", NS, name, {"metadata": {"labels": {"app": "debug"}}})
        return name

    script = Script(world).create(0, "replicasets.apps", replicaset(2))
    script.look(5, relabel)
    script.look(6, lambda: world.store.get("pods", NS, script.seen[5]))
    script.run()
    assert "ownerReferences" not in script.seen[6]["metadata"]
    assert len(active(pods_of(world, app="web"))) == 2


def test_a_template_that_cannot_make_pods_reports_replica_failure(world):
    bad = replicaset(1)
    bad["spec"]["template"]["spec"]["priorityClassName"] = "no-such-class"
    script = Script(world).create(0, "replicasets.apps", bad)
    script.look(1, lambda: world.store.get("replicasets.apps", NS, "cache")["status"])
    script.run()
    [failure] = script.seen[1]["conditions"]
    assert (failure["type"], failure["status"], failure["reason"]) == (
        "ReplicaFailure", "True", "FailedCreate"
    )  # fmt: skip
    assert "no PriorityClass with name no-such-class" in failure["message"]
    warnings = events(world, "replicaset-controller")
    assert warnings and warnings[0].startswith("Error creating: ")


def test_workload_replicasets_are_left_to_the_workload(world):
    """A job's ``replicaset`` owner is the workload's: its size follows the jobs submitted,
    a completed pod is not replaced."""
    jobs = [{"id": str(i), "subtime": 0, "res": 1, "profile": "rs"} for i in range(2)]
    profiles = {"rs": {"type": "delay", "delay": 5, "cpu": "1", "replicaset": "app"}}
    world.run(jobs, profiles)
    pods = world.store.list("pods", NS)[0]
    assert len(pods) == 2 and {q["status"]["phase"] for q in pods} == {"Succeeded"}
    assert "status" not in world.store.get("replicasets.apps", NS, "app")


# ----------------------------------------------------------------------- victims order


def _pod(i, node="n1", phase="Running", ready_at=None, created=0, cost=None):
    pod = {
        "metadata": {
            "name": f"p{i:02d}",
            "uid": f"uid-{i:02d}",
            "creationTimestamp": format_time(created * 10**9),
        },
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase, "conditions": []},
    }
    if ready_at is not None:
        pod["status"]["conditions"].append(
            {"type": "Ready", "status": "True", "lastTransitionTime": format_time(ready_at * 10**9)}
        )
    if cost is not None:
        pod["metadata"]["annotations"] = {"controller.kubernetes.io/pod-deletion-cost": str(cost)}
    return pod


pod_strategy = st.builds(
    lambda node, phase, ready, created, cost: (node, phase, ready, created, cost),
    st.sampled_from(["", "n1", "n2", "n3"]),
    st.sampled_from(["Pending", "Unknown", "Running"]),
    st.one_of(st.none(), st.integers(0, 5000)),
    st.integers(0, 5000),
    st.one_of(st.none(), st.integers(-3, 3)),
)


@given(st.lists(pod_strategy, min_size=1, max_size=12))
@settings(max_examples=200)
def test_victims_follow_the_controllers_first_criteria(specs):
    """Unassigned before assigned, then Pending < Unknown < Running, then not Ready before
    Ready, then cheaper, then doubled-up: the deletion order never goes back on these."""
    pods = [
        _pod(i, node, phase, ready, created, cost)
        for i, (node, phase, ready, created, cost) in enumerate(specs)
    ]
    now = 6000 * 10**9
    order = victims.deletion_order(pods, pods, now)
    assert sorted(q["metadata"]["name"] for q in order) == sorted(
        q["metadata"]["name"] for q in pods
    )
    per_node = {}
    for q in pods:
        node = q["spec"].get("nodeName", "")
        per_node[node] = per_node.get(node, 0) + 1

    def key(q):
        ready = any(c["type"] == "Ready" for c in q["status"]["conditions"])
        cost = int((q["metadata"].get("annotations") or {}).get(
            "controller.kubernetes.io/pod-deletion-cost", 0))  # fmt: skip
        node = q["spec"].get("nodeName", "")
        return (bool(node), ["Pending", "Unknown", "Running"].index(q["status"]["phase"]),
                ready, cost, -per_node[node])  # fmt: skip

    keys = [key(q) for q in order]
    assert keys == sorted(keys)


@given(st.lists(st.integers(0, 18), min_size=2, max_size=8, unique=True))
def test_among_ready_pods_the_most_recently_ready_goes_first(ages_log2):
    """Ready pods, one per node, Ready for 2**k seconds with distinct k (distinct
    logarithmic buckets): the most recently Ready goes first (LogarithmicScaleDown)."""
    now_s = 10**6
    pods = [
        _pod(i, node=f"n{i}", ready_at=now_s - 2**k, created=0) for i, k in enumerate(ages_log2)
    ]
    order = victims.deletion_order(pods, pods, now_s * 10**9)
    ages = [now_s - victims.podutil.ready_since_ns(q) // 10**9 for q in order]
    assert ages == sorted(ages)


def test_pods_to_delete_takes_all_when_all_go():
    pods = [_pod(i) for i in range(3)]
    assert victims.pods_to_delete(pods, pods, 5, 0) == pods


# ------------------------------------------------------------------ Deployment controller


def test_a_deployment_makes_a_hashed_replicaset_and_reports_like_the_real_controller(world):
    script = Script(world).create(0, "deployments.apps", deployment(3))
    script.look(1, lambda: world.store.get("deployments.apps", NS, "web"))
    script.run()
    d = script.seen[1]
    [rs] = world.store.list("replicasets.apps", NS)[0]
    hash_ = rs["metadata"]["labels"]["pod-template-hash"]
    assert rs["metadata"]["name"] == f"web-{hash_}"
    assert set(hash_) <= set("bcdfghjklmnpqrstvwxz2456789") and 1 <= len(hash_) <= 10
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": hash_}
    assert rs["spec"]["template"]["metadata"]["labels"]["pod-template-hash"] == hash_
    assert rs["metadata"]["annotations"] == {
        "deployment.kubernetes.io/revision": "1",
        "deployment.kubernetes.io/desired-replicas": "3",
        "deployment.kubernetes.io/max-replicas": "4",
    }
    assert rs["metadata"]["ownerReferences"][0]["name"] == "web"
    assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    status = d["status"]
    assert {k: v for k, v in status.items() if k != "conditions"} == {
        "observedGeneration": 1,
        "replicas": 3,
        "updatedReplicas": 3,
        "readyReplicas": 3,
        "availableReplicas": 3,
    }
    conditions = {c["type"]: c for c in status["conditions"]}
    assert [c["type"] for c in status["conditions"]] == ["Available", "Progressing"]
    assert conditions["Available"]["reason"] == "MinimumReplicasAvailable"
    assert conditions["Progressing"]["reason"] == "NewReplicaSetAvailable"
    assert (
        conditions["Progressing"]["message"]
        == f'ReplicaSet "web-{hash_}" has successfully progressed.'
    )
    assert events(world, "deployment-controller") == [f"Scaled up replica set web-{hash_} to 3"]
    pods = active(pods_of(world, app="web"))
    assert len(pods) == 3 and {q["metadata"]["labels"]["pod-template-hash"] for q in pods} == {
        hash_
    }


def test_the_hash_is_the_same_for_the_same_template_and_moves_with_collisions():
    t = template()
    assert compute_hash(t, None) == compute_hash(json.loads(json.dumps(t)), None)
    assert compute_hash(t, None) != compute_hash(t, 1)
    assert compute_hash(t, 1) != compute_hash(t, 2)
    changed = template(image="nginx:1.26")
    assert compute_hash(t, None) != compute_hash(changed, None)
    with_hash = json.loads(json.dumps(t))
    with_hash["metadata"]["labels"]["pod-template-hash"] = "abc"
    assert equal_ignore_hash(t, with_hash) and not equal_ignore_hash(t, changed)


def test_scaling_through_the_scale_subresource_resizes_the_replicaset(world):
    script = Script(world).create(0, "deployments.apps", deployment(2))
    script.at(10, lambda: world.store.set_replicas("deployments.apps", NS, "web", 5))
    script.look(11, lambda: len(active(pods_of(world, app="web"))))
    script.at(20, lambda: world.store.set_replicas("deployments.apps", NS, "web", 1))
    script.look(21, lambda: world.store.get("deployments.apps", NS, "web")["status"])
    script.run()
    assert script.seen[11] == 5
    status = script.seen[21]
    assert (status["replicas"], status["availableReplicas"], status["observedGeneration"]) == (
        1,
        1,
        3,
    )
    [rs] = world.store.list("replicasets.apps", NS)[0]
    name = rs["metadata"]["name"]
    assert events(world, "deployment-controller") == [
        f"Scaled up replica set {name} to 2",
        f"Scaled up replica set {name} to 5 from 2",
        f"Scaled down replica set {name} to 1 from 5",
    ]
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/desired-replicas"] == "1"


def test_a_template_change_rolls_out_within_max_surge_and_max_unavailable(world):
    """4 replicas, 25%/25% (surge 1, unavailable 1): the event sequence of a real rollout,
    and the revision annotations."""
    script = Script(world).create(0, "deployments.apps", deployment(4))
    script.at(
        10,
        lambda: world.store.patch(
            "deployments.apps", NS, "web",
            {"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:2"}]}}}},
            "application/strategic-merge-patch+json",
        ),
    )  # fmt: skip
    script.run()
    rss = sorted(
        world.store.list("replicasets.apps", NS)[0],
        key=lambda r: r["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
    )
    old, new = (r["metadata"]["name"] for r in rss)
    assert [r["spec"]["replicas"] for r in rss] == [0, 4]
    said = events(world, "deployment-controller")
    assert said[:3] == [
        f"Scaled up replica set {old} to 4",
        f"Scaled up replica set {new} to 1",
        f"Scaled down replica set {old} to 3 from 4",
    ]
    assert said[-1] in (
        f"Scaled down replica set {old} to 0 from 1",
        f"Scaled up replica set {new} to 4 from 3",
    )
    d = world.store.get("deployments.apps", NS, "web")
    assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    assert all(
        q["spec"]["containers"][0]["image"] == "nginx:2" for q in active(pods_of(world, app="web"))
    )


def test_proportional_scaling_during_a_stuck_rollout(world):
    """The documentation's example: 10 replicas, maxSurge 3, maxUnavailable 2, the new
    pods never become ready (8 old + 5 new); scaling to 15 adds 3 old and 2 new."""
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 3, "maxUnavailable": 2}}
    script = Script(world).create(0, "deployments.apps", deployment(10, strategy=strategy))
    script.at(10, lambda: setattr(world, "bind_enabled", False))
    script.at(10, lambda: new_template(world))
    script.look(
        11,
        lambda: rs_sizes(world),
    )
    script.at(20, lambda: world.store.set_replicas("deployments.apps", NS, "web", 15))
    script.look(
        21,
        lambda: rs_sizes(world),
    )
    script.run()
    assert script.seen[11] == [5, 8]
    assert script.seen[21] == [7, 11]


def test_recreate_scales_the_old_replicaset_to_zero_before_making_the_new_one(world):
    script = Script(world).create(
        0, "deployments.apps", deployment(2, strategy={"type": "Recreate"})
    )
    script.at(10, lambda: new_template(world))
    script.run()
    rss = {
        r["metadata"]["annotations"]["deployment.kubernetes.io/revision"]: r
        for r in world.store.list("replicasets.apps", NS)[0]
    }
    old, new = rss["1"]["metadata"]["name"], rss["2"]["metadata"]["name"]
    assert events(world, "deployment-controller") == [
        f"Scaled up replica set {old} to 2",
        f"Scaled down replica set {old} to 0 from 2",
        f"Scaled up replica set {new} to 2",
    ]


def test_a_deployment_that_cannot_progress_times_out_in_virtual_time(world):
    """No pod can be scheduled: after progressDeadlineSeconds of virtual time without
    progress, Progressing turns False with ProgressDeadlineExceeded."""
    huge = template()
    huge["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "64"  # no node fits
    script = Script(world).create(
        0, "deployments.apps", deployment(1, progressDeadlineSeconds=30, template=huge)
    )
    script.look(20, lambda: world.store.get("deployments.apps", NS, "web")["status"])
    script.look(40, lambda: world.store.get("deployments.apps", NS, "web")["status"])
    script.run()
    progressing = {c["type"]: c for c in script.seen[20]["conditions"]}["Progressing"]
    assert (progressing["status"], progressing["reason"]) == ("True", "ReplicaSetUpdated")
    conditions = {c["type"]: c for c in script.seen[40]["conditions"]}
    assert (conditions["Progressing"]["status"], conditions["Progressing"]["reason"]) == (
        "False", "ProgressDeadlineExceeded"
    )  # fmt: skip
    assert conditions["Available"]["reason"] == "MinimumReplicasUnavailable"
    assert script.seen[40]["unavailableReplicas"] == 1


def test_old_replicasets_beyond_the_history_limit_are_deleted(world):
    script = Script(world).create(0, "deployments.apps", deployment(1, revisionHistoryLimit=1))
    for i, t in enumerate((10, 20, 30)):
        script.at(
            t,
            lambda i=i: world.store.patch(
                "deployments.apps", NS, "web",
                {"spec": {"template": {"metadata": {"labels": {"app": "web", "v": str(i)}}}}},
            ),
        )  # fmt: skip
    script.run()
    revisions = sorted(
        r["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
        for r in world.store.list("replicasets.apps", NS)[0]
    )
    assert revisions == ["3", "4"]


def test_deleting_a_deployment_deletes_its_replicasets_and_pods(world):
    script = Script(world).create(0, "deployments.apps", deployment(2))
    script.at(5, lambda: world.store.delete("deployments.apps", NS, "web"))
    script.look(
        6, lambda: (world.store.list("replicasets.apps", NS)[0], active(pods_of(world, app="web")))
    )
    script.run()
    assert script.seen[6] == ([], [])


def test_fenceposts_resolve_like_the_real_controller():
    def d(replicas, surge, unavailable):
        return {
            "spec": {
                "replicas": replicas,
                "strategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable},
                },
            }
        }

    assert resolve_fenceposts(d(10, "25%", "25%")) == (3, 2)
    assert resolve_fenceposts(d(1, "25%", "25%")) == (1, 0)
    assert resolve_fenceposts(d(2, "0%", "1%")) == (0, 1)  # both 0: unavailable 1
    assert resolve_fenceposts(d(3, 0, 2)) == (0, 2)


# ------------------------------------------------------------ rolling update properties

int_or_percent = st.one_of(st.integers(0, 3), st.integers(0, 100).map(lambda p: f"{p}%"))


@given(
    replicas=st.integers(1, 5),
    surge=int_or_percent,
    unavailable=int_or_percent,
    ready_after=st.sampled_from([0, 5, 12]),
)
@settings(max_examples=25)
def test_a_rollout_keeps_within_its_bounds_and_ends_on_the_new_template(
    tmp_path_factory, replicas, surge, unavailable, ready_after
):
    """Whatever the sizes (ints or percentages, rounded as the real controller rounds them)
    and however long pods take to become Ready: during the rollout the ReplicaSets never
    ask for more than replicas + maxSurge pods, Ready pods never drop below
    replicas − maxUnavailable, and it ends with every pod on the new template."""
    if str(surge).rstrip("%") == "0" and str(unavailable).rstrip("%") == "0":
        unavailable = 1  # both 0 is refused by validation
    from broker.controllers.deployment import resolve_fenceposts

    strategy = {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable},
    }
    probed = template()
    if ready_after:
        probed["spec"]["containers"][0]["readinessProbe"] = {
            "exec": {"command": ["true"]}, "initialDelaySeconds": ready_after, "periodSeconds": 1,
        }  # fmt: skip
    manifest = deployment(replicas, strategy=strategy, template=probed)
    max_surge, max_unavailable = resolve_fenceposts(manifest)
    max_unavailable = min(max_unavailable, replicas)
    world = InProcessRun(tmp_path_factory.mktemp("rollout"), nodes=4, cores=8)
    worst = {"pods": 0, "ready": replicas}
    rolling = {"on": False}

    def watch(key, _event, _obj):
        if not rolling["on"] or key not in ("pods", "replicasets.apps"):
            return
        rss = world.store.list("replicasets.apps", NS)[0]
        worst["pods"] = max(worst["pods"], sum(r["spec"]["replicas"] for r in rss))
        ready = [
            q for q in active(pods_of(world, app="web"))
            if any(c["type"] == "Ready" and c["status"] == "True" for c in q["status"].get("conditions", []))
        ]  # fmt: skip
        worst["ready"] = min(worst["ready"], len(ready))

    def roll():
        world.store.add_listener(watch) if not rolling["on"] else None
        rolling["on"] = True
        new_template(world)

    try:
        script = Script(world).create(0, "deployments.apps", manifest)
        script.at(30, roll)
        script.look(300, lambda: active(pods_of(world, app="web")))
        script.at(300, lambda: rolling.update(on=False))  # its pods' 1000 s jobs end later
        script.run(([{"id": "1", "subtime": 0, "res": 1, "profile": "long"}],
                    {"long": {"type": "delay", "delay": 400, "cpu": "1", "scheduler": "default"}}))  # fmt: skip
        assert worst["pods"] <= replicas + max_surge
        assert worst["ready"] >= replicas - max_unavailable
        final = script.seen[300]
        assert len(final) == replicas and all(
            q["metadata"]["labels"].get("v") == "2" for q in final
        )
    finally:
        world.close()


def test_a_put_of_the_same_manifest_is_defaulted_again_and_rolls_nothing(world):
    """``kubectl replace`` with the manifest as first written (no defaults in it): the
    server defaults it again, so the template is unchanged — no new ReplicaSet, no new
    generation."""
    manifest = deployment(2)
    script = Script(world).create(0, "deployments.apps", manifest)
    script.at(
        10,
        lambda: world.store.replace(
            "deployments.apps", json.loads(json.dumps(manifest)), namespace=NS
        ),
    )
    script.look(
        11, lambda: world.store.get("deployments.apps", NS, "web")["metadata"]["generation"]
    )
    script.run()
    assert script.seen[11] == 1
    assert len(world.store.list("replicasets.apps", NS)[0]) == 1


# ------------------------------------------------------------------ a huge spec.replicas


def test_scaling_to_a_billion_replicas_creates_bursts_while_time_moves(world):
    """issue 27 item 2: ``…/scale`` to 10^9 (a valid int32) no longer hangs the run in
    one virtual instant: one burst of 500 per 25 s of virtual time (slow-start batches
    within it), the run ends with the static workload, the summary counts the rest."""
    from broker.controllers import bursts, replicaset

    forty = (
        [{"id": "1", "subtime": 0, "res": 1, "profile": "p"}],
        {"p": {"type": "delay", "delay": 40, "cpu": "1", "scheduler": "default"}},
    )
    web = deployment(2, template=template(duration=None))  # its pods run until deleted
    script = Script(world).create(0, "deployments.apps", web)
    script.at(10, lambda: world.store.patch(
        "deployments.apps", NS, "web", {"spec": {"replicas": 10**9}}))  # fmt: skip
    for t in (10.5, 34, 36):
        script.look(t, lambda: len(pods_of(world, app="web")))
    sim = script.run(forty)
    # the static job ends at t=40; the wake-up asked for the next burst (t=60) is the
    # simulation's last event, as any CALL_ME_LATER pending at the end
    assert sim.ended and sim.now == pytest.approx(60.0)
    burst = replicaset.BURST_REPLICAS
    assert bursts.BURST_INTERVAL_NS == 25 * 10**9
    # bursts at t=10, 35 and 60, each of 500 (the first one counts the two pods there)
    assert script.seen[10.5] == burst + 2 == script.seen[34]
    assert script.seen[36] == 2 * burst + 2
    made = len(pods_of(world, app="web"))
    assert made == 3 * burst + 2
    assert world.cluster.stats.pods_deferred == 10**9 - made
    (warning,) = world.events(bursts.DEFERRED)
    assert (
        warning["type"] == "Warning"
        and f"{10**9 - 502} pods are still to create" in warning["message"]
    )
    (rs,) = world.store.list("replicasets.apps", NS)[0]
    assert rs["status"]["replicas"] == made


@pytest.mark.parametrize("then", ["scaled back", "deleted"])
def test_the_summary_counts_pods_never_made_not_a_shortfall_made_up(world, then):
    """Scaled back down, the ReplicaSet has every pod it wants: nothing was left undone.
    Deleted while short, its shortfall stays: those pods were wanted and never made."""
    from broker.controllers import bursts

    forty = (
        [{"id": "1", "subtime": 0, "res": 1, "profile": "p"}],
        {"p": {"type": "delay", "delay": 40, "cpu": "1", "scheduler": "default"}},
    )
    web = deployment(2, template=template(duration=None))
    script = Script(world).create(0, "deployments.apps", web)
    script.at(10, lambda: world.store.patch(
        "deployments.apps", NS, "web", {"spec": {"replicas": 10**9}}))  # fmt: skip
    if then == "scaled back":
        script.at(30, lambda: world.store.patch(
            "deployments.apps", NS, "web", {"spec": {"replicas": 3}}))  # fmt: skip
    else:
        script.at(30, lambda: world.store.delete("deployments.apps", NS, "web"))
    script.run(forty)
    assert len(world.events(bursts.DEFERRED)) == 1
    expected = 0 if then == "scaled back" else 10**9 - (bursts.BURST + 2)
    assert world.cluster.stats.pods_deferred == expected
