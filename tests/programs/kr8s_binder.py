"""A scheduler on kr8s (asyncio, httpx), written the ordinary way: watches the pods and
binds each new pending pod of its schedulerName to the node with the fewest running pods
(ties: by name)."""

import argparse
import asyncio
import json
import logging

import kr8s.asyncio

parser = argparse.ArgumentParser()
parser.add_argument("--scheduler-name", default="default")
args = parser.parse_args()
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")


async def main():
    api = await kr8s.asyncio.api()
    nodes = sorted([n.name async for n in api.get("nodes")])
    while True:  # the API server ends a watch after 30-60 min: watch again
        async for event, pod in api.watch("pods", namespace=kr8s.ALL):
            spec = pod.spec
            if event != "ADDED" or spec.get("nodeName"):
                continue
            if spec.get("schedulerName") != args.scheduler_name:
                continue
            running = [
                p
                async for p in api.get("pods", namespace=kr8s.ALL)
                if p.spec.get("nodeName") and p.status.phase not in ("Succeeded", "Failed")
            ]
            node = min(nodes, key=lambda n: (sum(p.spec.nodeName == n for p in running), n))
            binding = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": pod.name},
                "target": {"kind": "Node", "name": node},
            }
            async with api.call_api(
                "POST",
                version="v1",
                namespace=pod.namespace,
                url="bindings",
                data=json.dumps(binding),
            ):
                pass
            logging.info("bound %s to %s", pod.name, node)


asyncio.run(main())
