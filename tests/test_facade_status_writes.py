"""Issue 27 #1, the facade's half: status writes are decoded and validated as
kube-apiserver does them (400 for a value that does not decode into the Go type, 422
from the kind's status validation), so no odd shape reaches the controllers; and the
scale subresource answers whatever the broker itself stored."""

from __future__ import annotations

import pytest
from test_facade_http import RawClient

APPS = "/apis/apps/v1/namespaces/default"
HPAS = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"
MERGE = {"Content-Type": "application/merge-patch+json"}


def _workload(kind: str, name: str) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]},
            },
        },
    }


HPA = {
    "apiVersion": "autoscaling/v2",
    "kind": "HorizontalPodAutoscaler",
    "metadata": {"name": "web"},
    "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "maxReplicas": 5,
    },
}


@pytest.fixture
def client(facade):
    c = RawClient(facade)
    assert c.request("POST", f"{APPS}/deployments", _workload("Deployment", "web"))[0] == 201
    assert c.request("POST", f"{APPS}/replicasets", _workload("ReplicaSet", "cache"))[0] == 201
    assert c.request("POST", HPAS, HPA)[0] == 201
    return c


def _patch_status(client: RawClient, path: str, status: dict) -> tuple[int, dict]:
    return client.request("PATCH", f"{path}/status", {"status": status}, MERGE)


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        (
            f"{APPS}/deployments/web",
            {"conditions": "x"},
            "json: cannot unmarshal string into Go struct field DeploymentStatus.status."
            "conditions of type []v1.DeploymentCondition",
        ),
        (
            f"{APPS}/deployments/web",
            {"collisionCount": [1]},
            "json: cannot unmarshal array into Go struct field DeploymentStatus.status."
            "collisionCount of type int32",
        ),
        (
            f"{APPS}/deployments/web",
            {"conditions": [{"type": "Available", "status": True}]},
            "json: cannot unmarshal bool into Go struct field DeploymentCondition.status."
            "conditions.status of type string",
        ),
        (
            f"{APPS}/replicasets/cache",
            {"replicas": "x"},
            "json: cannot unmarshal string into Go struct field ReplicaSetStatus.status."
            "replicas of type int32",
        ),
        (
            HPAS + "/web",
            {"desiredReplicas": 2**40},
            "json: cannot unmarshal number 1099511627776 into Go struct field "
            "HorizontalPodAutoscalerStatus.status.desiredReplicas of type int32",
        ),
        (
            HPAS + "/web",
            {"conditions": {"type": "AbleToScale"}},
            "json: cannot unmarshal object into Go struct field HorizontalPodAutoscalerStatus."
            "status.conditions of type []v2.HorizontalPodAutoscalerCondition",
        ),
    ],
)
def test_a_status_that_does_not_decode_is_a_400(facade, client, path, status, message):
    before = facade.store.resource_version
    code, body = _patch_status(client, path, status)
    assert code == 400, body
    assert body["reason"] == "BadRequest" and message in body["message"]
    code, body = client.request(
        "PUT", f"{path}/status", {**_stored(client, path), "status": status}
    )
    assert code == 400 and message in body["message"]
    assert facade.store.resource_version == before  # nothing was written


def _stored(client: RawClient, path: str) -> dict:
    code, obj = client.request("GET", path)
    assert code == 200
    return obj


@pytest.mark.parametrize(
    ("path", "status", "causes"),
    [
        (
            f"{APPS}/deployments/web",
            {"replicas": 1, "updatedReplicas": 2, "unavailableReplicas": -1},
            [
                ("status.unavailableReplicas", "Invalid value: -1: must be greater than or equal to 0"),
                ("status.updatedReplicas", "Invalid value: 2: cannot be greater than status.replicas"),
            ],
        ),
        (
            f"{APPS}/deployments/web",
            {"replicas": 3, "readyReplicas": 1, "availableReplicas": 2},
            [("status.availableReplicas", "Invalid value: 2: cannot be greater than readyReplicas")],
        ),
        (
            f"{APPS}/replicasets/cache",
            {"replicas": 1, "fullyLabeledReplicas": 2, "observedGeneration": -3},
            [
                ("status.observedGeneration", "Invalid value: -3: must be greater than or equal to 0"),
                ("status.fullyLabeledReplicas", "Invalid value: 2: cannot be greater than status.replicas"),
            ],
        ),
    ],
)  # fmt: skip
def test_a_status_that_does_not_validate_is_a_422(client, path, status, causes):
    code, body = _patch_status(client, path, status)
    assert code == 422, body
    assert [(c["field"], c["message"]) for c in body["details"]["causes"]] == causes


