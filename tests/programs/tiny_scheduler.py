"""A small watch-based scheduler written the ordinary way (official client, real time):
binds each pending pod of its schedulerName to the node with the most free cpu."""

import argparse
import logging
import time

from kubernetes import client, config, watch
from kubernetes.utils import parse_quantity

parser = argparse.ArgumentParser()
parser.add_argument("--scheduler-name", default="default")
parser.add_argument("--incluster", action="store_true")
args = parser.parse_args()
if args.incluster:
    config.load_incluster_config()
else:
    config.load_kube_config()
v1 = client.CoreV1Api()
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")


def free_cpu():
    free = {
        n.metadata.name: parse_quantity(n.status.allocatable["cpu"]) for n in v1.list_node().items
    }
    # bound pods count as soon as they are bound, as kube-scheduler's "assumed" pods do
    for pod in v1.list_pod_for_all_namespaces(field_selector="spec.nodeName!=").items:
        if pod.status.phase in ("Succeeded", "Failed"):
            continue
        for c in pod.spec.containers:
            free[pod.spec.node_name] -= parse_quantity(c.resources.requests.get("cpu", "0"))
    return free


def bind_pending(pending):
    """Bind what fits, in arrival order; returns the pods still pending."""
    free = free_cpu()
    left = {}
    for key, pod in pending.items():
        need = sum(
            parse_quantity(c.resources.requests.get("cpu", "0")) for c in pod.spec.containers
        )
        node = max(sorted(free), key=lambda n: free[n])
        if free[node] < need:
            left[key] = pod
            continue
        body = client.V1Binding(
            metadata=client.V1ObjectMeta(name=pod.metadata.name),
            target=client.V1ObjectReference(kind="Node", name=node),
        )
        try:
            v1.create_namespaced_binding(pod.metadata.namespace, body, _preload_content=False)
        except client.ApiException as exc:
            if exc.status != 409:
                raise
            continue  # a stale event: it is bound already
        free[node] -= need
        logging.info("bound %s to %s", pod.metadata.name, node)
    return left


pending = {}  # (namespace, name) -> pod, in arrival order
while True:
    for event in watch.Watch().stream(v1.list_pod_for_all_namespaces, timeout_seconds=30):
        pod = event["object"]
        key = (pod.metadata.namespace, pod.metadata.name)
        logging.debug("event %s %s node=%s", event["type"], pod.metadata.name, pod.spec.node_name)
        retry = False
        if event["type"] == "DELETED" or pod.spec.node_name:
            pending.pop(key, None)
            retry = event["type"] == "DELETED" or pod.status.phase in ("Succeeded", "Failed")
        elif pod.spec.scheduler_name == args.scheduler_name and key not in pending:
            pending[key] = pod
            retry = True
        if retry and pending:
            pending = bind_pending(pending)
    time.sleep(1)
