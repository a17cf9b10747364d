"""A small watch-based scheduler written the ordinary way (official client, real time):
binds each pending pod of its schedulerName to the node with the most free cpu."""

import argparse
import logging
import time

from kubernetes import client, config, watch
from kubernetes.utils import parse_quantity

parser = argparse.ArgumentParser()
parser.add_argument("--scheduler-name", default="default")
args = parser.parse_args()
config.load_kube_config()
v1 = client.CoreV1Api()
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")


def free_cpu():
    free = {n.metadata.name: parse_quantity(n.status.allocatable["cpu"]) for n in v1.list_node().items}
    for pod in v1.list_pod_for_all_namespaces(field_selector="status.phase=Running").items:
        for c in pod.spec.containers:
            free[pod.spec.node_name] -= parse_quantity(c.resources.requests.get("cpu", "0"))
    return free


def try_bind(pod):
    need = sum(parse_quantity(c.resources.requests.get("cpu", "0")) for c in pod.spec.containers)
    free = free_cpu()
    node = max(sorted(free), key=lambda n: free[n])
    if free[node] < need:
        return False
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name=pod.metadata.name),
        target=client.V1ObjectReference(kind="Node", name=node),
    )
    v1.create_namespaced_binding(pod.metadata.namespace, body, _preload_content=False)
    logging.info("bound %s to %s", pod.metadata.name, node)
    return True


pending = []
while True:
    for event in watch.Watch().stream(v1.list_pod_for_all_namespaces, timeout_seconds=30):
        pod = event["object"]
        if event["type"] == "ADDED" and pod.spec.scheduler_name == args.scheduler_name and not pod.spec.node_name:
            pending.append(pod)
        if event["type"] == "MODIFIED" and pod.status.phase in ("Succeeded", "Failed"):
            pass
        pending = [p for p in pending if not try_bind(p)]
    pending = [p for p in pending if not try_bind(p)]
    time.sleep(1)
