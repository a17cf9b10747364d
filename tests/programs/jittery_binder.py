"""A scheduler whose timers fall within the network time of the reply that carries its
bindings: it binds every pending pod (first fit by free cpu), then, if it bound any, sleeps a
short seeded time (1 µs to 3 ms) and looks again (else a quarter of a second). On a platform whose master host's messages take
hundreds of µs, a sleep after a binding ends before Batsim has applied the reply's EXECUTE_JOBs: the
broker must ask to be woken later than the deadline, after all of them.

    python jittery_binder.py SEED
"""

import random
import sys
import time

from kubernetes import client, config

SLEEPS_S = (1e-6, 3.7e-5, 1e-4, 3.33e-4, 6.01e-4, 1.2e-3, 3e-3)


def cores(quantity: str) -> float:
    return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def requested(pod) -> float:
    total = 0.0
    for container in pod.spec.containers:
        requests = (container.resources and container.resources.requests) or {}
        total += cores(requests.get("cpu", "0"))
    return total


rng = random.Random(int(sys.argv[1]))
config.load_kube_config()
v1 = client.CoreV1Api()
while True:
    free = {n.metadata.name: cores(n.status.allocatable["cpu"]) for n in v1.list_node().items}
    pending, bound = [], 0
    for pod in v1.list_pod_for_all_namespaces().items:
        if pod.spec.node_name and pod.status.phase in ("Pending", "Running"):
            free[pod.spec.node_name] -= requested(pod)
        elif not pod.spec.node_name and pod.spec.scheduler_name == "default-scheduler":
            pending.append(pod)
    for pod in sorted(pending, key=lambda p: (p.metadata.creation_timestamp, p.metadata.name)):
        node = max(sorted(free), key=free.get)
        if free[node] < requested(pod):
            break
        binding = client.V1Binding(
            metadata=client.V1ObjectMeta(name=pod.metadata.name),
            target=client.V1ObjectReference(kind="Node", name=node),
        )
        v1.create_namespaced_binding(pod.metadata.namespace, binding, _preload_content=False)
        free[node] -= requested(pod)
        bound += 1
    time.sleep(rng.choice(SLEEPS_S) if bound else 0.25)
