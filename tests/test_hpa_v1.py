"""autoscaling/v1 HorizontalPodAutoscalers served beside v2 (issue 26, item 3): one
stored object, readable and writable in both versions, converted as kube-apiserver's
``pkg/apis/autoscaling/v1/conversion.go`` does it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import requests

from broker.facade import Facade, ManualClock, discovery
from broker.facade.kinds import autoscaling_v1 as conv

ROOT = Path(__file__).resolve().parent.parent
OLD_CLIENT = ROOT / ".venv" / "k8s24"
PROGRAM = ROOT / "tests" / "programs" / "hpa_v1_client.py"
V1 = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers"
V2 = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"


@pytest.fixture
def facade():
    f = Facade(ManualClock()).start()
    yield f
    f.stop()


def _session(facade) -> tuple[requests.Session, str]:
    s = requests.Session()
    s.trust_env = False
    s.headers["Authorization"] = f"Bearer {facade.add_token('t')}"
    return s, facade.url


def _v2_hpa() -> dict:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 2,
            "maxReplicas": 9,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": "rps"},
                        "target": {"type": "AverageValue", "averageValue": "10"},
                    },
                },
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 70},
                    },
                },
            ],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}},
        },
    }


@pytest.mark.parametrize("version", ["newest", "24"])
def test_v1_hpas_round_trip_through_both_client_generations(
    facade, tmp_path, subprocess_env, version
):
    env = dict(subprocess_env)
    if version == "24":
        if not (OLD_CLIENT / "kubernetes").is_dir():
            pytest.skip("run scripts/setup-venv.sh: .venv/k8s24 missing")
        env["PYTHONPATH"] = os.pathsep.join([str(OLD_CLIENT), str(ROOT)])
    kubeconfig = facade.write_kubeconfig(tmp_path / "kc", "downscaler")
    proc = subprocess.run(
        [sys.executable, str(PROGRAM), str(kubeconfig)],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["version"].startswith("24.") == (version == "24")
    assert seen["created"] == ["autoscaling/v1", 60]
    assert seen["as_v2"] == ["autoscaling/v2", 2, "Resource", "cpu", "Utilization", 60]
    cpu, others, notes = seen["v1_view"]
    assert cpu == 60
    assert others == [
        {"type": "Resource", "resource": {"name": "memory", "targetAverageValue": "512Mi"}}
    ]
    assert notes == [conv.BEHAVIOR, conv.METRICS]
    # written back in v1: the memory metric and the behavior survive, the annotations
    # are not stored (the CPU target goes last, as the server orders it)
    assert seen["after_v1_writes"] == [
        1,
        12,
        [["memory", "AverageValue"], ["cpu", "Utilization"]],
        120,
        None,
    ]
    assert seen["status_v2"] == [3, 4, [["Resource", "cpu", 75]]]
    assert seen["status_v1"] == [3, 4, 75]
    assert seen["bare"] == ["cpu", 80]
    assert seen["listed"] == [
        "autoscaling/v1",
        [["bare", "autoscaling/v1"], ["web", "autoscaling/v1"]],
    ]
    assert seen["everywhere"] == ["bare", "web"]
    assert seen["watched"] == [["DELETED", "V1HorizontalPodAutoscaler", "autoscaling/v1", "bare"]]
    assert seen["invalid"] == [
        422,
        'HorizontalPodAutoscaler.autoscaling "neg" is invalid: spec.metrics[0].resource.target.'
        "averageUtilization: Invalid value: -5: must be greater than 0",
    ]


def test_discovery_lists_v1_with_v2_preferred(facade):
    group = discovery.api_group("autoscaling", facade.store.types)
    assert [v["version"] for v in group["versions"]] == ["v2", "v1"]
    assert group["preferredVersion"]["version"] == "v2"
    names = [r["name"] for r in discovery.resource_list("autoscaling", "v1")["resources"]]
    assert names == ["horizontalpodautoscalers", "horizontalpodautoscalers/status"]


def test_the_v1_view_carries_what_v1_cannot_say_in_the_servers_annotations(facade):
    s, url = _session(facade)
    hpa = _v2_hpa()
    hpa["metadata"]["annotations"] = {conv.METRICS: "[]", "keep": "me"}  # dropped by v2
    assert s.post(url + V2, json=hpa).status_code == 201
    status = {
        "desiredReplicas": 3,
        "currentReplicas": 2,
        "currentMetrics": [
            {"type": "Resource", "resource": {"name": "cpu", "current": {"averageValue": "350m", "averageUtilization": 35}}}
        ],
        "conditions": [
            {"type": "AbleToScale", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "ReadyForNewScale", "message": "ok"}
        ],
    }  # fmt: skip
    r = s.patch(
        url + V2 + "/web/status",
        json={"status": status},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 200, r.text
    stored = s.get(url + V2 + "/web").json()
    assert stored["metadata"]["annotations"] == {"keep": "me"}
    got = s.get(url + V1 + "/web").json()
    assert got["apiVersion"] == "autoscaling/v1"
    assert got["spec"] == {
        "scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
        "minReplicas": 2,
        "maxReplicas": 9,
        "targetCPUUtilizationPercentage": 70,
    }
    assert got["status"] == {
        "currentReplicas": 2,
        "desiredReplicas": 3,
        "currentCPUUtilizationPercentage": 35,
    }
    notes = got["metadata"]["annotations"]
    # the exact strings Go's json.Marshal writes for the v1 (v2beta1-shaped) types and
    # for the internal behavior type (Go field names, nil pointers as null)
    assert notes == {
        "keep": "me",
        conv.METRICS: '[{"type":"Pods","pods":{"metricName":"rps","targetAverageValue":"10"}}]',
        conv.CURRENT_METRICS: '[{"type":"Resource","resource":{"name":"cpu",'
        '"currentAverageUtilization":35,"currentAverageValue":"350m"}}]',
        conv.BEHAVIOR: '{"ScaleUp":{"StabilizationWindowSeconds":0,"SelectPolicy":"Max",'
        '"Policies":[{"Type":"Pods","Value":4,"PeriodSeconds":15},{"Type":"Percent",'
        '"Value":100,"PeriodSeconds":15}]},"ScaleDown":{"StabilizationWindowSeconds":60,'
        '"SelectPolicy":"Max","Policies":[{"Type":"Percent","Value":100,"PeriodSeconds":15}]}}',
        conv.CONDITIONS: '[{"type":"AbleToScale","status":"True","lastTransitionTime":'
        '"2026-01-01T00:00:00Z","reason":"ReadyForNewScale","message":"ok"}]',
    }
    # and a v1 client that PUTs it back changes nothing of the stored object
    rv = stored["metadata"]["resourceVersion"]
    assert s.put(url + V1 + "/web", json=got).json()["metadata"]["resourceVersion"] == rv
    assert s.get(url + V2 + "/web").json() == stored


def test_v1_writes_are_decoded_by_the_v1_type_and_patched_in_v1(facade):
    s, url = _session(facade)
    assert s.post(url + V2, json=_v2_hpa()).status_code == 201
    body = {
        "apiVersion": "autoscaling/v1",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "bad"},
        "spec": {"maxReplicas": 3, "targetCPUUtilizationPercentage": "x",
                 "scaleTargetRef": {"kind": "Deployment", "name": "bad"}},
    }  # fmt: skip
    r = s.post(url + V1, json=body)
    assert r.status_code == 400
    assert r.json()["message"] == (
        'HorizontalPodAutoscaler in version "v1" cannot be handled as a '
        "HorizontalPodAutoscaler: json: cannot unmarshal string into Go struct field "
        "HorizontalPodAutoscalerSpec.spec.targetCPUUtilizationPercentage of type int32"
    )
    # a v2 body to the v1 URL is refused
    assert s.post(url + V1, json=_v2_hpa()).status_code == 400
    # a patch is applied to the v1 view: targetCPUUtilizationPercentage is a v1 field
    r = s.patch(
        url + V1 + "/web",
        json={"spec": {"targetCPUUtilizationPercentage": 40}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 200, r.text
    assert r.json()["spec"]["targetCPUUtilizationPercentage"] == 40
    metrics = s.get(url + V2 + "/web").json()["spec"]["metrics"]
    assert metrics == [
        {"type": "Pods", "pods": {"metric": {"name": "rps"}, "target": {"type": "AverageValue", "averageValue": "10"}}},
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 40}}},
    ]  # fmt: skip
    r = s.patch(
        url + V1 + "/web",
        json=[{"op": "replace", "path": "/spec/minReplicas", "value": 0}],
        headers={"Content-Type": "application/json-patch+json"},
    )
    assert r.status_code == 422
    assert "spec.minReplicas: Invalid value: 0" in r.json()["message"]


def test_a_watch_in_either_version_gives_that_version(facade):
    s, url = _session(facade)
    streams = {
        v: s.get(url + path, params={"watch": "1", "timeoutSeconds": "30"}, stream=True)
        for v, path in (("v1", V1), ("v2", V2))
    }
    body = {
        "apiVersion": "autoscaling/v1",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {"maxReplicas": 3, "targetCPUUtilizationPercentage": 50,
                 "scaleTargetRef": {"kind": "Deployment", "name": "web"}},
    }  # fmt: skip
    assert s.post(url + V1, json=body).status_code == 201
    seen = {}
    for version, stream in streams.items():
        line = next(stream.iter_lines())
        seen[version] = json.loads(line)
        stream.close()
    assert seen["v1"]["type"] == seen["v2"]["type"] == "ADDED"
    assert seen["v1"]["object"]["apiVersion"] == "autoscaling/v1"
    assert seen["v1"]["object"]["spec"]["targetCPUUtilizationPercentage"] == 50
    assert seen["v2"]["object"]["apiVersion"] == "autoscaling/v2"
    assert seen["v2"]["object"]["spec"]["metrics"][0]["resource"]["target"] == {
        "type": "Utilization",
        "averageUtilization": 50,
    }


def test_conversion_round_trips_every_metric_source():
    """v2 -> v1 -> v2 keeps every metric source, target and current value."""
    hpa = _v2_hpa()
    hpa["spec"]["metrics"] += [
        {"type": "Object", "object": {"describedObject": {"kind": "Service", "name": "s", "apiVersion": "v1"}, "metric": {"name": "hits", "selector": {"matchLabels": {"a": "b"}}}, "target": {"type": "Value", "value": "5"}}},
        {"type": "External", "external": {"metric": {"name": "queue"}, "target": {"type": "AverageValue", "averageValue": "30"}}},
        {"type": "ContainerResource", "containerResource": {"name": "memory", "container": "app", "target": {"type": "Utilization", "averageUtilization": 60}}},
    ]  # fmt: skip
    hpa["status"] = {
        "desiredReplicas": 2,
        "currentMetrics": [
            {"type": "Pods", "pods": {"metric": {"name": "rps"}, "current": {"averageValue": "7"}}},
            {"type": "External", "external": {"metric": {"name": "queue"}, "current": {"value": "1", "averageValue": "12"}}},
        ],
    }  # fmt: skip
    back = conv.from_v1(json.loads(json.dumps(conv.to_v1(hpa))))
    # the CPU utilization metric moved last (the v1 field is converted after the others)
    expected = hpa["spec"]["metrics"][:1] + hpa["spec"]["metrics"][2:] + hpa["spec"]["metrics"][1:2]
    assert back["spec"]["metrics"] == expected
    assert back["status"]["currentMetrics"] == hpa["status"]["currentMetrics"]
    assert back["spec"]["behavior"] == hpa["spec"]["behavior"]
    assert "annotations" not in back["metadata"]


def test_malformed_annotations_are_ignored_as_the_server_ignores_them():
    v1 = {
        "metadata": {"name": "x", "annotations": {conv.METRICS: "{not json", conv.BEHAVIOR: "[]"}},
        "spec": {"maxReplicas": 2, "scaleTargetRef": {"kind": "Deployment", "name": "x"}},
    }
    v2 = conv.from_v1(v1)
    assert v2["spec"]["metrics"] == [
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}
    ]  # fmt: skip
    assert "behavior" not in v2["spec"] and "annotations" not in v2["metadata"]


def test_kubernetes_asyncio_round_trips_v1_hpas_into_its_typed_models(
    facade, tmp_path, subprocess_env
):
    kubeconfig = facade.write_kubeconfig(tmp_path / "kc", "aio")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "programs" / "aio_hpa_v1.py"), str(kubeconfig)],
        env=subprocess_env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "created": ["V1HorizontalPodAutoscaler", "autoscaling/v1", 1],
        "as_v2": ["V2HorizontalPodAutoscaler", "Utilization", 65],
        "listed": ["V1HorizontalPodAutoscalerList", ["aio"]],
        "watched": [["MODIFIED", "V1HorizontalPodAutoscaler", 70]],
    }


def test_a_kopf_operator_on_v1_hpas_lists_watches_and_patches_them(
    facade, tmp_path, subprocess_env
):
    """kopf discovers autoscaling/v1, lists and watches the HPAs there and patches
    (merge patch, applied to the v1 view) its annotations; the stored object keeps its
    v2 metrics."""
    s, url = _session(facade)
    assert s.post(url + V2, json=_v2_hpa()).status_code == 201
    env = dict(subprocess_env, KUBECONFIG=str(facade.write_kubeconfig(tmp_path / "kc", "kopf")))
    kopf = Path(sys.executable).parent / "kopf"
    proc = subprocess.Popen(
        [str(kopf), "run", "--standalone", "--namespace", "default",
         str(ROOT / "tests" / "programs" / "kopf_hpa_v1.py")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    done = threading.Event()
    facade.store.add_listener(lambda *args: done.set())
    try:
        stored = None
        for _ in range(600):  # bounded: ~60 s on a loaded machine
            stored = facade.store.get("horizontalpodautoscalers.autoscaling", "default", "web")
            if "example.com/cpu-target" in (stored["metadata"].get("annotations") or {}):
                break
            done.wait(0.1)
            done.clear()
    finally:
        proc.terminate()
        log = proc.communicate(timeout=60)[0]
    annotations = stored["metadata"].get("annotations") or {}
    assert annotations.get("example.com/cpu-target") == "70", log[-3000:]
    assert [m["type"] for m in stored["spec"]["metrics"]] == ["Pods", "Resource"]
    assert stored["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 60
    assert not any(k.startswith("autoscaling.alpha") for k in annotations)
