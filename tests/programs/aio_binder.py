"""An asyncio scheduler on kubernetes_asyncio (aiohttp), written the ordinary way: one
task watches the nodes, one watches the pods, both keep a local cache; a third binds each
pending pod of its schedulerName, in creation order, to the node with the most free cpu
(ties: by name), whenever the cache changed. No timewarp in sight: it runs on a real
cluster as it is (kubeconfig, or --incluster in a pod)."""

import argparse
import asyncio
import logging

from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.api_client import ApiClient

parser = argparse.ArgumentParser()
parser.add_argument("--scheduler-name", default="default")
parser.add_argument("--incluster", action="store_true")
parser.add_argument("--metrics", action="store_true", help="serve /metrics (aiohttp.web)")
args = parser.parse_args()
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
log = logging.getLogger("aio-binder")


def cpu(quantity: str) -> float:
    return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def pod_cpu(pod) -> float:
    return sum(cpu((c.resources.requests or {}).get("cpu", "0")) for c in pod.spec.containers)


class Cache:
    def __init__(self) -> None:
        self.nodes: dict[str, float] = {}  # name -> allocatable cpu
        self.pods: dict[tuple[str, str], object] = {}
        self.changed = asyncio.Event()

    def free(self) -> dict[str, float]:
        free = dict(self.nodes)
        for pod in self.pods.values():
            node = pod.spec.node_name
            if node in free and pod.status.phase not in ("Succeeded", "Failed"):
                free[node] -= pod_cpu(pod)
        return free

    def pending(self) -> list:
        mine = [
            p
            for p in self.pods.values()
            if not p.spec.node_name and p.spec.scheduler_name == args.scheduler_name
        ]
        return sorted(mine, key=lambda p: (p.metadata.creation_timestamp, p.metadata.name))


async def watch_nodes(v1, cache: Cache) -> None:
    listed = await v1.list_node()
    for node in listed.items:
        cache.nodes[node.metadata.name] = cpu(node.status.allocatable["cpu"])
    cache.changed.set()
    version = listed.metadata.resource_version
    while True:
        async with watch.Watch() as w:
            async for event in w.stream(v1.list_node, resource_version=version):
                node = event["object"]
                version = node.metadata.resource_version
                if event["type"] == "DELETED":
                    cache.nodes.pop(node.metadata.name, None)
                else:
                    cache.nodes[node.metadata.name] = cpu(node.status.allocatable["cpu"])
                cache.changed.set()


async def watch_pods(v1, cache: Cache) -> None:
    listed = await v1.list_pod_for_all_namespaces()
    for pod in listed.items:
        cache.pods[(pod.metadata.namespace, pod.metadata.name)] = pod
    cache.changed.set()
    version = listed.metadata.resource_version
    while True:
        async with watch.Watch() as w:
            async for event in w.stream(v1.list_pod_for_all_namespaces, resource_version=version):
                pod = event["object"]
                version = pod.metadata.resource_version
                key = (pod.metadata.namespace, pod.metadata.name)
                if event["type"] == "DELETED":
                    cache.pods.pop(key, None)
                else:
                    cache.pods[key] = pod
                cache.changed.set()


async def schedule(v1, cache: Cache) -> None:
    while True:
        await cache.changed.wait()
        cache.changed.clear()
        free = cache.free()
        for pod in cache.pending():
            need = pod_cpu(pod)
            fits = [n for n in sorted(free) if free[n] >= need]
            if not fits:
                continue
            node = max(fits, key=lambda n: free[n])
            body = client.V1Binding(
                metadata=client.V1ObjectMeta(name=pod.metadata.name),
                target=client.V1ObjectReference(kind="Node", name=node),
            )
            try:
                await v1.create_namespaced_binding(
                    pod.metadata.namespace, body, _preload_content=False
                )
            except client.ApiException as exc:
                if exc.status != 409:
                    raise
                continue  # bound already: the watch will say so
            pod.spec.node_name = node  # assumed until the watch confirms
            free[node] -= need
            log.info("bound %s to %s", pod.metadata.name, node)


async def serve_metrics(cache: Cache) -> None:
    """A /metrics endpoint on the same loop, as operators have (nothing scrapes it here)."""
    from aiohttp import web

    async def metrics(_request):
        return web.Response(text=f"pods_cached {len(cache.pods)}\n")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()


async def main() -> None:
    if args.incluster:
        config.load_incluster_config()
    else:
        await config.load_kube_config()
    async with ApiClient() as api:
        v1 = client.CoreV1Api(api)
        cache = Cache()
        if args.metrics:
            await serve_metrics(cache)
        await asyncio.gather(watch_nodes(v1, cache), watch_pods(v1, cache), schedule(v1, cache))


asyncio.run(main())
