"""``metadata.finalizers`` as kube-apiserver honours them (kopf's delete handlers, any
operator's cleanup): a DELETE of an object with finalizers only marks it
(``deletionTimestamp``, grace 0) and answers with the object; an update never moves the
mark and adds no finalizer to it (422); the update that removes the last finalizer
deletes it. Through the official client, on a ConfigMap and on a custom resource."""

from __future__ import annotations

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException
from test_facade_crds import GROUP, crontab, crontab_crd

from broker.facade import Facade, ManualClock

FINALIZER = "example.com/cleanup"


@pytest.fixture
def api(tmp_path):
    with Facade(ManualClock()) as facade:
        api = config.new_client_from_config(
            config_file=str(facade.write_kubeconfig(tmp_path / "kc", "finalizers"))
        )
        yield facade, api
        api.close()


def test_a_configmap_with_a_finalizer_waits_for_its_removal(api):
    facade, api_client = api
    v1 = client.CoreV1Api(api_client)
    body = {"metadata": {"name": "cm", "finalizers": [FINALIZER]}, "data": {"a": "1"}}
    v1.create_namespaced_config_map("default", body)
    events: list[tuple[str, str | None]] = []

    def listen(key, event, obj):
        if key == "configmaps":
            events.append((event, obj["metadata"].get("deletionTimestamp")))

    facade.store.add_listener(listen)
    answer = v1.delete_namespaced_config_map("cm", "default")
    # the object, not a Status (the client declares V1Status: it hands back the dict)
    assert answer["metadata"]["deletionTimestamp"] is not None
    assert answer["metadata"]["deletionGracePeriodSeconds"] == 0
    kept = v1.read_namespaced_config_map("cm", "default")
    assert kept.metadata.finalizers == [FINALIZER]
    # a second DELETE changes nothing; an update keeps the mark, adds no finalizer
    v1.delete_namespaced_config_map("cm", "default")
    v1.patch_namespaced_config_map("cm", "default", {"data": {"a": "2"}})
    with pytest.raises(ApiException) as refused:
        v1.patch_namespaced_config_map(
            "cm", "default", {"metadata": {"finalizers": [FINALIZER, "other/x"]}}
        )
    assert refused.value.status == 422
    assert "no new finalizers can be added if the object is being deleted" in refused.value.body
    replaced = v1.read_namespaced_config_map("cm", "default")
    replaced.metadata.deletion_timestamp = None
    v1.replace_namespaced_config_map("cm", "default", replaced)
    assert v1.read_namespaced_config_map("cm", "default").metadata.deletion_timestamp is not None
    v1.patch_namespaced_config_map("cm", "default", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as gone:
        v1.read_namespaced_config_map("cm", "default")
    assert gone.value.status == 404
    stamp = events[0][1]
    assert stamp is not None
    assert events == [("MODIFIED", stamp), ("MODIFIED", stamp), ("DELETED", stamp)]


def test_a_custom_resource_with_a_finalizer_goes_when_its_finalizer_does(api):
    _, api_client = api
    client.ApiextensionsV1Api(api_client).create_custom_resource_definition(crontab_crd())
    objects = client.CustomObjectsApi(api_client)
    body = crontab("a", cronSpec="x")
    body["metadata"]["finalizers"] = [FINALIZER]
    objects.create_namespaced_custom_object(GROUP, "v1", "default", "crontabs", body)
    marked = objects.delete_namespaced_custom_object(GROUP, "v1", "default", "crontabs", "a")
    assert marked["metadata"]["deletionTimestamp"]
    assert objects.get_namespaced_custom_object(GROUP, "v1", "default", "crontabs", "a")
    objects.patch_namespaced_custom_object(
        GROUP, "v1", "default", "crontabs", "a", {"metadata": {"finalizers": []}}
    )
    with pytest.raises(ApiException) as gone:
        objects.get_namespaced_custom_object(GROUP, "v1", "default", "crontabs", "a")
    assert gone.value.status == 404
    # without a finalizer a DELETE removes it at once, as before
    objects.create_namespaced_custom_object(GROUP, "v1", "default", "crontabs", crontab("b"))
    status = objects.delete_namespaced_custom_object(GROUP, "v1", "default", "crontabs", "b")
    assert status["kind"] == "Status" and status["status"] == "Success"
