"""``metadata.finalizers`` as kube-apiserver honours them (kopf's delete handlers, any
operator's cleanup): a DELETE of an object with finalizers only marks it
(``deletionTimestamp``, grace 0) and answers with the object; an update never moves the
mark and adds no finalizer to it (422); the update that removes the last finalizer
deletes it. Through the official client, on a ConfigMap and on a custom resource."""

from __future__ import annotations

import json

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


def test_an_update_may_not_mark_an_object_deleted_nor_change_its_grace(api):
    """``deletionTimestamp`` and ``deletionGracePeriodSeconds`` are the server's: a PUT
    or PATCH that sets them on an object that has none is a 422 "field is immutable"
    (``ValidateObjectMetaUpdate``, the time shown as Go's ``time.Time.String()``), and
    the object stays as it was; once it is being deleted they are kept whatever is sent,
    and the grace period may not change."""
    facade, api_client = api
    v1 = client.CoreV1Api(api_client)
    v1.create_namespaced_config_map(
        "default", {"metadata": {"name": "cm", "finalizers": [FINALIZER]}}
    )
    got = v1.read_namespaced_config_map("cm", "default")
    got.metadata.deletion_timestamp = "2026-11-28T11:00:00.5+01:00"
    with pytest.raises(ApiException) as put:
        v1.replace_namespaced_config_map("cm", "default", got)
    assert put.value.status == 422
    assert json.loads(put.value.body)["message"] == (
        'ConfigMap "cm" is invalid: metadata.deletionTimestamp: Invalid value: '
        "2026-11-28 10:00:00.5 +0000 UTC: field is immutable"
    )
    with pytest.raises(ApiException) as patch:
        v1.patch_namespaced_config_map(
            "cm",
            "default",
            {"metadata": {"deletionTimestamp": "2026-11-28T11:00:00Z", "deletionGracePeriodSeconds": 30}},
        )  # fmt: skip
    assert json.loads(patch.value.body)["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: 2026-11-28 11:00:00 +0000 UTC: field is immutable",
            "field": "metadata.deletionTimestamp",
        },
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: 30: field is immutable",
            "field": "metadata.deletionGracePeriodSeconds",
        },
    ]
    stored = facade.store.get("configmaps", "default", "cm")["metadata"]
    assert "deletionTimestamp" not in stored and "deletionGracePeriodSeconds" not in stored
    # being deleted: what is sent is replaced by the stored values, except a new grace
    stamp = v1.delete_namespaced_config_map("cm", "default")["metadata"]["deletionTimestamp"]
    marked = v1.read_namespaced_config_map("cm", "default")
    marked.metadata.deletion_timestamp = "2030-01-01T00:00:00Z"
    marked.metadata.deletion_grace_period_seconds = None
    kept = v1.replace_namespaced_config_map("cm", "default", marked).metadata
    assert kept.deletion_grace_period_seconds == 0
    assert facade.store.get("configmaps", "default", "cm")["metadata"]["deletionTimestamp"] == stamp
    with pytest.raises(ApiException) as grace:
        v1.patch_namespaced_config_map(
            "cm", "default", {"metadata": {"deletionGracePeriodSeconds": 5}}
        )
    assert "metadata.deletionGracePeriodSeconds: Invalid value: 5: field is immutable" in (
        grace.value.body
    )
