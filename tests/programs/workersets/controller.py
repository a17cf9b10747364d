"""A WorkerSet controller (``apps.example.com/v1``) written with ``kubernetes.dynamic``, as
one writes a controller for a CRD without generated models: every 5 s, for each
WorkerSet, keep ``spec.replicas`` pods from ``spec.template`` (labelled
``workerset=<name>``; the newest go first on a scale-down) and write ``status.replicas``
and ``status.selector`` — what the CRD's ``scale`` subresource reads, so that a
HorizontalPodAutoscaler can scale it. Runs unchanged on a real cluster."""

import time

from kubernetes import config, dynamic
from kubernetes.client import api_client

config.load_kube_config()
client = dynamic.DynamicClient(api_client.ApiClient())
worker_sets = client.resources.get(api_version="apps.example.com/v1", kind="WorkerSet")
pods = client.resources.get(api_version="v1", kind="Pod")
start = time.time()


def say(message):
    print(f"t={time.time() - start:.0f}s {message}", flush=True)


def reconcile(ws):
    name, namespace = ws.metadata.name, ws.metadata.namespace
    selector = f"workerset={name}"
    mine = pods.get(namespace=namespace, label_selector=selector).items
    active = [
        p for p in mine
        if p.status.phase not in ("Succeeded", "Failed") and not p.metadata.deletionTimestamp
    ]  # fmt: skip
    active.sort(key=lambda p: (p.metadata.creationTimestamp, p.metadata.name))
    wanted = ws.spec.replicas
    if len(active) != wanted:
        say(f"workerset {name}: {len(active)} -> {wanted} pods")
    template = ws.spec.template.to_dict()
    for _ in range(wanted - len(active)):
        meta = template.get("metadata") or {}
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": f"{name}-",
                "labels": {**(meta.get("labels") or {}), "workerset": name},
                "annotations": meta.get("annotations") or {},
                "ownerReferences": [
                    {
                        "apiVersion": "apps.example.com/v1",
                        "kind": "WorkerSet",
                        "name": name,
                        "uid": ws.metadata.uid,
                        "controller": True,
                    }
                ],
            },
            "spec": template["spec"],
        }
        pods.create(body=body, namespace=namespace)
    for pod in reversed(active[wanted:] if wanted < len(active) else []):
        pods.delete(name=pod.metadata.name, namespace=namespace)
    status = {"replicas": wanted, "selector": selector}
    if (ws.to_dict().get("status") or {}) != status:
        worker_sets.status.patch(
            body={"status": status},
            name=name,
            namespace=namespace,
            content_type="application/merge-patch+json",
        )


while True:
    for ws in sorted(
        worker_sets.get().items, key=lambda w: (w.metadata.namespace, w.metadata.name)
    ):
        reconcile(ws)
    time.sleep(5)
