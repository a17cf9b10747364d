"""Admission through the API (issue 17 items 2, 3, 8, 9, 14): what kube-apiserver answers
to bodies that do not decode (400), objects that do not validate (422), absurd
quantities, and the request odds and ends (Accept, timeouts, resourceVersions, continue
tokens, nesting) — and that nothing of it reaches the store or breaks other clients."""

from __future__ import annotations

import base64
import http.client
import json

import pytest

from broker.facade import ApiError, Hooks
from broker.k8s.quantity import ERR_FORMAT

QUANTITY_ERROR = ERR_FORMAT


def call(facade, method, path, body=None, headers=None):
    conn = http.client.HTTPConnection(facade.host, facade.port, timeout=30)
    data = None
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
    hdrs = {"Authorization": f"Bearer {facade.token}", "Content-Type": "application/json"}
    hdrs.update(headers or {})
    conn.request(method, path, body=data, headers=hdrs)
    resp = conn.getresponse()
    raw = resp.read()
    conn.close()
    return resp.status, json.loads(raw) if raw.startswith(b"{") else raw


def pod(name="p", *, requests=None, limits=None, labels=None, annotations=None, **meta):
    container = {"name": "c", "image": "busybox"}
    if requests is not None or limits is not None:
        container["resources"] = {}
        if requests is not None:
            container["resources"]["requests"] = requests
        if limits is not None:
            container["resources"]["limits"] = limits
    metadata = {"name": name, **meta}
    if labels is not None:
        metadata["labels"] = labels
    if annotations is not None:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": [container]},
    }


PODS = "/api/v1/namespaces/default/pods"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (pod(requests={"cpu": "abc"}), QUANTITY_ERROR),
        (pod(requests={"cpu": True}), QUANTITY_ERROR),
        (
            pod(requests=["cpu", "1"]),
            "json: cannot unmarshal array into Go struct field "
            "ResourceRequirements.spec.containers.resources.requests of type v1.ResourceList",
        ),
        (
            pod(labels="app=x"),
            "json: cannot unmarshal string into Go struct field ObjectMeta.metadata.labels "
            "of type map[string]string",
        ),
        (
            pod(labels={"app": 1}),
            "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels "
            "of type string",
        ),
        (
            pod(annotations=["a"]),
            "json: cannot unmarshal array into Go struct field ObjectMeta.metadata.annotations "
            "of type map[string]string",
        ),
        (
            {**pod(), "spec": {"containers": [{"name": "c", "image": 5}]}},
            "json: cannot unmarshal number into Go struct field Container.spec.containers.image "
            "of type string",
        ),
        (
            {**pod(), "spec": {"containers": [{"name": "c", "image": "i"}], "priority": 1.5}},
            "json: cannot unmarshal number 1.5 into Go struct field PodSpec.spec.priority "
            "of type int32",
        ),
        (
            {**pod(), "spec": "not a spec"},
            "json: cannot unmarshal string into Go struct field Pod.spec of type v1.PodSpec",
        ),
    ],
)
def test_a_body_that_does_not_decode_is_a_400_naming_the_field(facade, body, message):
    status, answer = call(facade, "POST", PODS, body)
    assert status == 400, answer
    assert answer["reason"] == "BadRequest"
    assert answer["message"] == f'Pod in version "v1" cannot be handled as a Pod: {message}'
    assert facade.store.get_or_none("pods", "default", "p") is None


@pytest.mark.parametrize(
    ("body", "field", "detail"),
    [
        (
            pod(requests={"cpu": "-64"}),
            "spec.containers[0].resources.requests[cpu]",
            'Invalid value: "-64": must be greater than or equal to 0',
        ),
        (
            pod(requests={"memory": "-1Gi"}),
            "spec.containers[0].resources.requests[memory]",
            'Invalid value: "-1Gi": must be greater than or equal to 0',
        ),
        (
            pod(requests={"cpu": "2"}, limits={"cpu": "1"}),
            "spec.containers[0].resources.requests[cpu]",
            'Invalid value: "2": must be less than or equal to cpu limit of 1',
        ),
        (
            pod(requests={"bogus": "1"}),
            "spec.containers[0].resources.requests[bogus]",
            'Invalid value: "bogus": must be a standard resource for containers',
        ),
        (pod(labels={"a b": "x"}), "metadata.labels", 'Invalid value: "a b": name part must'),
        (pod(labels={"app": "-x-"}), "metadata.labels", 'Invalid value: "-x-": a valid label'),
        (pod(name="Bad_Name"), "metadata.name", 'Invalid value: "Bad_Name": a lowercase RFC 1123'),
        (
            pod(annotations={"a/b/c": "x"}),
            "metadata.annotations",
            'Invalid value: "a/b/c": a qualified name must',
        ),
    ],
)
def test_an_invalid_pod_is_a_422_with_the_api_servers_field_paths(facade, body, field, detail):
    status, answer = call(facade, "POST", PODS, body)
    assert status == 422, answer
    assert answer["reason"] == "Invalid"
    name = body["metadata"]["name"]
    assert answer["message"].startswith(f'Pod "{name}" is invalid: {field}: {detail}')
    cause = answer["details"]["causes"][0]
    assert cause["field"] == field and cause["message"].startswith(detail)
    assert answer["details"]["kind"] == "Pod" and answer["details"]["name"] == name
    assert facade.store.count("pods") == 0