def test_collision_count_may_not_go_down(client):
    path = f"{APPS}/deployments/web"
    assert _patch_status(client, path, {"collisionCount": 2})[0] == 200
    code, body = _patch_status(client, path, {"collisionCount": 1})
    assert code == 422
    assert "status.collisionCount: Invalid value: 1: cannot be decremented" in body["message"]


def test_a_valid_status_write_is_stored(client):
    status = {
        "replicas": 2,
        "readyReplicas": 2,
        "availableReplicas": 1,
        "conditions": [{"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"}],
    }  # fmt: skip
    code, body = _patch_status(client, f"{APPS}/deployments/web", status)
    assert code == 200 and body["status"] == status


@pytest.mark.parametrize("odd", ["x", [], {"replicas": "many"}, {"replicas": [3]}])
def test_the_scale_of_an_object_whose_stored_status_is_odd_is_not_a_500(facade, client, odd):
    """Only the broker's own writes skip admission; the Scale reads what it can, and a
    write of the Scale changes the replicas only."""
    facade.store.update("deployments.apps", "default", "web", lambda o: o.update(status=odd))
    code, scale = client.request("GET", f"{APPS}/deployments/web/scale")
    assert code == 200, scale
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 0, "selector": "app=web"}
    code, scale = client.request(
        "PATCH", f"{APPS}/deployments/web/scale", {"spec": {"replicas": 3}}, MERGE
    )
    assert code == 200 and scale["spec"] == {"replicas": 3}, scale
    assert facade.store.get("deployments.apps", "default", "web")["status"] == odd


def test_the_scale_shows_what_it_can_of_an_odd_stored_selector(facade, client):
    def oddify(obj):
        obj["spec"]["selector"] = {
            "matchLabels": {"app": "web"},
            "matchExpressions": ["x", {"key": "tier", "operator": "In", "values": 7}],
        }

    facade.store.update("deployments.apps", "default", "web", oddify)
    code, scale = client.request("GET", f"{APPS}/deployments/web/scale")
    assert code == 200, scale
    assert scale["status"]["selector"] == "app=web,tier in ()"


@pytest.mark.parametrize(
    ("odd", "patched"), [("x", 200), ({"replicas": "many", "readyReplicas": [1]}, 400)]
)
def test_a_status_write_over_an_odd_stored_status_is_not_a_500(facade, client, odd, patched):
    facade.store.update("deployments.apps", "default", "web", lambda o: o.update(status=odd))
    path = f"{APPS}/deployments/web/status"
    stored = _stored(client, f"{APPS}/deployments/web")
    del stored["status"]
    stored["metadata"]["labels"] = {"touched": "yes"}  # a status write ignores it
    code, body = client.request("PUT", path, stored)
    assert code == 200 and body["status"] == odd, body
    code, body = _patch_status(client, f"{APPS}/deployments/web", {"replicas": 1})
    # a merge patch keeps what it does not name: the stored readyReplicas does not decode
    assert code == patched, body


def test_an_hpa_status_write_over_an_odd_stored_status_is_not_a_500(facade, client):
    key = "horizontalpodautoscalers.autoscaling"
    facade.store.update(key, "default", "web", lambda o: o.update(status="x"))
    stored = _stored(client, f"{HPAS}/web")
    del stored["status"]
    code, body = client.request("PUT", f"{HPAS}/web/status", stored)
    assert code == 200 and body["status"] == "x", body


# --- what is stored reads back in the official client (found by the live fuzz) ----------
# kube-apiserver stores the decoded Go object: a field without ``omitempty`` comes back
# even when the request left it out or sent null (``"type": ""``), a time is a time, a
# quantity its canonical text. The facade kept the request's shape, and the `hpa`
# sample (the official client's models) died reading an HPA whose status had
# ``currentMetrics: [{"type": null}]`` (tests/test_facade_live_fuzz.py, seed 3).


