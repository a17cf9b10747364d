"""CustomResourceDefinitions through the official client's typed models
(``ApiextensionsV1Api``, ``V1CustomResourceDefinition``), and custom objects through
``CustomObjectsApi``. Run by tests/test_crd_typed_clients.py with the newest client and
with 24.2.0 (``.venv/k8s24`` first on PYTHONPATH):

    python tests/programs/crd_typed_client.py KUBECONFIG

Every CRD answer is deserialised into the client's models (a field the model cannot
take, or a required one missing, raises); one JSON report on stdout.
"""

from __future__ import annotations

import json
import sys

import kubernetes
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient

GROUP = "typed.example.com"
NAME = f"gadgets.{GROUP}"
NS = "default"


def schema() -> client.V1JSONSchemaProps:
    return client.V1JSONSchemaProps(
        type="object",
        properties={
            "spec": client.V1JSONSchemaProps(
                type="object",
                required=["size"],
                properties={
                    "size": client.V1JSONSchemaProps(type="integer", minimum=0, default=1),
                    "replicas": client.V1JSONSchemaProps(type="integer"),
                    "color": client.V1JSONSchemaProps(type="string", enum=["red", "blue"]),
                },
            ),
            "status": client.V1JSONSchemaProps(
                type="object", x_kubernetes_preserve_unknown_fields=True
            ),
        },
    )


def crd() -> client.V1CustomResourceDefinition:
    version = client.V1CustomResourceDefinitionVersion(
        name="v1",
        served=True,
        storage=True,
        schema=client.V1CustomResourceValidation(open_apiv3_schema=schema()),
        subresources=client.V1CustomResourceSubresources(
            status={},
            scale=client.V1CustomResourceSubresourceScale(
                spec_replicas_path=".spec.replicas", status_replicas_path=".status.replicas"
            ),
        ),
        additional_printer_columns=[
            client.V1CustomResourceColumnDefinition(
                name="Size", type="integer", json_path=".spec.size"
            )
        ],
    )
    return client.V1CustomResourceDefinition(
        api_version="apiextensions.k8s.io/v1",
        kind="CustomResourceDefinition",
        metadata=client.V1ObjectMeta(name=NAME, labels={"app": "typed"}),
        spec=client.V1CustomResourceDefinitionSpec(
            group=GROUP,
            scope="Namespaced",
            names=client.V1CustomResourceDefinitionNames(
                plural="gadgets", kind="Gadget", short_names=["gd"], categories=["all"]
            ),
            versions=[version],
        ),
    )


def conditions(made: client.V1CustomResourceDefinition) -> list[list[str]]:
    return sorted([c.type, c.status, c.reason] for c in made.status.conditions)


def described(made: client.V1CustomResourceDefinition) -> dict:
    """What the typed model holds of the server's answer."""
    status = made.status
    names = status.accepted_names
    spec = made.spec
    version = spec.versions[0]
    return {
        "model": type(made).__name__,
        "generation": made.metadata.generation,
        "conditions": conditions(made),
        "times": all(c.last_transition_time is not None for c in status.conditions),
        "accepted": [names.plural, names.singular, names.kind, names.list_kind, names.short_names],
        "stored": status.stored_versions,
        "conversion": spec.conversion.strategy,
        "version": [version.name, version.served, version.storage],
        "printer": [c.name for c in version.additional_printer_columns or []],
        "size_default": version.schema.open_apiv3_schema.properties["spec"]
        .properties["size"]
        .default,
    }


def custom_objects(out: dict) -> None:
    objs = client.CustomObjectsApi()
    args = (GROUP, "v1", NS, "gadgets")
    body = {"apiVersion": f"{GROUP}/v1", "kind": "Gadget", "metadata": {"name": "g"},
            "spec": {"replicas": 2, "bogus": 1}}  # fmt: skip
    made = objs.create_namespaced_custom_object(*args, body)
    out["object_created"] = [made["spec"], made["metadata"]["generation"]]
    objs.patch_namespaced_custom_object(*args, "g", {"spec": {"color": "red"}})
    got = objs.get_namespaced_custom_object(*args, "g")
    got["spec"]["size"] = 3
    replaced = objs.replace_namespaced_custom_object(*args, "g", got)
    out["object_replaced"] = [replaced["spec"], replaced["metadata"]["generation"]]
    status = objs.patch_namespaced_custom_object_status(*args, "g", {"status": {"replicas": 2}})
    out["object_status"] = [status["status"], status["metadata"]["generation"]]
    scale = objs.patch_namespaced_custom_object_scale(*args, "g", {"spec": {"replicas": 4}})
    out["object_scale"] = [scale["kind"], scale["spec"], scale["status"]]
    listed = objs.list_namespaced_custom_object(*args)
    out["objects_listed"] = [o["metadata"]["name"] for o in listed["items"]]
    try:
        objs.create_namespaced_custom_object(
            *args, {**body, "metadata": {"name": "bad"}, "spec": {"color": "green"}}
        )
    except ApiException as e:
        out["object_invalid"] = [e.status, json.loads(e.body)["message"]]
    events = []
    stream = watch.Watch().stream(
        objs.list_namespaced_custom_object,
        *args,
        resource_version=listed["metadata"]["resourceVersion"],
        timeout_seconds=30,
    )
    objs.delete_namespaced_custom_object(*args, "g")
    for event in stream:
        events.append([event["type"], event["object"]["metadata"]["name"]])
        break
    out["objects_watched"] = events


