"""A polling scheduler written the ordinary way (official client, real time): every
--interval seconds, list the unbound pods of its schedulerName (a server-side field
selector, as kube-scheduler's informer uses) and bind each to the node with the most
free cpu. With a schedulerName the pods do not carry it binds nothing, forever: the
commonest first mistake."""

import argparse
import logging
import os
import signal
import time

from kubernetes import client, config
from kubernetes.utils import parse_quantity

parser = argparse.ArgumentParser()
parser.add_argument("--scheduler-name", default="default-scheduler")
parser.add_argument("--interval", type=float, default=5.0)
parser.add_argument(
    "--stop-gate",
    metavar="PATH",
    help="on SIGTERM, create PATH.stopping, then exit only once PATH exists (at most 60 s "
    "of CPU): a clean-up that lasts exactly until a test says so",
)
args = parser.parse_args()
stopping = False


def stop(_signum, _frame):
    global stopping
    if stopping:  # the group's second SIGTERM, while the first one's clean-up runs
        return
    stopping = True
    # CPU time and plain file checks: real, even under timewarp (its clock no longer moves)
    end = time.process_time() + 60.0
    open(args.stop_gate + ".stopping", "w").close()
    while time.process_time() < end and not os.path.exists(args.stop_gate):
        pass
    raise SystemExit(0)


if args.stop_gate:
    signal.signal(signal.SIGTERM, stop)
config.load_kube_config()
v1 = client.CoreV1Api()
logging.basicConfig(level=logging.INFO, format="%(message)s")


def requests(pod):
    return sum(parse_quantity(c.resources.requests.get("cpu", "0")) for c in pod.spec.containers)


def free_cpu():
    free = {
        n.metadata.name: parse_quantity(n.status.allocatable["cpu"]) for n in v1.list_node().items
    }
    for pod in v1.list_pod_for_all_namespaces(field_selector="spec.nodeName!=").items:
        if pod.status.phase not in ("Succeeded", "Failed"):
            free[pod.spec.node_name] -= requests(pod)
    return free


cycle = 0
while True:
    cycle += 1
    pending = v1.list_pod_for_all_namespaces(
        field_selector=f"spec.schedulerName={args.scheduler_name},spec.nodeName="
    ).items
    logging.info("cycle %d: %d pending", cycle, len(pending))
    free = free_cpu() if pending else {}
    for pod in pending:
        node = max(sorted(free), key=lambda n: free[n])
        if free[node] < requests(pod):
            continue
        body = client.V1Binding(
            metadata=client.V1ObjectMeta(name=pod.metadata.name),
            target=client.V1ObjectReference(kind="Node", name=node),
        )
        v1.create_namespaced_binding(pod.metadata.namespace, body, _preload_content=False)
        free[node] -= requests(pod)
        logging.info("bound %s to %s", pod.metadata.name, node)
    time.sleep(args.interval)
