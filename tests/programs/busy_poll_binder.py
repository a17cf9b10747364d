"""A scheduler that re-lists unbound pods in a loop and never sleeps: when there is
nothing to do it simply asks again (common; on a real cluster it only burns CPU). Binds
each pending pod of its schedulerName to the first free node, by name."""

import argparse
import logging

from kubernetes import client, config

parser = argparse.ArgumentParser()
parser.add_argument("--scheduler-name", default="default")
args = parser.parse_args()
config.load_kube_config()
v1 = client.CoreV1Api()
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

while True:
    pods = v1.list_pod_for_all_namespaces(field_selector="spec.nodeName=").items
    pods = [p for p in pods if p.spec.scheduler_name == args.scheduler_name]
    if not pods:
        continue
    nodes = sorted(n.metadata.name for n in v1.list_node().items)
    running = v1.list_pod_for_all_namespaces(field_selector="spec.nodeName!=").items
    busy = {p.spec.node_name for p in running if p.status.phase not in ("Succeeded", "Failed")}
    for pod in sorted(pods, key=lambda p: p.metadata.name):
        free = [n for n in nodes if n not in busy]
        if not free:
            break
        v1.create_namespaced_binding(
            pod.metadata.namespace,
            client.V1Binding(
                metadata=client.V1ObjectMeta(name=pod.metadata.name),
                target=client.V1ObjectReference(kind="Node", name=free[0]),
            ),
            _preload_content=False,
        )
        busy.add(free[0])
        logging.info("bound %s to %s", pod.metadata.name, free[0])
