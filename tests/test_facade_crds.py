"""CustomResourceDefinitions through real HTTP, to the official client: a CRD created
with ``ApiextensionsV1Api`` is Established, its kind discovered by the dynamic client,
its objects created, read, listed and watched (label and field selectors), patched and
deleted with ``CustomObjectsApi``; a CRD of one facade is not served by another."""

from __future__ import annotations

import json

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient

from broker.facade import Facade, ManualClock, discovery

GROUP = "stable.example.com"


def crontab_crd(scope: str = "Namespaced", **version: object) -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"crontabs.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": scope,
            "names": {"plural": "crontabs", "kind": "CronTab", "shortNames": ["ct"]},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                    **version,
                }
            ],
        },
    }


def crontab(name: str, labels: dict | None = None, **spec: object) -> dict:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "CronTab",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
    }


@pytest.fixture
def clients(tmp_path):
    with Facade(ManualClock()) as facade:
        api = config.new_client_from_config(
            config_file=str(facade.write_kubeconfig(tmp_path / "kc", "crd-test"))
        )
        yield facade, api
        api.close()


def test_a_crd_is_established_and_its_kind_served_discovered_and_deleted(clients, tmp_path):
    facade, api = clients
    ext = client.ApiextensionsV1Api(api)
    made = ext.create_custom_resource_definition(crontab_crd())
    conditions = {c.type: c.status for c in made.status.conditions}
    assert conditions == {"Established": "True", "NamesAccepted": "True"}
    assert made.status.accepted_names.singular == "crontab"
    assert made.status.accepted_names.list_kind == "CronTabList"
    assert made.status.stored_versions == ["v1"]
    assert [c.metadata.name for c in ext.list_custom_resource_definition().items] == [
        f"crontabs.{GROUP}"
    ]
    dyn = DynamicClient(api, cache_file=str(tmp_path / "discovery.json"))
    res = dyn.resources.get(api_version=f"{GROUP}/v1", kind="CronTab")
    assert res.namespaced and res.short_names == ["ct"] and res.singular_name == "crontab"
    assert set(res.verbs) == {"create", "delete", "get", "list", "patch", "update", "watch"}
    res.create(body=crontab("a", cronSpec="* * * * */5"), namespace="default")
    assert res.get(name="a", namespace="default").spec.cronSpec == "* * * * */5"
    groups = client.ApisApi(api).get_api_versions()
    assert GROUP in [g.name for g in groups.groups]

    ext.delete_custom_resource_definition(f"crontabs.{GROUP}")
    with pytest.raises(ApiException) as gone:
        client.CustomObjectsApi(api).list_namespaced_custom_object(
            GROUP, "v1", "default", "crontabs"
        )
    assert gone.value.status == 404
    assert GROUP not in [g.name for g in client.ApisApi(api).get_api_versions().groups]
    # its objects went with it: made again, it holds nothing
    ext.create_custom_resource_definition(crontab_crd())
    assert facade.store.count(f"crontabs.{GROUP}") == 0


