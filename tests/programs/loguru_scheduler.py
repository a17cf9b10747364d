"""A watch-based scheduler that logs its decisions with loguru (and the standard library's
logging for the client's own messages), written the ordinary way: binds each pending pod
of its schedulerName to the node with the fewest pods."""

import argparse
import logging
import sys

from kubernetes import client, config, watch
from loguru import logger

parser = argparse.ArgumentParser()
parser.add_argument("--scheduler-name", default="default")
args = parser.parse_args()
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
logger.remove()
logger.add(sys.stderr, format="{time:YYYY-MM-DD HH:mm:ss} | {level} | {message}")
config.load_kube_config()
v1 = client.CoreV1Api()
log = logging.getLogger("sched")

running: dict[str, set[str]] = {}  # node -> pods bound to it and not finished
for node in v1.list_node().items:
    running[node.metadata.name] = set()
log.info("watching %d nodes", len(running))
stream = watch.Watch().stream(v1.list_pod_for_all_namespaces)
for event in stream:
    pod = event["object"]
    name = pod.metadata.name
    if pod.spec.node_name:
        if pod.status.phase in ("Succeeded", "Failed") or event["type"] == "DELETED":
            running[pod.spec.node_name].discard(name)
            logger.info("{} finished on {}", name, pod.spec.node_name)
        continue
    if event["type"] != "ADDED" or pod.spec.scheduler_name != args.scheduler_name:
        continue
    node = min(sorted(running), key=lambda n: len(running[n]))
    v1.create_namespaced_binding(
        pod.metadata.namespace,
        client.V1Binding(
            metadata=client.V1ObjectMeta(name=name),
            target=client.V1ObjectReference(kind="Node", name=node),
        ),
        _preload_content=False,
    )
    running[node].add(name)
    logger.info("bound {} to {}", name, node)
    log.info("%d pods running", sum(len(p) for p in running.values()))
