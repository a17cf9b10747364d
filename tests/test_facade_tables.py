"""Server-side printing (broker/facade/tables.py, broker/facade/kinds/printers.py): the
``meta.k8s.io`` Table kubectl asks for, with kube-apiserver's columns, ages on the
simulated clock, ``includeObject``, watches, custom resources' printer columns."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_facade_http import POD, RawClient

from broker.facade import Facade, ManualClock
from broker.facade.kinds import printers, printers_core
from broker.facade.objects import make_node
from broker.facade.podstatus import mark_finished, mark_running

# what kubectl get sends (staging/src/k8s.io/kubectl/pkg/cmd/get/get.go transformRequests)
KUBECTL = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)


@pytest.fixture
def facade():
    clock = ManualClock()
    f = Facade(clock, history_limit=50, bookmark_interval_s=60)
    f.store.create("nodes", make_node("n1"))
    f.token = f.add_token("sched")
    with f:
        yield f


def _get(c: RawClient, path: str, accept: str = KUBECTL) -> dict:
    status, body = c.request("GET", path, headers={"Accept": accept})
    assert status == 200, body
    return body


def _cells(table: dict) -> list[list]:
    return [r["cells"] for r in table["rows"]]


def test_pods_print_as_kube_apiserver_prints_them_with_simulated_ages(facade):
    c = RawClient(facade)
    for name in ("a", "b", "c"):
        assert c.request("POST", "/api/v1/namespaces/default/pods", {**POD, "metadata": {"name": name}})[0] == 201  # fmt: skip
    facade.clock.advance(90 * 10**9)
    stamp = facade.store.timestamp()
    facade.store.bind("default", "b", "n1")
    facade.store.update("pods", "default", "b", lambda p: mark_running(p, now=stamp, host_ip="10.0.0.1"))  # fmt: skip
    facade.store.bind("default", "c", "n1")
    facade.store.update("pods", "default", "c", lambda p: mark_finished(p, now=stamp, succeeded=True))  # fmt: skip
    facade.clock.advance(3 * 3600 * 10**9)  # 3 h 1 min 30 s after the creations
    table = _get(c, "/api/v1/namespaces/default/pods")
    assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    columns = [(d["name"], d["type"], d["priority"]) for d in table["columnDefinitions"]]
    assert columns == [
        ("Name", "string", 0), ("Ready", "string", 0), ("Status", "string", 0),
        ("Restarts", "string", 0), ("Age", "string", 0), ("IP", "string", 1),
        ("Node", "string", 1), ("Nominated Node", "string", 1), ("Readiness Gates", "string", 1),
    ]  # fmt: skip
    assert _cells(table) == [
        ["a", "0/1", "Pending", "0", "3h1m", "<none>", "<none>", "<none>", "<none>"],
        ["b", "1/1", "Running", "0", "3h1m", "10.0.0.1", "n1", "<none>", "<none>"],
        ["c", "0/1", "Completed", "0", "3h1m", "<none>", "n1", "<none>", "<none>"],
    ]
    assert table["rows"][2]["conditions"][0]["reason"] == "Succeeded"
    # the default includeObject is Metadata: a PartialObjectMetadata per row
    obj = table["rows"][0]["object"]
    assert obj["kind"] == "PartialObjectMetadata" and obj["metadata"]["name"] == "a"
    assert table["metadata"]["resourceVersion"] == str(facade.store.resource_version)


def test_a_single_get_a_v1beta1_table_and_include_object(facade):
    c = RawClient(facade)
    one = _get(c, "/api/v1/nodes/n1?includeObject=Object")
    assert _cells(one)[0][:5] == ["n1", "Ready", "<none>", "0s", "v1.30.0"]
    assert one["rows"][0]["object"]["kind"] == "Node"
    beta = _get(c, "/api/v1/nodes?includeObject=None", "application/json;as=Table;v=v1beta1;g=meta.k8s.io")  # fmt: skip
    assert beta["apiVersion"] == "meta.k8s.io/v1beta1" and beta["rows"][0]["object"] is None
    plain = _get(c, "/api/v1/nodes", "application/json")
    assert plain["kind"] == "NodeList"
    status, body = c.request("GET", "/api/v1/nodes?includeObject=All", headers={"Accept": KUBECTL})
    assert (status, body["message"]) == (400, 'unrecognized includeObject value: "All"')


@pytest.mark.parametrize(
    "accept",
    [
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v2",
        "application/json;as=Table;g=meta.k8s.io;v=v2",
        "application/json;as=Table;g=example.com;v=v1",
        "application/yaml",
    ],
)
def test_a_media_type_not_served_is_406(facade, accept):
    status, body = RawClient(facade).request("GET", "/api/v1/nodes", headers={"Accept": accept})
    assert (status, body["reason"]) == (406, "NotAcceptable")


def test_a_table_watch_sends_the_columns_once_then_rows(facade):
    c = RawClient(facade)
    c.send("GET", "/api/v1/namespaces/default/pods?watch=1", headers={"Accept": KUBECTL})
    status, _ = c.head()
    assert status == 200
    facade.store.create("pods", {**POD, "metadata": {"name": "w1", "namespace": "default"}})
    first = c.event()
    facade.clock.advance(150 * 10**9)
    facade.store.create("pods", {**POD, "metadata": {"name": "w2", "namespace": "default"}})
    second = c.event()
    assert first["type"] == second["type"] == "ADDED"
    assert first["object"]["kind"] == "Table" and "columnDefinitions" in first["object"]
    assert "columnDefinitions" not in second["object"]
    assert second["object"]["rows"][0]["cells"][:5] == ["w2", "0/1", "Pending", "0", "0s"]
    c.close()


def test_workloads_events_and_hpas_print_their_columns(facade):
    store = facade.store
    store.create("deployments.apps", {
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "w", "image": "nginx"}]}}},
    })  # fmt: skip
    store.update("deployments.apps", "default", "web", lambda d: d.__setitem__("status", {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}))  # fmt: skip
    store.create("horizontalpodautoscalers.autoscaling", {
        "apiVersion": "autoscaling/v2",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "minReplicas": 1, "maxReplicas": 10,
                 "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]},
    })  # fmt: skip
    store.create("events", {
        "metadata": {"name": "e1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "a", "namespace": "default"},
        "reason": "Scheduled", "message": "Successfully assigned default/a to n1 ",
        "type": "Normal", "source": {"component": "default-scheduler"},
        "firstTimestamp": store.timestamp(), "lastTimestamp": store.timestamp(), "count": 2,
    })  # fmt: skip
    facade.clock.advance(42 * 10**9)
    c = RawClient(facade)
    deploy = _get(c, "/apis/apps/v1/namespaces/default/deployments")
    assert _cells(deploy) == [["web", "2/3", 3, 2, "42s", "w", "nginx", "app=web"]]
    hpa = _get(c, "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers")
    assert _cells(hpa) == [["web", "Deployment/web", "cpu: <unknown>/50%", "1", 10, 0, "42s"]]
    events = _get(c, "/api/v1/namespaces/default/events")
    assert _cells(events) == [[
        "42s", "Normal", "Scheduled", "pod/a", "", "default-scheduler",
        "Successfully assigned default/a to n1", "42s", 2, "e1",
    ]]  # fmt: skip


def test_a_custom_resource_prints_its_printer_columns(facade):
    store = facade.store
    store.create("customresourcedefinitions.apiextensions.k8s.io", {
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {"group": "stable.example.com", "scope": "Namespaced",
                 "names": {"plural": "crontabs", "kind": "CronTab"},
                 "versions": [
                     {"name": "v1", "served": True, "storage": True,
                      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                      "additionalPrinterColumns": [
                          {"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"},
                          {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                          {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status', "priority": 1},
                          {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]},
                     {"name": "v2", "served": True, "storage": False,
                      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
    })  # fmt: skip
    store.create("crontabs.stable.example.com", {
        "apiVersion": "stable.example.com/v1",
        "metadata": {"name": "t", "namespace": "default"},
        "spec": {"cronSpec": "* * * * */5", "replicas": 2},
        "status": {"conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]},
    })  # fmt: skip
    facade.clock.advance(600 * 10**9)
    c = RawClient(facade)
    v1 = _get(c, "/apis/stable.example.com/v1/namespaces/default/crontabs?includeObject=Object")
    names = [(d["name"], d["type"], d["priority"]) for d in v1["columnDefinitions"]]
    assert names == [("Name", "string", 0), ("Spec", "string", 0), ("Replicas", "integer", 0),
                     ("Ready", "string", 1), ("Age", "date", 0)]  # fmt: skip
    assert _cells(v1) == [["t", "* * * * */5", 2, "True", "10m"]]
    # a version naming no columns: Name and Age; the object in the version asked for
    v2 = _get(c, "/apis/stable.example.com/v2/namespaces/default/crontabs/t?includeObject=Object")
    assert [d["name"] for d in v2["columnDefinitions"]] == ["Name", "Age"]
    assert _cells(v2) == [["t", "10m"]]
    assert v2["rows"][0]["object"]["apiVersion"] == "stable.example.com/v2"


def test_kinds_without_a_printer_get_name_and_created_at(facade):
    facade.store.create("persistentvolumes", {"metadata": {"name": "pv"}})
    table = _get(RawClient(facade), "/api/v1/persistentvolumes")
    assert [d["name"] for d in table["columnDefinitions"]] == ["Name", "Created At"]
    assert _cells(table) == [["pv", facade.store.timestamp()]]


@pytest.mark.parametrize(
    "seconds, text",
    [(-5, "<invalid>"), (-1, "0s"), (0, "0s"), (119, "119s"), (120, "2m"), (125, "2m5s"),
     (600, "10m"), (3 * 3600 - 1, "179m"), (3 * 3600, "3h"), (7 * 3600 + 60, "7h1m"),
     (8 * 3600, "8h"), (47 * 3600, "47h"), (49 * 3600, "2d1h"), (8 * 86400, "8d"),
     (2 * 365 * 86400, "2y"), (3 * 365 * 86400 + 86400, "3y1d"), (9 * 365 * 86400, "9y")],
)  # fmt: skip
def test_human_duration_is_apimachinerys(seconds, text):
    assert printers.human_duration(seconds) == text


@given(st.integers(0, 10**9), st.integers(0, 10**9))
def test_human_duration_never_shrinks_in_its_leading_unit(a, b):
    lo, hi = sorted((a, b))

    def lead(text: str) -> float:
        units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "y": 365 * 86400}
        number = ""
        for ch in text:
            if ch.isdigit():
                number += ch
            else:
                return int(number) * units[ch]
        raise AssertionError(text)

    assert lead(printers.human_duration(lo)) <= lead(printers.human_duration(hi))


def test_pod_status_column_follows_kubectls_rules():
    since = printers.Since(0.0)

    def status(pod: dict) -> str:
        return printers_core.POD.cells({"metadata": {"name": "p"}, **pod}, since)[2]

    one = {"spec": {"containers": [{"name": "c"}]}}
    waiting = {"containerStatuses": [{"name": "c", "state": {"waiting": {"reason": "ContainerCreating"}}}]}  # fmt: skip
    assert status({**one, "status": {"phase": "Pending", **waiting}}) == "ContainerCreating"
    assert status({**one, "status": {"phase": "Failed", "reason": "OutOfcpu"}}) == "OutOfcpu"
    killed = {"containerStatuses": [{"name": "c", "state": {"terminated": {"exitCode": 137, "signal": 9}}}]}  # fmt: skip
    assert status({**one, "status": {"phase": "Failed", **killed}}) == "Signal:9"
    deleting = {"metadata": {"name": "p", "deletionTimestamp": "2024-01-01T00:00:00Z"}}
    assert status({**one, **deleting, "status": {"phase": "Running"}}) == "Terminating"
    gated = {"conditions": [{"type": "PodScheduled", "reason": "SchedulingGated"}]}
    assert status({**one, "status": {"phase": "Pending", **gated}}) == "SchedulingGated"
    init = {"spec": {"containers": [{"name": "c"}], "initContainers": [{"name": "i"}]},
            "status": {"phase": "Pending", "initContainerStatuses": [{"name": "i", "state": {"running": {}}}]}}  # fmt: skip
    assert status(init) == "Init:0/1"
    ip_only = {**one, "status": {"phase": "Running", "podIP": "10.0.0.7"}}
    assert printers_core.POD.cells({"metadata": {"name": "p"}, **ip_only}, since)[5] == "10.0.0.7"
    json.dumps(printers_core.POD.definitions())  # JSON-ready


@pytest.mark.parametrize(
    "path, found",
    [
        (".spec.replicas", [3]),
        ("{.spec.replicas}", [3]),
        (".metadata.labels.app\\.kubernetes\\.io/name", ["web"]),
        (".status.conditions[0].type", ["Synced"]),
        (".status.conditions[-1].status", ["True"]),
        (".status.conditions[*].type", ["Synced", "Ready"]),
        ('.status.conditions[?(@.type=="Ready")].status', ["True"]),
        (".spec.missing", []),
        (".status.conditions[5]", []),
    ],
)
def test_printer_column_json_paths(path, found):
    obj = {
        "metadata": {"labels": {"app.kubernetes.io/name": "web"}},
        "spec": {"replicas": 3},
        "status": {"conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]},
    }  # fmt: skip
    assert printers.json_path(path)(obj) == found


def test_an_unreadable_printer_column_is_an_empty_cell():
    printer = printers.custom_resource_printer(
        [{"name": "X", "type": "string", "jsonPath": ".spec[?(@.a>1)]"}]
    )
    assert printer.cells({"metadata": {"name": "n"}, "spec": {}}, printers.Since(0.0)) == [
        "n",
        None,
    ]
