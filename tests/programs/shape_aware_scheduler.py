"""A placement-aware scheduler written the ordinary way (official client, real time):
it skips cordoned nodes and taints its pods do not tolerate, honours nodeSelector,
checks every requested resource (GPUs included) against what the node has left, and
prefers the node where the pod's cpu *limit* still fits without overcommit; GPU pods are
packed onto the fullest GPU node. Bound pods count at once ("assumed")."""

import logging
import time

from kubernetes import client, config, watch
from kubernetes.utils import parse_quantity

SCHEDULER = "shape-aware"
config.load_kube_config()
v1 = client.CoreV1Api()
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
log = logging.getLogger("shape-aware")


def requests_of(pod):
    total = {}
    for c in pod.spec.containers:
        for name, value in (c.resources.requests or {}).items():
            total[name] = total.get(name, 0) + parse_quantity(value)
    return total


def cpu_limit(pod):
    return sum(parse_quantity(c.resources.limits["cpu"]) for c in pod.spec.containers)


def tolerated(taint, tolerations):
    for t in tolerations or []:
        if t.effect and t.effect != taint.effect:
            continue
        if t.operator == "Exists" and (not t.key or t.key == taint.key):
            return True
        if t.key == taint.key and (t.value or "") == (taint.value or ""):
            return True
    return False


def usage():
    """What the pods bound to each node request (and their cpu limits)."""
    used, limits = {}, {}
    for pod in v1.list_pod_for_all_namespaces(field_selector="spec.nodeName!=").items:
        if pod.status.phase in ("Succeeded", "Failed"):
            continue
        node = pod.spec.node_name
        for name, value in requests_of(pod).items():
            used.setdefault(node, {})[name] = used.get(node, {}).get(name, 0) + value
        used.setdefault(node, {})["pods"] = used.get(node, {}).get("pods", 0) + 1
        limits[node] = limits.get(node, 0) + cpu_limit(pod)
    return used, limits


def feasible(node, pod, used):
    if node.spec.unschedulable:
        return False
    for taint in node.spec.taints or []:
        if taint.effect in ("NoSchedule", "NoExecute") and not tolerated(
            taint, pod.spec.tolerations
        ):
            return False
    labels = node.metadata.labels or {}
    for key, value in (pod.spec.node_selector or {}).items():
        if labels.get(key) != value:
            return False
    alloc = node.status.allocatable
    have = used.get(node.metadata.name, {})
    if have.get("pods", 0) + 1 > int(alloc["pods"]):
        return False
    for name, amount in requests_of(pod).items():
        if have.get(name, 0) + amount > parse_quantity(alloc.get(name, "0")):
            return False
    return True


def score(node, pod, used, limits):
    alloc = node.status.allocatable
    name = node.metadata.name
    free_cpu = parse_quantity(alloc["cpu"]) - used.get(name, {}).get("cpu", 0)
    no_overcommit = limits.get(name, 0) + cpu_limit(pod) <= parse_quantity(alloc["cpu"])
    if "nvidia.com/gpu" in requests_of(pod):
        free_gpu = parse_quantity(alloc["nvidia.com/gpu"]) - used.get(name, {}).get(
            "nvidia.com/gpu", 0
        )
        return (no_overcommit, -free_gpu, free_cpu)
    return (no_overcommit, free_cpu, 0)


def schedule(pending):
    """Bind what fits, in arrival order; returns the pods still pending."""
    nodes = sorted(v1.list_node().items, key=lambda n: n.metadata.name)
    used, limits = usage()
    left = {}
    for key, pod in pending.items():
        candidates = [n for n in nodes if feasible(n, pod, used)]
        if not candidates:
            left[key] = pod
            continue
        best = max(candidates, key=lambda n: score(n, pod, used, limits))
        body = client.V1Binding(
            metadata=client.V1ObjectMeta(name=pod.metadata.name),
            target=client.V1ObjectReference(kind="Node", name=best.metadata.name),
        )
        v1.create_namespaced_binding(pod.metadata.namespace, body, _preload_content=False)
        node = best.metadata.name
        for name, amount in requests_of(pod).items():
            used.setdefault(node, {})[name] = used.get(node, {}).get(name, 0) + amount
        used.setdefault(node, {})["pods"] = used.get(node, {}).get("pods", 0) + 1
        limits[node] = limits.get(node, 0) + cpu_limit(pod)
        log.info("bound %s to %s", pod.metadata.name, node)
    return left


pending = {}
while True:
    # timeout_seconds=0: "no timeout" — the server ends the watch after its own limit
    for event in watch.Watch().stream(v1.list_namespaced_pod, "default", timeout_seconds=0):
        pod = event["object"]
        key = pod.metadata.name
        retry = False
        if event["type"] == "DELETED" or pod.spec.node_name:
            pending.pop(key, None)
            retry = event["type"] == "DELETED" or pod.status.phase in ("Succeeded", "Failed")
        elif pod.spec.scheduler_name == SCHEDULER and key not in pending:
            pending[key] = pod
            retry = True
        if retry and pending:
            pending = schedule(pending)
    log.info("the watch ended (server timeout); watching again")
    time.sleep(1)
