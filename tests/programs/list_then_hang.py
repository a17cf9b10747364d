"""A first "scheduler" stuck for good: it lists the pods once, prints them, then waits
for a signal from a part that was never written (an event nobody sets). Nothing it does
can ever move the simulation on."""

import threading

from kubernetes import client, config

config.load_kube_config()
v1 = client.CoreV1Api()
for pod in v1.list_pod_for_all_namespaces().items:
    print(pod.metadata.namespace, pod.metadata.name, pod.status.phase, flush=True)
work_arrived = threading.Event()
work_arrived.wait()  # the producer was meant to come later
