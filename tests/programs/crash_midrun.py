"""A scheduler whose binding loop runs in a daemon thread while the main thread keeps an
eye on the cluster, written the ordinary way (official client, threads, time.sleep) —
and which dies mid-run, one way or another (--how):

- raise: the main thread hits a bug (an uncaught exception);
- sys-exit: the main thread calls sys.exit(3);
- os-exit: the main thread calls os._exit(4);
- sigkill: the process is killed by SIGKILL;
- thread-sys-exit: a supervisor thread calls sys.exit(2) (which ends only that thread)
  and the main thread, joined on it, returns.

The binder is a daemon thread: once the program is over it must not bind anything."""

import argparse
import logging
import os
import signal
import sys
import threading
import time

from kubernetes import client, config

parser = argparse.ArgumentParser()
parser.add_argument("--scheduler-name", default="default")
parser.add_argument("--crash-after", type=float, required=True)
parser.add_argument(
    "--how", choices=("raise", "sys-exit", "os-exit", "sigkill", "thread-sys-exit"), required=True
)
args = parser.parse_args()
config.load_kube_config()
v1 = client.CoreV1Api()
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(threadName)s %(message)s")


def cpu(q):
    return float(q[:-1]) / 1000 if q.endswith("m") else float(q)


def binder():
    while True:
        free = {n.metadata.name: cpu(n.status.allocatable["cpu"]) for n in v1.list_node().items}
        pending = []
        for pod in v1.list_pod_for_all_namespaces().items:
            need = sum(cpu(c.resources.requests.get("cpu", "0")) for c in pod.spec.containers)
            if pod.spec.node_name and pod.status.phase not in ("Succeeded", "Failed"):
                free[pod.spec.node_name] -= need
            elif not pod.spec.node_name and pod.spec.scheduler_name == args.scheduler_name:
                pending.append((pod, need))
        for pod, need in sorted(pending, key=lambda p: p[0].metadata.name):
            node = next((n for n in sorted(free) if free[n] >= need), None)
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
            free[node] -= need
            logging.info("bound %s to %s", pod.metadata.name, node)
        time.sleep(1)


def die():
    logging.info("giving up (%s)", args.how)
    if args.how == "raise":
        raise RuntimeError("lost track of the cluster")
    if args.how == "sys-exit":
        sys.exit(3)
    if args.how == "os-exit":
        os._exit(4)
    if args.how == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    sys.exit(2)  # thread-sys-exit: ends the supervisor thread only


threading.Thread(target=binder, name="binder", daemon=True).start()
if args.how == "thread-sys-exit":

    def supervise():
        time.sleep(args.crash_after)
        die()

    supervisor = threading.Thread(target=supervise, name="supervisor")
    supervisor.start()
    supervisor.join()
    logging.info("supervisor is gone; so are we")
else:
    time.sleep(args.crash_after)
    die()
