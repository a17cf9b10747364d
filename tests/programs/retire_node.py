"""Retire a node, as an operator's maintenance script does it with the official client
(``kubectl drain`` without ``--force``, then ``kubectl delete node``): at the
maintenance window, cordon the node, evict the pods a controller will re-create, leave
the bare ones (nothing would bring them back), delete the Node, then wait until no pod
is bound to it any more and say how long that took."""

import sys
import time

from kubernetes import client, config

config.load_kube_config()
v1 = client.CoreV1Api()
node, window_s = sys.argv[1], float(sys.argv[2])

time.sleep(window_s)
v1.patch_node(node, {"spec": {"unschedulable": True}})
print(f"cordoned {node}", flush=True)
pods = v1.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
for pod in sorted(pods, key=lambda p: (p.metadata.namespace, p.metadata.name)):
    ref = f"{pod.metadata.namespace}/{pod.metadata.name}"
    if pod.status.phase in ("Succeeded", "Failed"):
        continue
    if not any(o.controller for o in pod.metadata.owner_references or []):
        print(f"not evicting {ref}: no controller would re-create it", flush=True)
        continue
    body = client.V1Eviction(
        metadata=client.V1ObjectMeta(name=pod.metadata.name, namespace=pod.metadata.namespace)
    )
    v1.create_namespaced_pod_eviction(pod.metadata.name, pod.metadata.namespace, body)
    print(f"evicted {ref}", flush=True)
v1.delete_node(node)
deleted = time.time()
print(f"deleted node {node}", flush=True)
while True:
    left = v1.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
    if not left:
        break
    time.sleep(5)
print(f"no pod left on {node} after {time.time() - deleted:.0f}s", flush=True)
