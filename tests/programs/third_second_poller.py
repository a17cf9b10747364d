"""A polling scheduler, the way many first schedulers are written: three times a second,
list the pending pods and bind each to the node with the most free cpu."""

import time

from kubernetes import client, config


def cores(quantity: str) -> float:
    return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def requested(pod) -> float:
    total = 0.0
    for container in pod.spec.containers:
        requests = (container.resources and container.resources.requests) or {}
        total += cores(requests.get("cpu", "0"))
    return total


config.load_kube_config()
v1 = client.CoreV1Api()
while True:
    free = {n.metadata.name: cores(n.status.allocatable["cpu"]) for n in v1.list_node().items}
    pending = []
    for pod in v1.list_pod_for_all_namespaces().items:
        if pod.spec.node_name and pod.status.phase in ("Pending", "Running"):
            free[pod.spec.node_name] -= requested(pod)
        elif not pod.spec.node_name and pod.spec.scheduler_name == "default-scheduler":
            pending.append(pod)
    for pod in sorted(pending, key=lambda p: p.metadata.creation_timestamp):
        node = max(sorted(free), key=free.get)
        if free[node] < requested(pod):
            break
        binding = client.V1Binding(
            metadata=client.V1ObjectMeta(name=pod.metadata.name),
            target=client.V1ObjectReference(kind="Node", name=node),
        )
        # the client cannot read the Status the API server answers: don't let it try
        v1.create_namespaced_binding(pod.metadata.namespace, binding, _preload_content=False)
        free[node] -= requested(pod)
    time.sleep(1 / 3)
