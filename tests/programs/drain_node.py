"""A one-shot drain tool, as an operator writes one: wait until a node runs pods, cordon
it, evict its pods through the Eviction API, delete the Node, say so, exit 0."""

import sys
import time

from kubernetes import client, config

config.load_kube_config()
v1 = client.CoreV1Api()
node = sys.argv[1]

start = time.time()
while True:  # the maintenance window opens 100 s after the tool starts
    time.sleep(20)
    pods = v1.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
    running = [p for p in pods if p.status.phase == "Running"]
    if running and time.time() - start >= 100:
        break

v1.patch_node(node, {"spec": {"unschedulable": True}})
print(f"cordoned {node}", flush=True)
for pod in running:
    eviction = client.V1Eviction(
        metadata=client.V1ObjectMeta(name=pod.metadata.name, namespace=pod.metadata.namespace)
    )
    v1.create_namespaced_pod_eviction(pod.metadata.name, pod.metadata.namespace, eviction)
    print(f"evicted {pod.metadata.namespace}/{pod.metadata.name}", flush=True)
v1.delete_node(node)
print(f"deleted node {node}; done", flush=True)
sys.exit(0)
