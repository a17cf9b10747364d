"""A first-fit scheduler that keeps its nodes in a ``set``: "the first node with room"
is the first in the set's iteration order, which follows the strings' hashes."""

import time

from kubernetes import client, config, watch

config.load_kube_config()
api = client.CoreV1Api()

nodes = {n.metadata.name for n in api.list_node().items}
busy = set()  # one pod per node: the jobs here take a whole core

while True:
    stream = watch.Watch().stream(api.list_pod_for_all_namespaces, timeout_seconds=20)
    for event in stream:
        pod = event["object"]
        if pod.status.phase in ("Succeeded", "Failed") and pod.spec.node_name:
            busy.discard(pod.spec.node_name)
            continue
        if event["type"] != "ADDED" or pod.spec.node_name:
            continue
        for node in nodes:
            if node not in busy:
                break
        else:
            continue
        binding = client.V1Binding(
            metadata=client.V1ObjectMeta(name=pod.metadata.name),
            target=client.V1ObjectReference(kind="Node", name=node),
        )
        api.create_namespaced_binding(pod.metadata.namespace, binding, _preload_content=False)
        busy.add(node)
        print(f"{pod.metadata.name} -> {node}", flush=True)
    time.sleep(1)
