"""A live fuzzer of the facade, run as a scheduler process next to the `hpa` sample and
`default_like` (tests/test_facade_live_fuzz.py): seeded requests to the HPA
(autoscaling/v2 create, patch, status), the metrics APIs (metrics.k8s.io,
custom.metrics.k8s.io) and the apps endpoints (Deployments and ReplicaSets, their status
and scale), sleeping between batches so that simulated time moves and the controllers
and the HPA act on what was written. Then a sentinel Deployment must become Ready (the
controllers still go). Writes a JSON report: requests by status, every 5xx, the
sentinel's fate.

    python live_fuzz.py SEED REQUESTS REPORT.json
"""

from __future__ import annotations

import json
import random
import sys
import time

from kubernetes import client, config
from kubernetes.client.rest import ApiException

seed, total, report_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = random.Random(seed)
config.load_kube_config()
api = client.ApiClient()
HOST = api.configuration.host
AUTH = {"Authorization": api.configuration.auth_settings()["BearerToken"]["value"]}
NS = "/namespaces/default"
APPS, HPA = "/apis/apps/v1", "/apis/autoscaling/v2"
NAMES = ["web", "fz-0", "fz-1", "fz-2"]
METRIC_PATHS = [
    "/apis/metrics.k8s.io/v1beta1/nodes",
    "/apis/metrics.k8s.io/v1beta1/nodes/node0",
    "/apis/metrics.k8s.io/v1beta1/pods",
    f"/apis/metrics.k8s.io/v1beta1{NS}/pods",
    f"/apis/metrics.k8s.io/v1beta1{NS}/pods/web-x",
    "/apis/custom.metrics.k8s.io/v1beta1",
    f"/apis/custom.metrics.k8s.io/v1beta1{NS}/pods/*/requests_per_second",
    f"/apis/custom.metrics.k8s.io/v1beta1{NS}/pods/web-x/requests_per_second",
    f"/apis/custom.metrics.k8s.io/v1beta1{NS}/services/web/x",
    "/apis/external.metrics.k8s.io/v1beta1",
]
SELECTORS = ["", "app=web", "app in (web,x)", "!!", "app=", "x" * 300, "app%3Dweb"]
seen: dict[str, int] = {}
errors: list[str] = []


def value(depth: int = 0):
    """A JSON value: the edges of int32/int64, numbers as strings, odd shapes."""
    kind = rng.randrange(10 if depth < 2 else 7)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        # (no huge valid count: an HPA told maxReplicas 2^31 - 1 doubles its target every
        # sync, which the broker creates 500 pods per 25 s of — bounded, tested apart
        # (test_deployments.py, a billion replicas), but too slow a run for this budget)
        return rng.choice([-1, 0, 1, 2, 3, 7, 30, 2**31, -(2**31), 2**63, 10**20])
    if kind == 3:
        return rng.choice([0.5, -0.0, 1e308, 3.0])
    if kind in (4, 5, 6):
        return rng.choice(["", "x", "1", "-1", "abc", "100m", "1e3", "2026-01-01T00:00:00Z"])
    if kind == 7:
        return [value(depth + 1) for _ in range(rng.randrange(3))]
    keys = ["type", "status", "replicas", "name", "target", "value", "reason", "selector"]
    return {rng.choice(keys): value(depth + 1) for _ in range(rng.randrange(3))}


def template(app: str) -> dict:
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {"containers": [{"name": "c", "image": "fuzz:1",
                                 "resources": {"requests": {"cpu": "10m"}}}]},
    }  # fmt: skip


def workload(name: str, fuzzed: bool = True) -> dict:
    spec = {"replicas": rng.randrange(4), "selector": {"matchLabels": {"app": name}},
            "template": template(name)}  # fmt: skip
    if fuzzed and rng.random() < 0.5:  # one field fuzzed
        spec[rng.choice(["replicas", "minReadySeconds", "paused", "strategy",
                         "revisionHistoryLimit", "progressDeadlineSeconds"])] = value()  # fmt: skip
    return {"metadata": {"name": name}, "spec": spec}


def hpa(name: str, fuzzed: bool = True) -> dict:
    target = {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
    if fuzzed and rng.random() < 0.3:
        target = {"apiVersion": "apps/v1", "kind": rng.choice(["ReplicaSet", "Pod", "Job"]),
                  "name": rng.choice(NAMES)}  # fmt: skip
    metric = rng.choice([
        {"type": "Resource", "resource": {"name": "cpu", "target": {
            "type": "Utilization", "averageUtilization": rng.choice([1, 50, 100, 1000])}}},
        {"type": "Pods", "pods": {"metric": {"name": "requests_per_second"},
                                  "target": {"type": "AverageValue", "averageValue": "1"}}},
        {"type": "Resource", "resource": {"name": "memory", "target": {
            "type": "AverageValue", "averageValue": rng.choice(["1", "1Mi", "100m"])}}},
    ])  # fmt: skip
    spec = {"scaleTargetRef": target, "minReplicas": rng.randrange(1, 3),
            "maxReplicas": rng.randrange(3, 6), "metrics": [metric]}  # fmt: skip
    if rng.random() < 0.3:
        spec["behavior"] = {"scaleDown": {"stabilizationWindowSeconds": rng.choice([0, 60, 3600]),
                            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 15}]}}  # fmt: skip
    if fuzzed and rng.random() < 0.4:
        spec[rng.choice(["minReplicas", "maxReplicas", "metrics", "behavior"])] = value()
    return {"metadata": {"name": name}, "spec": spec}