def _official(kind: str, body: dict):
    from kubernetes import client as k8s

    model = {"hpa": k8s.V2HorizontalPodAutoscaler, "deployment": k8s.V1Deployment,
             "replicaset": k8s.V1ReplicaSet}[kind]  # fmt: skip
    return model.from_dict(body)


@pytest.mark.parametrize(
    ("status", "stored"),
    [
        ({"currentMetrics": [{"type": None}]}, {"currentMetrics": [{"type": ""}]}),
        ({"currentMetrics": [None, {}]}, {"currentMetrics": [{"type": ""}, {"type": ""}]}),
        (
            {"currentMetrics": [{"type": "Resource", "resource": {"current": None}}]},
            {"currentMetrics": [{"type": "Resource", "resource": {"name": "", "current": {}}}]},
        ),
        (
            {"currentMetrics": [{"type": "Pods", "pods": {"metric": {}, "current": {
                "averageValue": 1.5}}}]},
            {"currentMetrics": [{"type": "Pods", "pods": {"metric": {"name": ""}, "current": {
                "averageValue": "1500m"}}}]},
        ),
        ({"conditions": [{}, {"reason": "R"}]},
         {"conditions": [{"type": "", "status": ""}, {"type": "", "status": "", "reason": "R"}]}),
        ({"desiredReplicas": None}, {"desiredReplicas": 0}),
    ],
)  # fmt: skip
def test_an_hpa_status_is_stored_as_go_writes_it_back(client, status, stored):
    code, body = _patch_status(client, f"{HPAS}/web", status)
    assert code == 200, body
    for key, value in stored.items():
        assert body["status"][key] == value
    assert "desiredReplicas" in body["status"]
    _official("hpa", body)  # raised a ValidationError before


@pytest.mark.parametrize(
    ("path", "status", "words"),
    [
        (f"{HPAS}/web", {"lastScaleTime": "x"}, 'parsing time "x"'),
        (f"{HPAS}/web", {"conditions": [{"type": "A", "lastTransitionTime": "soon"}]},
         'parsing time "soon"'),
        (f"{HPAS}/web", {"lastScaleTime": 5}, "cannot unmarshal number"),
        (f"{HPAS}/web", {"currentMetrics": [{"type": "Resource", "resource": "x"}]},
         "v2.ResourceMetricStatus"),
        (f"{APPS}/deployments/web", {"conditions": [{"type": "A", "lastUpdateTime": "soon"}]},
         'parsing time "soon"'),
        (f"{APPS}/deployments/web", {"conditions": [{"lastTransitionTime": "2026-13-01T00:00:00Z"}]},
         "parsing time"),
    ],
)  # fmt: skip
def test_a_time_that_is_not_one_is_a_400(client, path, status, words):
    code, body = _patch_status(client, path, status)
    assert code == 400 and words in body["message"], body


def test_workload_statuses_are_stored_as_go_writes_them_back(client):
    code, body = _patch_status(client, f"{APPS}/deployments/web", {"conditions": [{"reason": "R"}]})
    assert code == 200 and body["status"]["conditions"] == [
        {"type": "", "status": "", "reason": "R"}
    ]
    _official("deployment", body)
    code, body = _patch_status(client, f"{APPS}/replicasets/cache", {"replicas": None})
    assert code == 200 and body["status"]["replicas"] == 0
    _official("replicaset", body)


def test_an_hpa_target_quantity_is_stored_as_its_canonical_text(client):
    hpa = {**HPA, "metadata": {"name": "mem"}}
    hpa["spec"] = {**HPA["spec"], "metrics": [{"type": "Resource", "resource": {
        "name": "memory", "target": {"type": "AverageValue", "averageValue": 5}}}]}  # fmt: skip
    code, body = client.request("POST", HPAS, hpa)
    assert code == 201, body
    assert body["spec"]["metrics"][0]["resource"]["target"]["averageValue"] == "5"
    _official("hpa", body)
