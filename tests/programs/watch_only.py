"""A beginner's first "scheduler": it watches the pods and prints them, and never binds
one (the most common first mistake: it was meant to be filled in later)."""

from kubernetes import client, config, watch

config.load_kube_config()
v1 = client.CoreV1Api()
for event in watch.Watch().stream(v1.list_pod_for_all_namespaces):
    pod = event["object"]
    print(event["type"], pod.metadata.namespace, pod.metadata.name, pod.status.phase, flush=True)
