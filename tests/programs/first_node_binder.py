"""A naive scheduler as a first attempt looks: every pending pod of its schedulerName
goes to the first node listed, full or not (the kubelet refuses what does not fit)."""

import argparse

from kubernetes import client, config, watch

parser = argparse.ArgumentParser()
parser.add_argument("--scheduler-name", default="default")
args = parser.parse_args()
config.load_kube_config()
v1 = client.CoreV1Api()
first = sorted(n.metadata.name for n in v1.list_node().items)[0]
for event in watch.Watch().stream(
    v1.list_pod_for_all_namespaces, field_selector=f"spec.schedulerName={args.scheduler_name}"
):
    pod = event["object"]
    if event["type"] != "ADDED" or pod.spec.node_name:
        continue
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name=pod.metadata.name),
        target=client.V1ObjectReference(kind="Node", name=first),
    )
    v1.create_namespaced_binding(pod.metadata.namespace, body, _preload_content=False)
    print(f"bound {pod.metadata.name} to {first}", flush=True)
