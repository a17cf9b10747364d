"""A kopf operator for WorkerPools (``batch.example.com/v1``), written the ordinary way
(``kopf run --standalone operator.py``): a pool keeps ``spec.replicas`` pods made from
``spec.template``, numbered ``<pool>-0``, ``<pool>-1``…

- create: make the pods, report them in the status;
- update of ``spec.replicas``: make the missing pods or delete the surplus;
- delete: delete the pool's pods (kopf's finalizer holds the pool until then);
- a timer every 30 s: count the pool's running pods into ``status.running``.

Runs unchanged on a real cluster (kubeconfig, or in-cluster through the client)."""

import kopf
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.rest import ApiException

POOLS = ("batch.example.com", "v1", "workerpools")
api: client.CoreV1Api


@kopf.on.startup()
async def start(settings: kopf.OperatorSettings, **_):
    global api
    settings.posting.enabled = False  # no Kubernetes events for handler results
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage()
    try:
        config.load_incluster_config()
    except config.ConfigException:
        await config.load_kube_config()
    api = client.CoreV1Api(client.ApiClient())


@kopf.on.cleanup()
async def stop(**_):
    await api.api_client.close()


def pod_for(pool, namespace, index, template, owner_uid):
    meta = dict(template.get("metadata") or {})
    labels = {**(meta.get("labels") or {}), "workerpool": pool}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{pool}-{index}",
            "namespace": namespace,
            "labels": labels,
            "annotations": dict(meta.get("annotations") or {}),
            "ownerReferences": [
                {
                    "apiVersion": "batch.example.com/v1",
                    "kind": "WorkerPool",
                    "name": pool,
                    "uid": owner_uid,
                    "controller": True,
                }
            ],
        },
        "spec": template["spec"],
    }


async def pool_pods(name, namespace):
    pods = await api.list_namespaced_pod(namespace, label_selector=f"workerpool={name}")
    return sorted(pods.items, key=lambda p: int(p.metadata.name.rsplit("-", 1)[1]))


async def resize(name, namespace, uid, spec, logger):
    wanted = spec.get("replicas", 1)
    have = await pool_pods(name, namespace)
    names = {p.metadata.name for p in have}
    for index in range(wanted):
        if f"{name}-{index}" not in names:
            body = pod_for(name, namespace, index, spec["template"], uid)
            await api.create_namespaced_pod(namespace, body)
            logger.info(f"created pod {name}-{index}")
    for pod in have:
        if int(pod.metadata.name.rsplit("-", 1)[1]) >= wanted:
            await api.delete_namespaced_pod(pod.metadata.name, namespace)
            logger.info(f"deleted pod {pod.metadata.name}")
    return wanted


@kopf.on.create(*POOLS)
async def created(name, namespace, uid, spec, patch, logger, **_):
    made = await resize(name, namespace, uid, spec, logger)
    patch.status["replicas"] = made
    patch.status["phase"] = "Active"


@kopf.on.update(*POOLS, field="spec.replicas")
async def rescaled(name, namespace, uid, spec, old, new, patch, logger, **_):
    logger.info(f"replicas {old} -> {new}")
    patch.status["replicas"] = await resize(name, namespace, uid, spec, logger)


@kopf.on.delete(*POOLS)
async def deleted(name, namespace, logger, **_):
    for pod in await pool_pods(name, namespace):
        try:
            await api.delete_namespaced_pod(pod.metadata.name, namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise
        logger.info(f"deleted pod {pod.metadata.name} with its pool")


@kopf.timer(*POOLS, interval=30)
async def census(name, namespace, patch, logger, **_):
    pods = await pool_pods(name, namespace)
    running = sum(1 for p in pods if p.status.phase == "Running")
    patch.status["running"] = running
    logger.info(f"{running} of {len(pods)} pods running")