def main() -> None:
    config.load_kube_config(sys.argv[1])
    ext = client.ApiextensionsV1Api()
    out: dict = {"version": kubernetes.__version__}

    made = ext.create_custom_resource_definition(crd())
    out["created"] = described(made)
    out["read"] = described(ext.read_custom_resource_definition(NAME))
    out["read_status"] = described(ext.read_custom_resource_definition_status(NAME))
    listed = ext.list_custom_resource_definition(label_selector="app=typed")
    out["listed"] = [type(listed).__name__, [c.metadata.name for c in listed.items]]

    events = []
    stream = watch.Watch().stream(
        ext.list_custom_resource_definition,
        resource_version=listed.metadata.resource_version,
        timeout_seconds=30,
    )
    patched = ext.patch_custom_resource_definition(
        NAME, {"metadata": {"annotations": {"note": "x"}}, "spec": {"names": {"shortNames": ["gd", "gdt"]}}}
    )  # fmt: skip
    out["patched"] = [patched.metadata.generation, patched.status.accepted_names.short_names]
    for event in stream:
        obj = event["object"]
        events.append([event["type"], type(obj).__name__, obj.status.stored_versions])
        break
    out["watched"] = events

    # read-modify-replace, as controllers do it
    current = ext.read_custom_resource_definition(NAME)
    current.spec.versions[0].additional_printer_columns.append(
        client.V1CustomResourceColumnDefinition(
            name="Color", type="string", json_path=".spec.color"
        )
    )
    replaced = ext.replace_custom_resource_definition(NAME, current)
    out["replaced"] = [replaced.metadata.generation, described(replaced)["printer"]]
    # a fresh object (no status) replacing it keeps the server's status
    fresh = crd()
    fresh.metadata.resource_version = replaced.metadata.resource_version
    again = ext.replace_custom_resource_definition(NAME, fresh)
    out["replaced_fresh"] = [
        again.metadata.generation,
        conditions(again),
        again.status.accepted_names.kind,
    ]
    # the status subresource: the spec is kept, the status as written
    status = ext.read_custom_resource_definition_status(NAME)
    status.spec.group = "ignored.example.com"
    status.status.stored_versions = ["v1"]
    written = ext.replace_custom_resource_definition_status(NAME, status)
    out["status_replaced"] = [written.spec.group, written.status.stored_versions]
    patched_status = ext.patch_custom_resource_definition_status(
        NAME, {"status": {"storedVersions": ["v1"]}}
    )
    out["status_patched"] = patched_status.status.stored_versions

    custom_objects(out)

    # a CRD written as a plain body that leaves out what Go's bools default to false
    # (v1beta1's served and storage): the typed model requires both on the way back
    raw = client.ApiClient().sanitize_for_serialization(crd())
    raw["metadata"] = {"name": f"widgets.{GROUP}"}
    raw["spec"]["names"] = {"plural": "widgets", "kind": "Widget"}
    raw["spec"]["versions"].append({"name": "v1beta1"})
    dynamic = DynamicClient(client.ApiClient())  # the typed API would refuse the body
    dynamic.resources.get(
        api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition"
    ).create(body=raw)
    widgets = ext.read_custom_resource_definition(f"widgets.{GROUP}")
    out["widgets"] = [[v.name, v.served, v.storage] for v in widgets.spec.versions] + [
        widgets.status.accepted_names.list_kind
    ]
    ext.delete_custom_resource_definition(f"widgets.{GROUP}")

    try:
        ext.read_custom_resource_definition("absent.example.com")
    except ApiException as e:
        out["absent"] = e.status
    deleted = ext.delete_custom_resource_definition(NAME)
    out["deleted"] = type(deleted).__name__
    out["after_delete"] = [c.metadata.name for c in ext.list_custom_resource_definition().items]
    ext.create_custom_resource_definition(crd())
    collection = ext.delete_collection_custom_resource_definition(label_selector="app=typed")
    out["collection_deleted"] = type(collection).__name__
    out["after_collection"] = [c.metadata.name for c in ext.list_custom_resource_definition().items]
    print(json.dumps(out))


main()
