"""A scheduler on lightkube (synchronous, httpx), written the ordinary way: watches the
pods and binds each new pending pod of its schedulerName to the node with the fewest
running pods (ties: by name)."""

import argparse
import logging

import msgspec
from lightkube import Client
from lightkube.models.core_v1 import ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Binding, Node, Pod

parser = argparse.ArgumentParser()
parser.add_argument("--scheduler-name", default="default")
args = parser.parse_args()
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
client = Client()
nodes = sorted(n.metadata.name for n in client.list(Node))


def running_on(node):
    return sum(
        1
        for p in client.list(Pod, namespace="*")
        if p.spec.nodeName == node and p.status.phase not in ("Succeeded", "Failed")
    )


for op, pod in client.watch(Pod, namespace="*"):
    if op != "ADDED" or pod.spec.nodeName or pod.spec.schedulerName != args.scheduler_name:
        continue
    node = min(nodes, key=lambda n: (running_on(n), n))
    binding = Binding(
        metadata=ObjectMeta(name=pod.metadata.name, namespace=pod.metadata.namespace),
        target=ObjectReference(kind="Node", name=node),
    )
    try:
        client.create(binding, namespace=pod.metadata.namespace)
    except msgspec.ValidationError:
        pass  # the API server answers a Status, not the Binding lightkube would decode
    logging.info("bound %s to %s", pod.metadata.name, node)
