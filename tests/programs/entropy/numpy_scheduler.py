"""Power of two choices with numpy: for each pending pod, sample two nodes with room
from ``np.random.default_rng()`` (no seed given) and take the less loaded."""

import time

import numpy as np
from kubernetes import client, config

config.load_kube_config()
v1 = client.CoreV1Api()
rng = np.random.default_rng()

while True:
    names = [n.metadata.name for n in v1.list_node().items]
    load = dict.fromkeys(names, 0)
    pods = v1.list_pod_for_all_namespaces().items
    for p in pods:
        if p.spec.node_name and p.status.phase not in ("Succeeded", "Failed"):
            load[p.spec.node_name] += 1
    for p in pods:
        if p.spec.node_name or p.status.phase != "Pending":
            continue
        room = [n for n in names if load[n] == 0]
        if not room:
            break
        picks = rng.choice(len(room), size=min(2, len(room)), replace=False)
        node = min((room[i] for i in picks), key=lambda n: (load[n], n))
        body = client.V1Binding(
            metadata=client.V1ObjectMeta(name=p.metadata.name),
            target=client.V1ObjectReference(kind="Node", name=node),
        )
        v1.create_namespaced_binding(p.metadata.namespace, body, _preload_content=False)
        load[node] += 1
        print(p.metadata.name, "->", node, flush=True)
    time.sleep(4)
