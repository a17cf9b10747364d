"""Issue 27 #13: requests kube-apiserver refuses, refused here as it does (the status
code, and the words where they help the client)."""

from __future__ import annotations

import copy

import pytest
from test_facade_http import RawClient
from test_facade_status_writes import APPS, HPA, HPAS, MERGE, _workload

DEPLOYMENTS = f"{APPS}/deployments"
SCALE = f"{DEPLOYMENTS}/web/scale"


@pytest.fixture
def client(facade):
    c = RawClient(facade)
    assert c.request("POST", DEPLOYMENTS, _workload("Deployment", "web"))[0] == 201
    return c


def _deployment(name: str = "d", meta: dict | None = None, **spec) -> dict:
    body = _workload("Deployment", name)
    body["metadata"].update(meta or {})
    body["spec"].update(spec)
    return body


def _ref(kind: str, name: str, **fields) -> dict:
    return {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": f"uid-{name}", **fields}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            _deployment(paused="yes"),
            "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.paused of "
            "type bool",
        ),
        (
            _deployment(revisionHistoryLimit=2**40),
            "json: cannot unmarshal number 1099511627776 into Go struct field DeploymentSpec."
            "spec.revisionHistoryLimit of type int32",
        ),
    ],
)
def test_deployment_fields_that_do_not_decode_are_a_400(facade, client, body, message):
    code, out = client.request("POST", DEPLOYMENTS, body)
    assert code == 400 and message in out["message"]
    assert facade.store.get_or_none("deployments.apps", "default", "d") is None


def test_owner_references_need_an_api_version_a_kind_a_name_and_a_uid(client):
    code, out = client.request("POST", DEPLOYMENTS, _deployment(meta={"ownerReferences": [{}]}))
    assert code == 422
    assert [(c["field"], c["message"]) for c in out["details"]["causes"]] == [
        ("metadata.ownerReferences.apiVersion", 'Invalid value: "": version must not be empty'),
        ("metadata.ownerReferences.kind", 'Invalid value: "": must not be empty'),
        ("metadata.ownerReferences.name", 'Invalid value: "": must not be empty'),
        ("metadata.ownerReferences.uid", 'Invalid value: "": must not be empty'),
    ]
    refs = {"ownerReferences": [_ref("ReplicaSet", "a")]}
    assert client.request("POST", DEPLOYMENTS, _deployment(meta=refs))[0] == 201


def test_only_one_owner_reference_may_be_the_controller(client):
    refs = [_ref("A", "a", controller=True), _ref("B", "b", controller=False)]
    body = _deployment(meta={"ownerReferences": refs})
    assert client.request("POST", DEPLOYMENTS, body)[0] == 201
    refs[1]["controller"] = True
    code, out = client.request(
        "PATCH", f"{DEPLOYMENTS}/d", {"metadata": {"ownerReferences": refs}}, MERGE
    )
    assert code == 422
    assert 'Only one reference can have Controller set to true. Found "true" in references for A/a and B/b' in out["message"]  # fmt: skip


def _hpa(**target) -> dict:
    hpa = copy.deepcopy(HPA)
    hpa["spec"]["metrics"] = [
        {
            "type": "Pods",
            "pods": {
                "metric": {"name": "requests_per_second"},
                "target": {"type": "AverageValue", **target},
            },
        }
    ]
    return hpa


def test_hpa_values_as_kube_apiserver_decodes_and_validates_them(facade, client):
    too_many = copy.deepcopy(HPA)
    too_many["spec"]["maxReplicas"] = 2**31
    code, out = client.request("POST", HPAS, too_many)
    assert code == 400
    assert "cannot unmarshal number 2147483648 into Go struct field HorizontalPodAutoscalerSpec.spec.maxReplicas of type int32" in out["message"]  # fmt: skip
    code, out = client.request("POST", HPAS, _hpa(averageValue="abc"))
    assert code == 400 and "quantities must match the regular expression" in out["message"]
    code, out = client.request("POST", HPAS, _hpa(averageValue="-1"))
    assert code == 422
    assert (
        'spec.metrics[0].pods.target.averageValue: Invalid value: "-1": must be positive'
        in out["message"]
    )
    assert facade.store.count("horizontalpodautoscalers.autoscaling") == 0
    assert client.request("POST", HPAS, _hpa(averageValue="500m"))[0] == 201


@pytest.mark.parametrize("headers", [{}, {"Content-Type": "text/plain"}])
def test_a_patch_of_the_scale_needs_a_patch_media_type(client, headers):
    code, out = client.request("PATCH", SCALE, {"spec": {"replicas": 3}}, headers)
    assert code == 415 and out["reason"] == "UnsupportedMediaType"


def test_a_scale_body_naming_another_namespace_is_a_400(facade, client):
    body = {"metadata": {"name": "web", "namespace": "other"}, "spec": {"replicas": 3}}
    code, out = client.request("PUT", SCALE, body)
    assert code == 400
    assert out["message"] == (
        "the namespace of the provided object does not match the namespace sent on the request"
    )
    body["metadata"]["namespace"] = "default"
    assert client.request("PUT", SCALE, body)[0] == 200


def test_a_json_patch_removing_the_scales_metadata_is_a_400(facade, client):
    code, out = client.request(
        "PATCH",
        SCALE,
        [{"op": "remove", "path": "/metadata"}],
        {"Content-Type": "application/json-patch+json"},
    )
    assert code == 400
    assert out["message"] == "the name of the object () does not match the name on the URL (web)"
    assert facade.store.get("deployments.apps", "default", "web")["metadata"]["generation"] == 1