def status_body(kind: str) -> dict:
    keys = {
        "deployments": ["replicas", "readyReplicas", "availableReplicas", "updatedReplicas",
                        "observedGeneration", "collisionCount", "conditions"],
        "replicasets": ["replicas", "readyReplicas", "availableReplicas", "conditions"],
        "horizontalpodautoscalers": ["currentReplicas", "desiredReplicas", "lastScaleTime",
                                     "currentMetrics", "conditions"],
    }[kind]  # fmt: skip
    if rng.random() < 0.5:  # plausible values: stored, read back by the controllers
        return {"status": {k: rng.randrange(0, 5) for k in rng.sample(keys[:3], 2)}}
    return {"status": {rng.choice(keys): value() for _ in range(rng.randrange(1, 3))}}


def call(method: str, path: str, body=None, content_type: str = "application/json") -> int:
    headers = {"Content-Type": content_type, "Accept": "application/json", **AUTH}
    try:
        response = api.rest_client.request(
            method, HOST + path, headers=headers, body=body, _request_timeout=60
        )
        status = response.status
    except ApiException as exc:
        status = exc.status
    except Exception as exc:  # the facade dropped us: as bad as a 5xx
        errors.append(f"{method} {path}: {type(exc).__name__}: {exc}"[:300])
        return -1
    seen[str(status)] = seen.get(str(status), 0) + 1
    if status >= 500:
        errors.append(f"{status} for {method} {path} {json.dumps(body)[:200]}")
    return status


def one_request() -> None:
    area = rng.choice(["hpa", "hpa", "metrics", "apps", "apps", "apps"])
    name = rng.choice(NAMES)
    merge = "application/merge-patch+json"
    if area == "metrics":
        selector = rng.choice(SELECTORS)
        path = rng.choice(METRIC_PATHS) + (f"?labelSelector={selector}" if selector else "")
        call(rng.choice(["GET", "GET", "GET", "POST", "DELETE"]), path)
        return
    if area == "hpa":
        kind, base, make = "horizontalpodautoscalers", f"{HPA}{NS}/horizontalpodautoscalers", hpa
    else:
        kind = rng.choice(["deployments", "replicasets"])
        base, make = f"{APPS}{NS}/{kind}", workload
    what = rng.choice(["create", "patch", "status", "status", "put", "scale", "delete", "get"])
    if what == "create" or (what == "delete" and name == "web"):
        call("POST", base, make(name if name != "web" else "fz-0"))
    elif what == "patch":
        call("PATCH", f"{base}/{name}", {"spec": make(name)["spec"]}, merge)
    elif what == "status":
        call("PATCH", f"{base}/{name}/status", status_body(kind), merge)
    elif what == "put":
        body = make(name)
        body["status"] = status_body(kind)["status"]
        call("PUT", f"{base}/{name}" + rng.choice(["", "/status"]), body)
    elif what == "scale" and kind != "horizontalpodautoscalers":
        replicas = rng.choice([0, 1, 2, 3, value()])
        if rng.random() < 0.5:
            call("PATCH", f"{base}/{name}/scale", {"spec": {"replicas": replicas}}, merge)
        else:
            scale = {"apiVersion": "autoscaling/v1", "kind": "Scale",
                     "metadata": {"name": name, "namespace": "default"},
                     "spec": {"replicas": replicas}}  # fmt: skip
            call("PUT", f"{base}/{name}/scale", scale)
    elif what == "delete" and name != "web":
        call("DELETE", f"{base}/{name}")
    else:
        call("GET", f"{base}/{name}" + rng.choice(["", "/status", "/scale"]))


# something to act on: each kind's objects exist from the start (recreated when deleted)
for base, make in ((f"{APPS}{NS}/deployments", workload), (f"{APPS}{NS}/replicasets", workload),
                   (f"{HPA}{NS}/horizontalpodautoscalers", hpa)):  # fmt: skip
    for name in NAMES[1:]:
        call("POST", base, make(name, fuzzed=False))
sent = 0
while sent < total:
    for _ in range(min(10, total - sent)):
        one_request()
        sent += 1
    time.sleep(rng.choice([0, 1, 5, 15, 20]))  # the controllers and the HPA act meanwhile

# the controllers still go: a new Deployment becomes Ready
apps = client.AppsV1Api()
sentinel = {"metadata": {"name": "sentinel"}, "spec": {
    "replicas": 2, "selector": {"matchLabels": {"app": "sentinel"}},
    "template": {"metadata": {"labels": {"app": "sentinel"}},
                 "spec": {"containers": [{"name": "c", "image": "sentinel:1"}]}}}}  # fmt: skip
apps.create_namespaced_deployment("default", sentinel)
ready = None
for _ in range(60):
    time.sleep(5)
    status = apps.read_namespaced_deployment_status("sentinel", "default").status
    if (status.ready_replicas or 0) == 2:
        ready = time.time()
        break
with open(report_path, "w") as out:
    json.dump({"requests": sent, "statuses": seen, "errors": errors,
               "sentinel_ready": ready is not None}, out, indent=1)  # fmt: skip
print(f"live fuzz: {sent} requests, statuses {seen}, {len(errors)} errors", flush=True)
