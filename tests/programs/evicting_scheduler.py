"""tiny_scheduler.py plus an eviction: after --evict-after seconds (simulated under
timewarp) it evicts the running pods of ReplicaSet --replicaset through the official
client, as a rebalancer would."""

import argparse
import sys
import threading
import time

from kubernetes import client, config

parser = argparse.ArgumentParser()
parser.add_argument("--evict-after", type=float, required=True)
parser.add_argument("--replicaset", required=True)
args, rest = parser.parse_known_args()


def evict() -> None:
    time.sleep(args.evict_after)
    config.load_kube_config()
    v1 = client.CoreV1Api()
    selector = f"timewarp.io/replicaset={args.replicaset}"
    for pod in v1.list_pod_for_all_namespaces(label_selector=selector).items:
        if pod.status.phase != "Running":
            continue
        name, namespace = pod.metadata.name, pod.metadata.namespace
        body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=namespace))
        v1.create_namespaced_pod_eviction(name, namespace, body, _preload_content=False)
        print(f"evicted {namespace}/{name}", flush=True)


threading.Thread(target=evict, daemon=True).start()
sys.argv = [sys.argv[0], *rest]
import tiny_scheduler  # noqa: E402,F401  (its module body is the scheduling loop)