def test_every_cause_is_listed(facade):
    status, answer = call(
        facade, "POST", PODS, pod(requests={"cpu": "-1", "memory": "-1"}, labels={"-": "-"})
    )
    assert status == 422
    fields = [c["field"] for c in answer["details"]["causes"]]
    assert "metadata.labels" in fields
    assert "spec.containers[0].resources.requests[cpu]" in fields
    assert "spec.containers[0].resources.requests[memory]" in fields
    assert answer["message"].count(", ") >= 2 and "is invalid: [" in answer["message"]


def test_a_namespace_with_an_invalid_name_is_refused(facade):
    status, answer = call(facade, "POST", "/api/v1/namespaces", {"metadata": {"name": "Bad_NS"}})
    assert status == 422
    assert answer["message"].startswith(
        'Namespace "Bad_NS" is invalid: metadata.name: Invalid value: "Bad_NS": a lowercase '
        "RFC 1123 label must consist of"
    )


@pytest.mark.parametrize(
    ("cpu", "stored"),
    [
        (0.188, "188m"),
        ("1.5", "1500m"),
        ("0.1n", "1m"),  # ResourceLists are rounded up to a milli unit
        ("1e600000", "9223372036854775807"),  # capped, at once: no 24 s int(Decimal)
        ("1e999999999", "9223372036854775807"),
        ("1024Mi", "1Gi"),
    ],
)
def test_quantities_are_stored_in_canonical_form(facade, cpu, stored):
    status, created = call(facade, "POST", PODS, pod(requests={"cpu": cpu}))
    assert status == 201, created
    assert created["spec"]["containers"][0]["resources"]["requests"]["cpu"] == stored


def test_an_exponent_beyond_the_grammar_is_a_400(facade):
    status, answer = call(facade, "POST", PODS, pod(requests={"cpu": "1e99999999999"}))
    assert status == 400 and answer["message"].endswith("unable to parse quantity's suffix")


def test_updates_are_admitted_too(facade):
    assert call(facade, "POST", PODS, pod())[0] == 201
    current = call(facade, "GET", f"{PODS}/p")[1]
    current["metadata"]["labels"] = {"app": 7}
    status, answer = call(facade, "PUT", f"{PODS}/p", current)
    assert status == 400 and "ObjectMeta.metadata.labels of type string" in answer["message"]
    status, answer = call(
        facade,
        "PATCH",
        f"{PODS}/p",
        {"metadata": {"labels": {"bad key!": "x"}}},
        {"Content-Type": "application/merge-patch+json"},
    )
    assert status == 422 and answer["details"]["causes"][0]["field"] == "metadata.labels"
    assert call(facade, "GET", f"{PODS}/p")[1]["metadata"].get("labels") in (None, {})


def test_a_refused_object_leaves_label_selection_working_for_everyone(facade):
    """Label poisoning: one object with non-string labels made every label-selected list
    and watch of its type answer 500."""
    call(facade, "POST", PODS, pod("bad", labels={"app": ["x"]}))
    assert call(facade, "POST", PODS, pod("good", labels={"app": "x"}))[0] == 201
    status, listed = call(facade, "GET", f"{PODS}?labelSelector=app%3Dx")
    assert status == 200 and [i["metadata"]["name"] for i in listed["items"]] == ["good"]


