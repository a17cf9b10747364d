"""A kopf operator, written the ordinary way (``kopf run --standalone operator.py``):

- a creation handler binds each pending pod of its schedulerName to the least loaded node
  (fewest running pods, then name), one placement at a time;
- a daemon per bound pod expires it: it sleeps 30 s, then deletes the pod;
- a timer on every node reports, every 10 s, how many pods run there.

Runs unchanged on a real cluster (kubeconfig, or in-cluster through the client)."""

import asyncio

import kopf
from kubernetes_asyncio import client, config

SCHEDULER = "default"
api: client.CoreV1Api
placing = asyncio.Lock()  # handlers run concurrently: one placement at a time


@kopf.on.startup()
async def start(settings: kopf.OperatorSettings, **_):
    global api
    settings.posting.enabled = False  # no Kubernetes events for handler results
    try:
        config.load_incluster_config()
    except config.ConfigException:
        await config.load_kube_config()
    api = client.CoreV1Api(client.ApiClient())


@kopf.on.cleanup()
async def stop(**_):
    await api.api_client.close()


def unbound(spec, **_):
    return spec.get("schedulerName") == SCHEDULER and not spec.get("nodeName")


def running_on(pods, node):
    return sum(
        1
        for p in pods
        if p.spec.node_name == node and p.status.phase not in ("Succeeded", "Failed")
    )


@kopf.on.create("pods", when=unbound)
async def bind(name, namespace, logger, **_):
    async with placing:
        nodes = sorted(n.metadata.name for n in (await api.list_node()).items)
        pods = (await api.list_pod_for_all_namespaces()).items
        node = min(nodes, key=lambda n: (running_on(pods, n), n))
        await api.create_namespaced_binding(
            namespace,
            client.V1Binding(
                metadata=client.V1ObjectMeta(name=name),
                target=client.V1ObjectReference(kind="Node", name=node),
            ),
            _preload_content=False,
        )
    logger.info(f"bound {name} to {node}")


@kopf.daemon("pods", when=lambda spec, **_: bool(spec.get("nodeName")))
async def expire(name, namespace, stopped, logger, **_):
    await asyncio.sleep(30)
    if stopped:
        return
    logger.info(f"expiring {name}")
    await api.delete_namespaced_pod(name, namespace)


@kopf.timer("nodes", interval=10)
async def report(name, logger, **_):
    pods = (await api.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}")).items
    logger.info(f"{running_on(pods, name)} pods running on {name}")