def test_custom_objects_crud_selectors_patch_and_watch(clients, tmp_path):
    _, api = clients
    client.ApiextensionsV1Api(api).create_custom_resource_definition(crontab_crd())
    objs = client.CustomObjectsApi(api)
    args = (GROUP, "v1", "default", "crontabs")
    a = objs.create_namespaced_custom_object(*args, crontab("a", {"tier": "x"}, replicas=1))
    assert a["metadata"]["generation"] == 1 and a["metadata"]["uid"]
    objs.create_namespaced_custom_object(*args, crontab("b", {"tier": "y"}, replicas=2))
    with pytest.raises(ApiException) as dup:
        objs.create_namespaced_custom_object(*args, crontab("a"))
    assert dup.value.status == 409
    assert [o["metadata"]["name"] for o in objs.list_namespaced_custom_object(*args)["items"]] == [
        "a",
        "b",
    ]
    by_label = objs.list_namespaced_custom_object(*args, label_selector="tier=y")
    assert [o["metadata"]["name"] for o in by_label["items"]] == ["b"]
    by_name = objs.list_cluster_custom_object(
        GROUP, "v1", "crontabs", field_selector="metadata.name=a"
    )
    assert [o["metadata"]["name"] for o in by_name["items"]] == ["a"]
    by_ns = objs.list_cluster_custom_object(
        GROUP, "v1", "crontabs", field_selector="metadata.namespace=kube-system"
    )
    assert by_ns["items"] == []
    listed = objs.list_namespaced_custom_object(*args)

    merged = objs.patch_namespaced_custom_object(*args, "a", {"spec": {"replicas": 3}})
    assert merged["spec"]["replicas"] == 3 and merged["metadata"]["generation"] == 2
    dyn = DynamicClient(api, cache_file=str(tmp_path / "discovery.json"))
    json_patched = dyn.resources.get(api_version=f"{GROUP}/v1", kind="CronTab").patch(
        name="b",
        namespace="default",
        body=[{"op": "replace", "path": "/spec/replicas", "value": 7}],
        content_type="application/json-patch+json",
    )
    assert json_patched.spec.replicas == 7
    with pytest.raises(ApiException) as strategic:
        dyn.resources.get(api_version=f"{GROUP}/v1", kind="CronTab").patch(
            name="b",
            namespace="default",
            body={"spec": {"replicas": 8}},
            content_type="application/strategic-merge-patch+json",
        )
    assert strategic.value.status == 415
    objs.delete_namespaced_custom_object(*args, "a")
    assert [o["metadata"]["name"] for o in objs.list_namespaced_custom_object(*args)["items"]] == [
        "b"
    ]

    seen = []
    stream = watch.Watch().stream(
        objs.list_namespaced_custom_object,
        *args,
        label_selector="tier=x",
        resource_version=listed["metadata"]["resourceVersion"],
        timeout_seconds=30,
    )
    for event in stream:
        seen.append((event["type"], event["object"]["metadata"]["name"]))
        if len(seen) == 2:
            break
    assert seen == [("MODIFIED", "a"), ("DELETED", "a")]


def test_cluster_scoped_custom_objects(clients):
    _, api = clients
    client.ApiextensionsV1Api(api).create_custom_resource_definition(crontab_crd("Cluster"))
    objs = client.CustomObjectsApi(api)
    made = objs.create_cluster_custom_object(GROUP, "v1", "crontabs", crontab("c"))
    assert "namespace" not in made["metadata"]
    assert objs.get_cluster_custom_object(GROUP, "v1", "crontabs", "c")["metadata"]["name"] == "c"
    with pytest.raises(ApiException) as namespaced:
        objs.list_namespaced_custom_object(GROUP, "v1", "default", "crontabs")
    assert namespaced.value.status == 404


def test_a_crd_of_one_facade_is_not_served_by_another(clients, tmp_path):
    facade, api = clients
    client.ApiextensionsV1Api(api).create_custom_resource_definition(crontab_crd())
    with Facade(ManualClock()) as other:
        other_api = config.new_client_from_config(
            config_file=str(other.write_kubeconfig(tmp_path / "kc2", "other"))
        )
        with pytest.raises(ApiException) as absent:
            client.CustomObjectsApi(other_api).list_namespaced_custom_object(
                GROUP, "v1", "default", "crontabs"
            )
        assert absent.value.status == 404
        other_api.close()
    # and the same CRD may be made there too, independently
    assert facade.store.types.lookup(GROUP, "v1", "crontabs") is not None


def test_a_crd_that_is_not_valid_is_refused_with_kube_apiservers_paths(clients):
    _, api = clients
    bad = crontab_crd()
    bad["metadata"]["name"] = "wrong.name.example.com"
    bad["spec"]["versions"][0]["storage"] = False
    with pytest.raises(ApiException) as invalid:
        client.ApiextensionsV1Api(api).create_custom_resource_definition(bad)
    assert invalid.value.status == 422
    fields = {c["field"] for c in __import__("json").loads(invalid.value.body)["details"]["causes"]}
    # no storage version: none stored either (ValidateCustomResourceDefinitionStoredVersions)
    assert fields == {"metadata.name", "spec.versions", "status.storedVersions"}


SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["cronSpec"],
            "properties": {
                "cronSpec": {"type": "string", "minLength": 1},
                "replicas": {"type": "integer", "minimum": 0, "maximum": 10, "default": 1},
                "mode": {"type": "string", "enum": ["Fast", "Slow"], "default": "Slow"},
                "steps": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {"name": {"type": "string"}},
                    },
                },
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
        "status": {
            "type": "object",
            "properties": {"replicas": {"type": "integer"}, "selector": {"type": "string"}},
        },
    },
}


def _structured(api) -> client.CustomObjectsApi:
    crd = crontab_crd(
        schema={"openAPIV3Schema": SCHEMA},
        subresources={
            "status": {},
            "scale": {
                "specReplicasPath": ".spec.replicas",
                "statusReplicasPath": ".status.replicas",
                "labelSelectorPath": ".status.selector",
            },
        },
    )
    client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
    return client.CustomObjectsApi(api)


ARGS = (GROUP, "v1", "default", "crontabs")


def test_the_schema_prunes_unknown_fields_and_applies_defaults(clients):
    objs = _structured(clients[1])
    body = crontab("a", cronSpec="* * * * *", bogus=1, extra={"kept": {"deep": True}})
    body["toplevel"] = "dropped"
    made = objs.create_namespaced_custom_object(*ARGS, body)
    assert made["spec"] == {
        "cronSpec": "* * * * *",
        "replicas": 1,
        "mode": "Slow",
        "extra": {"kept": {"deep": True}},
    }
    assert "toplevel" not in made and made["metadata"]["labels"] == {}


def _invalid(objs, body) -> dict:
    with pytest.raises(ApiException) as raised:
        objs.create_namespaced_custom_object(*ARGS, body)
    assert raised.value.status == 422
    return json.loads(raised.value.body)


def test_the_schema_refuses_what_it_forbids_with_kube_apiservers_words(clients):
    objs = _structured(clients[1])
    wrong = _invalid(objs, crontab("a", cronSpec="x", replicas="three"))
    assert wrong["message"] == (
        'CronTab.stable.example.com "a" is invalid: spec.replicas: Invalid value: "string": '
        'spec.replicas in body must be of type integer: "string"'
    )
    many = _invalid(objs, crontab("a", replicas=11, mode="Medium", steps=[{}]))
    assert [(c["reason"], c["field"]) for c in many["details"]["causes"]] == [
        ("FieldValueRequired", "spec.cronSpec"),
        ("FieldValueInvalid", "spec.replicas"),
        ("FieldValueNotSupported", "spec.mode"),
        ("FieldValueRequired", "spec.steps[0].name"),
    ]
    assert "spec.replicas in body should be less than or equal to 10" in many["message"]
    assert (
        'spec.mode: Unsupported value: "Medium": supported values: "Fast", "Slow"'
        in (many["message"])
    )
    assert clients[0].store.count(f"crontabs.{GROUP}") == 0


def test_status_and_main_writes_each_ignore_the_other_half(clients):
    objs = _structured(clients[1])
    made = objs.create_namespaced_custom_object(
        *ARGS, {**crontab("a", cronSpec="x"), "status": {"replicas": 5}}
    )
    assert "status" not in made  # a create ignores the status
    status = objs.patch_namespaced_custom_object_status(
        *ARGS, "a", {"spec": {"replicas": 9}, "status": {"replicas": 2}}
    )
    assert status["status"] == {"replicas": 2} and status["spec"]["replicas"] == 1
    assert status["metadata"]["generation"] == 1
    main = objs.patch_namespaced_custom_object(
        *ARGS, "a", {"spec": {"replicas": 3}, "status": {"replicas": 7}}
    )
    assert main["status"] == {"replicas": 2} and main["spec"]["replicas"] == 3
    assert main["metadata"]["generation"] == 2


