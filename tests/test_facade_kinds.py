"""Kinds as strategies: a kind registered at run time (tests/toy_kind.py, one file, and
one line here) is served like the built-in ones, through real HTTP, to the official
client's dynamic API: discovery, create (its defaults), get, list (its field selectors),
watch, replace, patch, its status subresource, 400 and 422 from its strategy, delete."""

from __future__ import annotations

import json

import pytest
import toy_kind  # tests/ is on sys.path under pytest
from kubernetes import config
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient

from broker.facade import Facade, ManualClock, resources


@pytest.fixture
def widgets(tmp_path):
    resources.register(toy_kind.WIDGETS)  # the one line a new kind needs
    facade = Facade(ManualClock())
    try:
        with facade:
            api = config.new_client_from_config(
                config_file=str(facade.write_kubeconfig(tmp_path / "kc", "toys"))
            )
            dyn = DynamicClient(api, cache_file=str(tmp_path / "discovery.json"))
            yield facade, dyn.resources.get(api_version="toys.example.com/v1", kind="Widget")
            api.close()
    finally:
        resources.unregister(toy_kind.WIDGETS)


def _message(raised: pytest.ExceptionInfo) -> str:
    return json.loads(raised.value.body)["message"]


def _widget(name: str, **spec) -> dict:
    return {
        "apiVersion": "toys.example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": spec,
    }


def test_a_kind_registered_at_run_time_is_discovered_and_admitted_by_its_strategy(widgets):
    facade, api = widgets
    assert api.namespaced and api.short_names == ["wd"]
    made = api.create(body=_widget("a", color="red"), namespace="default")
    assert made.spec.size == 1 and made.status.phase == "New"
    assert made.metadata.generation == 1 and made.metadata.uid
    with pytest.raises(ApiException) as bad_type:
        api.create(body=_widget("b", size="big"), namespace="default")
    assert bad_type.value.status == 400
    assert "cannot unmarshal string into Go struct field WidgetSpec.spec.size" in _message(bad_type)
    with pytest.raises(ApiException) as negative:
        api.create(body=_widget("c", size=-1), namespace="default")
    assert negative.value.status == 422
    assert _message(negative) == (
        'Widget.toys.example.com "c" is invalid: spec.size: Invalid value: -1: must be greater '
        "than or equal to 0"
    )
    with pytest.raises(ApiException) as bad_name:
        api.create(body=_widget("Not_A_Name"), namespace="default")
    assert bad_name.value.status == 422
    assert facade.store.count("widgets.toys.example.com") == 1


def test_a_kind_registered_at_run_time_is_listed_watched_updated_and_deleted(widgets):
    facade, api = widgets
    api.create(body=_widget("a", color="red"), namespace="default")
    blue = api.create(body=_widget("b", color="blue", size=3), namespace="default")
    listed = api.get(namespace="default", field_selector="spec.color=blue")
    assert [w.metadata.name for w in listed.items] == ["b"]
    with pytest.raises(ApiException) as unknown_field:
        api.get(namespace="default", field_selector="spec.size=3")
    assert unknown_field.value.status == 400
    events = api.watch(namespace="default", resource_version=listed.metadata.resourceVersion)
    replaced = api.replace(
        body={**_widget("b", color="blue", size=5), "metadata": {"name": "b"}},
        namespace="default",
    )
    assert replaced.spec.size == 5 and replaced.metadata.generation == 2
    assert replaced.status.phase == "New"  # a write of the object keeps its status
    patched = api.patch(
        name="b",
        namespace="default",
        body={"spec": {"color": "green"}},
        content_type="application/merge-patch+json",
    )
    assert patched.spec.color == "green"
    status = api.status.patch(
        name="b",
        namespace="default",
        body={"status": {"phase": "Done"}, "spec": {"size": 9}},
        content_type="application/merge-patch+json",
    )
    assert status.status.phase == "Done" and status.spec.size == 5  # status only
    api.delete(name="b", namespace="default")
    seen = []
    for event in events:
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 4:
            break
    assert seen == [("MODIFIED", "b")] * 3 + [("DELETED", "b")]
    assert replaced.metadata.uid == blue.metadata.uid
    assert [w.metadata.name for w in api.get(namespace="default").items] == ["a"]


def test_registering_a_taken_name_is_refused_and_unregistering_forgets_the_kind(widgets):
    with pytest.raises(ValueError, match="already served"):
        resources.register(toy_kind.WIDGETS)
    with pytest.raises(ValueError, match="already served"):
        resources.register(resources.resource_type("pods"))
