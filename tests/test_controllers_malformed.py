"""The controllers never trust a stored object's shape (issue 27, item 1): a status a
scheduler wrote that does not decode into the Go types (conditions ``"x"``, replicas
``"x"``, a ``collisionCount`` list, a status that is not an object, a pod's conditions
``"x"``) is read as kube-controller-manager reads typed objects — the malformed field
absent or zero — and the run goes on: the driver thread never dies of it.

The writes go straight to the store, behind the API's validation, as any stored object
the controllers read might be."""

from __future__ import annotations

import pytest

from broker.controllers.typed import typed
from broker.drivers.inprocess import InProcessRun
from simulator import protocol as p

NS = "default"
STATIC = (
    [{"id": "1", "subtime": 0, "res": 1, "profile": "long"}],
    {"long": {"type": "delay", "delay": 60, "cpu": "1", "scheduler": "default"}},
)


def _template(duration: str = "1000") -> dict:
    return {
        "metadata": {"labels": {"app": "web"}, "annotations": {"timewarp.io/duration": duration}},
        "spec": {
            "restartPolicy": "Always",
            "containers": [
                {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "100m"}}}
            ],
        },
    }


DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web"},
    "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": _template()},
}
JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "pi"},
    "spec": {"completions": 2, "template": {**_template("20"), "spec": {
        **_template()["spec"], "restartPolicy": "Never"}}},
}  # fmt: skip


def _status(value):
    def edit(obj: dict) -> None:
        obj["status"] = value(obj.get("status")) if callable(value) else value

    return edit


def _replicas(n):
    def edit(obj: dict) -> None:
        obj["spec"]["replicas"] = n

    return edit


def _merge(**fields):
    return lambda old: {**(old if isinstance(old, dict) else {}), **fields}


def _first_rs(world) -> str:
    return sorted(r["metadata"]["name"] for r in world.store.list("replicasets.apps", NS)[0])[0]


def _first_pod(world, prefix: str) -> str:
    pods = world.store.list("pods", NS)[0]
    return sorted(q["metadata"]["name"] for q in pods if q["metadata"]["name"].startswith(prefix))[
        0
    ]


CASES = {
    "deployment conditions x": ("deployments.apps", lambda w: "web", _merge(conditions="x")),
    "deployment status x": ("deployments.apps", lambda w: "web", "x"),
    "deployment status list": ("deployments.apps", lambda w: "web", [1, 2]),
    "deployment collisionCount list": (
        "deployments.apps", lambda w: "web", _merge(collisionCount=[1]),
    ),
    "deployment counts strings": (
        "deployments.apps", lambda w: "web",
        _merge(replicas="x", availableReplicas="2", observedGeneration=1.5, collisionCount=True),
    ),
    "deployment condition entries": (
        "deployments.apps", lambda w: "web",
        _merge(conditions=[1, "x", {"type": 5}, {"type": "Progressing", "lastUpdateTime": "soon"}]),
    ),
    "replicaset replicas x": ("replicasets.apps", _first_rs, _merge(replicas="x")),
    "replicaset status x": ("replicasets.apps", _first_rs, "x"),
    "replicaset conditions": ("replicasets.apps", _first_rs, _merge(conditions={"a": 1})),
    "job conditions x": ("jobs.batch", lambda w: "pi", _merge(conditions="x")),
    "job status list": ("jobs.batch", lambda w: "pi", []),
    "job counts": ("jobs.batch", lambda w: "pi", _merge(active="x", succeeded=[1], ready={})),
    "job times": ("jobs.batch", lambda w: "pi", _merge(startTime=5, completionTime="later")),
    "job uncounted": ("jobs.batch", lambda w: "pi", _merge(uncountedTerminatedPods="x")),
    "pod conditions x": ("pods", lambda w: _first_pod(w, "web-"), _merge(conditions="x")),
    "pod ready time": (
        "pods", lambda w: _first_pod(w, "web-"),
        _merge(conditions=[{"type": "Ready", "status": "True", "lastTransitionTime": "x"}]),
    ),
    "pod container statuses": (
        "pods", lambda w: _first_pod(w, "web-"),
        _merge(containerStatuses=["x", {"restartCount": "many"}], phase=7),
    ),
    "job pod phase": ("pods", lambda w: _first_pod(w, "pi-"), _merge(phase=["Running"])),
    "job pod container state x": (
        "pods", lambda w: _first_pod(w, "pi-"), _merge(containerStatuses=[{"name": "c", "state": "x"}]),
    ),
    "job pod container running x": (
        "pods", lambda w: _first_pod(w, "pi-"),
        _merge(containerStatuses=[{"name": "c", "state": {"running": "x"}, "lastState": 5}]),
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_malformed_stored_status_does_not_stop_the_controllers(tmp_path, case):
    key, name_of, value = CASES[case]
    world = InProcessRun(tmp_path, nodes=2, cores=4)
    seen: dict = {}

    def corrupt() -> None:
        name = name_of(world)
        world.store.update(key, NS, name, _status(value), copy=False)
        seen["corrupted"] = name

    def before(message) -> None:
        if any(isinstance(e.data, p.SimulationBegins) for e in message.events):
            hooks = world.facade.hooks
            world.store.create(
                "deployments.apps", DEPLOYMENT, namespace=NS, prepare=hooks.on_create
            )
            world.store.create("jobs.batch", JOB, namespace=NS, prepare=hooks.on_create)
            world.clock.call_at(5 * 10**9, corrupt)
            # after the corruption, the Deployment is scaled: the controllers must act on it
            # (written as the corruption was, past the API's door: a PATCH through the API
            # now decodes the whole stored object, and refuses the corrupt status itself)
            world.clock.call_at(
                10 * 10**9,
                lambda: world.store.update("deployments.apps", NS, "web", _replicas(3), copy=False),
            )

    try:
        sim = world.run(*STATIC, before=before)
        assert sim.ended and seen["corrupted"]
        deployment = world.store.get("deployments.apps", NS, "web")
        job = world.store.get("jobs.batch", NS, "pi")
        pods = world.store.list("pods", NS, label_selector="app=web")[0]
    finally:
        world.close()
    # the controllers went on: the Deployment reached 3 replicas, its status well-formed
    active = [q for q in pods if q["status"].get("phase") == "Running" and q["metadata"][
        "name"].startswith("web-") and not q["metadata"].get("deletionTimestamp")]  # fmt: skip
    assert len(active) == 3
    assert deployment["status"]["replicas"] == 3
    assert isinstance(deployment["status"]["conditions"], list)
    assert isinstance(job["status"], dict) and isinstance(job["status"].get("conditions", []), list)


def test_typed_leaves_a_well_formed_object_as_it_is():
    obj = {
        "metadata": {"name": "web"},
        "status": {
            "replicas": 3,
            "collisionCount": 0,
            "conditions": [
                {"type": "Available", "status": "True", "lastUpdateTime": "2026-01-01T00:00:00Z",
                 "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "R", "message": "m"}
            ],
        },
    }  # fmt: skip
    assert typed("deployments.apps", obj) is obj
    assert typed("configmaps", {"status": "x"}) == {"status": "x"}


def test_typed_drops_what_does_not_decode():
    assert typed("deployments.apps", {"status": "x"}) == {}
    fixed = typed(
        "replicasets.apps",
        {"status": {"replicas": "x", "readyReplicas": 2, "conditions": [1, {"type": "A"}]}},
    )
    assert fixed == {"status": {"readyReplicas": 2, "conditions": [{"type": "A", "status": ""}]}}