def test_a_valid_binding_is_committed_and_answered_201_even_if_a_hook_fails(facade):
    failures = []
    facade.api.hooks.after_bind = lambda ns, name, node: 1 / 0
    facade.api.hooks.on_error = failures.append
    assert call(facade, "POST", PODS, pod())[0] == 201
    binding = {"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}}
    status, answer = call(facade, "POST", f"{PODS}/p/binding", binding)
    assert status == 201, answer
    assert facade.store.get("pods", "default", "p")["spec"]["nodeName"] == "n1"
    assert [type(e) for e in failures] == [ZeroDivisionError]


@pytest.mark.parametrize(
    "binding",
    [
        {"metadata": {"name": "p"}, "target": "n1"},
        {"metadata": "p", "target": {"name": "n1"}},
        {"metadata": {"name": "p"}, "target": {"name": 1}},
    ],
)
def test_a_wrong_typed_binding_is_a_400(facade, binding):
    assert call(facade, "POST", PODS, pod())[0] == 201
    status, answer = call(facade, "POST", f"{PODS}/p/binding", binding)
    assert (
        status == 400
        and "cannot be handled as a Binding: json: cannot unmarshal" in (answer["message"])
    )
    assert not facade.store.get("pods", "default", "p")["spec"].get("nodeName")


def test_a_wrong_typed_eviction_or_delete_option_is_a_400(facade):
    assert call(facade, "POST", PODS, pod())[0] == 201
    status, _ = call(facade, "POST", f"{PODS}/p/eviction", {"metadata": []})
    assert status == 400
    status, _ = call(facade, "DELETE", f"{PODS}/p", {"preconditions": "x"})
    assert status == 400
    assert facade.store.get_or_none("pods", "default", "p") is not None


# --- item 14: the request's odds and ends ------------------------------------------------


def test_accept_without_json_is_406(facade):
    status, answer = call(facade, "GET", "/api/v1/nodes", headers={"Accept": "application/xml"})
    assert status == 406 and answer["reason"] == "NotAcceptable"
    for ok in ("application/json", "*/*", "application/xml, application/json;q=0.5", ""):
        assert call(facade, "GET", "/api/v1/nodes", headers={"Accept": ok})[0] == 200


def test_an_absurd_timeout_is_a_400_not_an_overflow(facade):
    status, answer = call(facade, "GET", "/api/v1/nodes?watch=1&timeoutSeconds=" + "9" * 401)
    assert status == 400 and "value out of range" in answer["message"]


def test_deeply_nested_json_is_a_400(facade):
    deep = b'{"metadata":{"name":"x"},"data":' + b"[" * 5000 + b"]" * 5000 + b"}"
    status, answer = call(facade, "POST", "/api/v1/namespaces/default/configmaps", deep)
    assert status == 400 and "nested deeper" in answer["message"]
    medium = b'{"metadata":{"name":"x"},"x":' + b"[" * 300 + b"]" * 300 + b"}"
    assert call(facade, "POST", "/api/v1/namespaces/default/configmaps", medium)[0] == 400


def test_nan_is_not_json(facade):
    body = (
        b'{"metadata":{"name":"x"},"spec":{"containers":[{"name":"c","image":"i"}],"priority":NaN}}'
    )
    assert call(facade, "POST", PODS, body)[0] == 400


def test_a_future_resource_version_is_too_large_as_the_watch_cache_says(facade):
    current = int(facade.store.resource_version)
    status, answer = call(facade, "GET", f"/api/v1/nodes?watch=1&resourceVersion={current + 5}")
    assert status == 504 and answer["reason"] == "Timeout"
    assert answer["message"] == (
        f"Timeout: Too large resource version: {current + 5}, current: {current}"
    )
    assert answer["details"]["causes"] == [
        {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
    ]
    assert answer["details"]["retryAfterSeconds"] == 1


@pytest.mark.parametrize(
    "state",
    [
        {"after": ["default", "a"], "rv": 10**9},  # a list rv the server never had
        {"after": "x", "rv": 1},
        {"after": ["a", "b"], "rv": "1"},
        {"rv": 1},
    ],
)
def test_a_forged_continue_token_is_refused(facade, state):
    token = base64.urlsafe_b64encode(json.dumps(state).encode()).decode()
    status, answer = call(facade, "GET", f"/api/v1/nodes?limit=1&continue={token}")
    assert status == 400 and answer["message"].startswith("continue key is not valid")
    status, answer = call(facade, "GET", "/api/v1/nodes?limit=1&continue=%%%")
    assert status == 400


def test_store_level_admission_matches_the_api(facade):
    with pytest.raises(ApiError) as info:
        facade.store.create("pods", pod(requests={"cpu": "-1"}), namespace="default")
    assert info.value.code == 422
    assert isinstance(Hooks(), Hooks)
