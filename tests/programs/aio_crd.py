"""CustomResourceDefinitions through kubernetes_asyncio's typed models: create, read,
list, watch, patch, replace, the status subresource and delete; a custom object through
its ``CustomObjectsApi``. Run by tests/test_crd_typed_clients.py:

    python tests/programs/aio_crd.py KUBECONFIG

One JSON report on stdout.
"""

import asyncio
import json
import sys

from kubernetes_asyncio import client, config, watch

GROUP = "aio.example.com"
NAME = f"sprockets.{GROUP}"


def crd() -> client.V1CustomResourceDefinition:
    schema = client.V1JSONSchemaProps(
        type="object",
        properties={
            "spec": client.V1JSONSchemaProps(
                type="object",
                properties={"teeth": client.V1JSONSchemaProps(type="integer", default=12)},
            )
        },
    )
    return client.V1CustomResourceDefinition(
        api_version="apiextensions.k8s.io/v1",
        kind="CustomResourceDefinition",
        metadata=client.V1ObjectMeta(name=NAME),
        spec=client.V1CustomResourceDefinitionSpec(
            group=GROUP,
            scope="Cluster",
            names=client.V1CustomResourceDefinitionNames(plural="sprockets", kind="Sprocket"),
            versions=[
                client.V1CustomResourceDefinitionVersion(
                    name="v1",
                    served=True,
                    storage=True,
                    schema=client.V1CustomResourceValidation(open_apiv3_schema=schema),
                    subresources=client.V1CustomResourceSubresources(status={}),
                )
            ],
        ),
    )


def seen(made: client.V1CustomResourceDefinition) -> list:
    status = made.status
    return [
        type(made).__name__,
        made.metadata.generation,
        sorted([c.type, c.status] for c in status.conditions),
        [status.accepted_names.singular, status.accepted_names.list_kind],
        status.stored_versions,
        made.spec.conversion.strategy,
    ]


async def main() -> None:
    await config.load_kube_config(sys.argv[1])
    out = {}
    async with client.ApiClient() as api:
        ext = client.ApiextensionsV1Api(api)
        out["created"] = seen(await ext.create_custom_resource_definition(crd()))
        out["read"] = seen(await ext.read_custom_resource_definition(NAME))
        listed = await ext.list_custom_resource_definition()
        out["listed"] = [type(listed).__name__, [c.metadata.name for c in listed.items]]
        events = []
        async with watch.Watch() as w:
            stream = w.stream(
                ext.list_custom_resource_definition,
                resource_version=listed.metadata.resource_version,
                timeout_seconds=30,
            )
            await ext.patch_custom_resource_definition(
                NAME, {"spec": {"names": {"categories": ["all"]}}}
            )
            async for event in stream:
                events.append([event["type"], *seen(event["object"])[:2]])
                w.stop()
        out["watched"] = events
        current = await ext.read_custom_resource_definition(NAME)
        current.metadata.labels = {"tier": "x"}
        out["replaced"] = seen(await ext.replace_custom_resource_definition(NAME, current))
        out["status"] = seen(await ext.read_custom_resource_definition_status(NAME))
        objs = client.CustomObjectsApi(api)
        made = await objs.create_cluster_custom_object(
            GROUP, "v1", "sprockets",
            {"apiVersion": f"{GROUP}/v1", "kind": "Sprocket", "metadata": {"name": "s"}, "spec": {}},
        )  # fmt: skip
        out["object"] = made["spec"]
        await ext.delete_custom_resource_definition(NAME)
        out["after_delete"] = [
            c.metadata.name for c in (await ext.list_custom_resource_definition()).items
        ]
    print(json.dumps(out))


asyncio.run(main())
