"""Watches the pods of namespace default with kubernetes_asyncio and prints each event."""

import asyncio

from kubernetes_asyncio import client, config, watch


async def main():
    await config.load_kube_config()
    async with client.ApiClient() as api:
        v1 = client.CoreV1Api(api)
        async with watch.Watch() as w:
            async for event in w.stream(v1.list_namespaced_pod, "default"):
                print("event", event["type"], event["object"].metadata.name, flush=True)


asyncio.run(main())
