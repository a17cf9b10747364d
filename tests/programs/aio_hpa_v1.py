"""autoscaling/v1 HorizontalPodAutoscalers through kubernetes_asyncio's typed models:
create, read (v1 and v2), list and watch. Run by tests/test_hpa_v1.py:

    python tests/programs/aio_hpa_v1.py KUBECONFIG

One JSON report on stdout.
"""

import asyncio
import json
import sys

from kubernetes_asyncio import client, config, watch

NS = "default"


async def main() -> None:
    await config.load_kube_config(sys.argv[1])
    out = {}
    async with client.ApiClient() as api:
        v1 = client.AutoscalingV1Api(api)
        v2 = client.AutoscalingV2Api(api)
        body = client.V1HorizontalPodAutoscaler(
            metadata=client.V1ObjectMeta(name="aio"),
            spec=client.V1HorizontalPodAutoscalerSpec(
                scale_target_ref=client.V1CrossVersionObjectReference(
                    api_version="apps/v1", kind="Deployment", name="aio"
                ),
                max_replicas=5,
                target_cpu_utilization_percentage=65,
            ),
        )
        made = await v1.create_namespaced_horizontal_pod_autoscaler(NS, body)
        out["created"] = [type(made).__name__, made.api_version, made.spec.min_replicas]
        read = await v2.read_namespaced_horizontal_pod_autoscaler("aio", NS)
        target = read.spec.metrics[0].resource.target
        out["as_v2"] = [type(read).__name__, target.type, target.average_utilization]
        listed = await v1.list_namespaced_horizontal_pod_autoscaler(NS)
        out["listed"] = [type(listed).__name__, [h.metadata.name for h in listed.items]]
        events = []
        async with watch.Watch() as w:
            stream = w.stream(
                v1.list_namespaced_horizontal_pod_autoscaler,
                NS,
                resource_version=listed.metadata.resource_version,
                timeout_seconds=5,
            )
            await v1.patch_namespaced_horizontal_pod_autoscaler(
                "aio", NS, {"spec": {"targetCPUUtilizationPercentage": 70}}
            )
            async for event in stream:
                obj = event["object"]
                events.append(
                    [event["type"], type(obj).__name__, obj.spec.target_cpu_utilization_percentage]
                )
                w.stop()
        out["watched"] = events
    print(json.dumps(out))


asyncio.run(main())