def test_the_scale_subresource_reads_and_writes_the_declared_paths(clients):
    objs = _structured(clients[1])
    objs.create_namespaced_custom_object(*ARGS, crontab("a", cronSpec="x", replicas=2))
    objs.patch_namespaced_custom_object_status(
        *ARGS, "a", {"status": {"replicas": 2, "selector": "app=a"}}
    )
    scale = objs.get_namespaced_custom_object_scale(*ARGS, "a")
    assert scale["kind"] == "Scale" and scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 2, "selector": "app=a"}
    scaled = objs.patch_namespaced_custom_object_scale(*ARGS, "a", {"spec": {"replicas": 4}})
    assert scaled["spec"] == {"replicas": 4}
    stored = objs.get_namespaced_custom_object(*ARGS, "a")
    assert stored["spec"]["replicas"] == 4 and stored["status"]["replicas"] == 2
    listed = discovery.resource_list(GROUP, "v1", clients[0].store.types)
    names = {r["name"]: r.get("kind") for r in listed["resources"]}
    assert names == {"crontabs": "CronTab", "crontabs/status": "CronTab", "crontabs/scale": "Scale"}


def test_several_versions_share_the_storage_version_and_only_served_ones_are_routed(clients):
    facade, api = clients
    crd = crontab_crd()
    v1 = crd["spec"]["versions"][0]
    crd["spec"]["versions"] = [
        {**v1, "name": "v1beta1", "storage": False},
        v1,
        {**v1, "name": "v2", "served": False, "storage": False},
    ]
    client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
    versions = [g for g in client.ApisApi(api).get_api_versions().groups if g.name == GROUP][0]
    assert [v.version for v in versions.versions] == ["v1beta1", "v1"]
    objs = client.CustomObjectsApi(api)
    beta = (GROUP, "v1beta1", "default", "crontabs")
    made = objs.create_namespaced_custom_object(
        *beta, {**crontab("a"), "apiVersion": f"{GROUP}/v1beta1"}
    )
    assert made["apiVersion"] == f"{GROUP}/v1beta1"
    assert objs.get_namespaced_custom_object(*ARGS, "a")["apiVersion"] == f"{GROUP}/v1"
    listed = objs.list_namespaced_custom_object(*beta)
    assert [o["apiVersion"] for o in listed["items"]] == [f"{GROUP}/v1beta1"]
    assert facade.store.get(f"crontabs.{GROUP}", "default", "a")["apiVersion"] == f"{GROUP}/v1"
    stream = watch.Watch().stream(objs.list_namespaced_custom_object, *beta, timeout_seconds=30)
    for event in stream:
        assert event["object"]["apiVersion"] == f"{GROUP}/v1beta1"
        break
    with pytest.raises(ApiException) as unserved:
        objs.list_namespaced_custom_object(GROUP, "v2", "default", "crontabs")
    assert unserved.value.status == 404


def test_a_crd_whose_plural_is_taken_is_not_accepted_and_serves_nothing(clients):
    facade, api = clients
    crd = crontab_crd()
    crd["metadata"]["name"] = "leases.coordination.k8s.io"
    crd["spec"]["group"] = "coordination.k8s.io"
    crd["spec"]["names"] = {"plural": "leases", "kind": "Lease2"}
    made = client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
    conditions = {c.type: (c.status, c.reason) for c in made.status.conditions}
    assert conditions == {
        "NamesAccepted": ("False", "PluralConflict"),
        "Established": ("False", "NotAccepted"),
    }
    assert facade.store.types.lookup("coordination.k8s.io", "v1", "leases").kind == "Lease"


def test_a_write_that_changes_only_a_values_type_is_stored(clients):
    """true and 1 are equal to Python, not to JSON: the update is a change (a new
    resourceVersion, the new bytes), not a no-op that drops the client's write."""
    _, api = clients
    client.ApiextensionsV1Api(api).create_custom_resource_definition(crontab_crd())
    objs = client.CustomObjectsApi(api)
    a = objs.create_namespaced_custom_object(*ARGS, crontab("a", flag=1))
    a["spec"]["flag"] = True
    b = objs.replace_namespaced_custom_object(*ARGS, "a", a)
    assert b["spec"]["flag"] is True
    assert b["metadata"]["resourceVersion"] != a["metadata"]["resourceVersion"]
    assert objs.get_namespaced_custom_object(*ARGS, "a")["spec"]["flag"] is True
    same = objs.replace_namespaced_custom_object(*ARGS, "a", b)  # a true no-op stays one
    assert same["metadata"]["resourceVersion"] == b["metadata"]["resourceVersion"]
