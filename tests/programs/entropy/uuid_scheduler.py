"""A scheduler that names what it does with uuids, as operators name their objects and
requests: a session id (``uuid1``) at start-up, one ``uuid4`` per decision, recorded in
a ConfigMap named after it and in its log."""

import sys
import time
import uuid

from kubernetes import client, config

config.load_kube_config()
core = client.CoreV1Api()
session = uuid.uuid1()
print(f"session {session}", flush=True)

while True:
    nodes = sorted(n.metadata.name for n in core.list_node().items)
    pods = core.list_namespaced_pod("default").items
    ended = ("Succeeded", "Failed")
    taken = {p.spec.node_name for p in pods if p.spec.node_name and p.status.phase not in ended}
    for pod in pods:
        if pod.spec.node_name or pod.status.phase != "Pending":
            continue
        free = [n for n in nodes if n not in taken]
        if not free:
            break
        decision = uuid.uuid4()
        core.create_namespaced_binding(
            "default",
            client.V1Binding(
                metadata=client.V1ObjectMeta(name=pod.metadata.name),
                target=client.V1ObjectReference(kind="Node", name=free[0]),
            ),
            _preload_content=False,
        )
        core.create_namespaced_config_map(
            "default",
            client.V1ConfigMap(
                metadata=client.V1ObjectMeta(name=f"decision-{decision}"),
                data={"pod": pod.metadata.name, "node": free[0], "session": str(session)},
            ),
        )
        taken.add(free[0])
        sys.stdout.write(f"decision {decision}: {pod.metadata.name} -> {free[0]}\n")
    sys.stdout.flush()
    time.sleep(3)
