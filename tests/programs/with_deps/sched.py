"""A polling scheduler that keeps its helpers in ./deps and is started the usual way for
that: `env PYTHONPATH=deps python sched.py` from its own folder. Every second it lists
the pending pods of its schedulerName and binds each to the first node with room."""

import argparse
import logging
import time

import nodepick  # from deps/, found through PYTHONPATH
from kubernetes import client, config

parser = argparse.ArgumentParser()
parser.add_argument("--scheduler-name", default="default")
args = parser.parse_args()
config.load_kube_config()
v1 = client.CoreV1Api()
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")


def requested(pod):
    return sum(nodepick.cpu(c.resources.requests.get("cpu", "0")) for c in pod.spec.containers)


while True:
    free = {
        n.metadata.name: nodepick.cpu(n.status.allocatable["cpu"]) for n in v1.list_node().items
    }
    pending = []
    for pod in v1.list_pod_for_all_namespaces().items:
        if pod.spec.node_name and pod.status.phase not in ("Succeeded", "Failed"):
            free[pod.spec.node_name] -= requested(pod)
        elif not pod.spec.node_name and pod.spec.scheduler_name == args.scheduler_name:
            pending.append(pod)
    for pod in sorted(pending, key=lambda p: (p.metadata.creation_timestamp, p.metadata.name)):
        node = nodepick.first_fit(free, requested(pod))
        if node is None:
            continue
        v1.create_namespaced_binding(
            pod.metadata.namespace,
            client.V1Binding(
                metadata=client.V1ObjectMeta(name=pod.metadata.name),
                target=client.V1ObjectReference(kind="Node", name=node),
            ),
            _preload_content=False,
        )
        free[node] -= requested(pod)
        logging.info("bound %s to %s", pod.metadata.name, node)
    time.sleep(1)
