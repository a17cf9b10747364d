"""A polling scheduler as many are written: every few seconds, bind each pending pod to
a node picked with ``random.choice`` among those with room (unseeded ``random``)."""

import logging
import random
import time

from kubernetes import client, config
from kubernetes.utils import parse_quantity

config.load_kube_config()
v1 = client.CoreV1Api()
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")


def cpu(pod):
    return sum(parse_quantity(c.resources.requests.get("cpu", "0")) for c in pod.spec.containers)


def bind(pod, node):
    target = client.V1ObjectReference(kind="Node", name=node)
    body = client.V1Binding(metadata=client.V1ObjectMeta(name=pod.metadata.name), target=target)
    v1.create_namespaced_binding(pod.metadata.namespace, body, _preload_content=False)


while True:
    free = {
        n.metadata.name: parse_quantity(n.status.allocatable["cpu"]) for n in v1.list_node().items
    }
    pods = v1.list_pod_for_all_namespaces().items
    for pod in pods:
        if pod.spec.node_name and pod.status.phase not in ("Succeeded", "Failed"):
            free[pod.spec.node_name] -= cpu(pod)
    for pod in pods:
        if pod.spec.node_name or pod.status.phase != "Pending":
            continue
        fits = [name for name, left in free.items() if left >= cpu(pod)]
        if not fits:
            continue
        node = random.choice(fits)
        bind(pod, node)
        free[node] -= cpu(pod)
        logging.info("%s -> %s (picked among %d)", pod.metadata.name, node, len(fits))
    time.sleep(5)
