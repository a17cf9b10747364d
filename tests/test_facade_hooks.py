"""The broker's side of the facade: hooks, the store API, the clock, configuration files."""

from __future__ import annotations

import json
import urllib.request

import pytest
import yaml

from broker.facade import ApiError, Facade, Hooks, ManualClock, Store
from broker.facade.objects import make_node

SPEC = {"containers": [{"name": "c", "image": "busybox"}]}


def call(facade: Facade, method: str, path: str, body: object = None) -> tuple[int, dict]:
    req = urllib.request.Request(
        facade.url + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={
            "Authorization": f"Bearer {facade.add_token('t')}",
            "Content-Type": "application/json",
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.fixture
def facade():
    f = Facade(ManualClock())
    f.store.create("nodes", make_node("n1"))
    with f:
        yield f


def test_evict_and_delete_hooks_run_before_the_pod_goes(facade):
    calls = []

    def on_evict(ns, name):
        calls.append(("evict", ns, name, facade.store.get_or_none("pods", ns, name) is not None))

    def on_delete_pod(ns, name):
        calls.append(("delete", ns, name, facade.store.get_or_none("pods", ns, name) is not None))
        if name == "keep":
            raise ApiError(409, "this pod stays")

    facade.api.hooks = Hooks(on_evict=on_evict, on_delete_pod=on_delete_pod)
    for name in ("e", "d", "keep"):
        facade.store.create("pods", {"metadata": {"name": name}, "spec": SPEC}, namespace="default")
    assert (
        call(
            facade,
            "POST",
            "/api/v1/namespaces/default/pods/e/eviction",
            {"metadata": {"name": "e"}},
        )[0]
        == 201
    )
    status, body = call(facade, "DELETE", "/api/v1/namespaces/default/pods/d")
    assert status == 200 and body["kind"] == "Pod" and body["metadata"]["name"] == "d"
    status, body = call(facade, "DELETE", "/api/v1/namespaces/default/pods/keep")
    assert (status, body["message"]) == (409, "this pod stays")
    assert calls == [
        ("evict", "default", "e", True),
        ("delete", "default", "d", True),
        ("delete", "default", "keep", True),
    ]
    assert facade.store.get_or_none("pods", "default", "keep") is not None


def test_a_hook_may_remove_the_pod_itself(facade):
    facade.api.hooks = Hooks(on_evict=lambda ns, name: facade.store.delete("pods", ns, name))
    facade.store.create("pods", {"metadata": {"name": "x"}, "spec": SPEC}, namespace="default")
    assert call(facade, "POST", "/api/v1/namespaces/default/pods/x/eviction", {})[0] == 201


def test_on_create_sees_defaults_and_may_edit_or_refuse(facade):
    def on_create(obj):
        if obj["metadata"]["name"] == "refused":
            raise ApiError(403, "no", "Forbidden")
        obj["metadata"].setdefault("annotations", {})["seen-by"] = obj["spec"]["schedulerName"]

    facade.api.hooks = Hooks(on_create=on_create)
    status, pod = call(
        facade,
        "POST",
        "/api/v1/namespaces/default/pods",
        {"metadata": {"name": "ok"}, "spec": SPEC},
    )
    assert status == 201 and pod["metadata"]["annotations"]["seen-by"] == "default-scheduler"
    status, _ = call(
        facade,
        "POST",
        "/api/v1/namespaces/default/pods",
        {"metadata": {"name": "refused"}, "spec": SPEC},
    )
    assert status == 403 and facade.store.get_or_none("pods", "default", "refused") is None


def test_store_update_and_listener_for_the_broker():
    store = Store(ManualClock())
    seen = []
    store.add_listener(lambda key, type_, obj: seen.append((key, type_, obj["metadata"]["name"])))
    store.create(
        "pods", {"metadata": {"name": "p"}, "spec": SPEC}, namespace="jobs"
    )  # namespace made on demand
    rv = store.get("pods", "jobs", "p")["metadata"]["resourceVersion"]

    def run(pod):
        pod["status"]["phase"] = "Running"
        pod["spec"]["nodeName"] = "n1"

    updated = store.update("pods", "jobs", "p", run)
    assert updated["status"]["phase"] == "Running" and int(
        updated["metadata"]["resourceVersion"]
    ) > int(rv)
    assert ("namespaces", "ADDED", "jobs") in seen and seen[-1] == ("pods", "MODIFIED", "p")
    with pytest.raises(ApiError) as err:
        store.bind("jobs", "p", "n2")
    assert err.value.code == 409
    with pytest.raises(ValueError, match="may not rename"):
        store.update("pods", "jobs", "p", lambda pod: pod["metadata"].update(name="q"))


def test_timestamps_come_from_the_virtual_clock():
    clock = ManualClock(wall_epoch_ns=1_700_000_000 * 10**9)
    store = Store(clock)
    clock.advance(90 * 10**9)
    pod = store.create("pods", {"metadata": {"name": "p"}, "spec": SPEC}, namespace="default")
    assert pod["metadata"]["creationTimestamp"] == "2023-11-14T22:14:50Z"


def test_same_requests_same_names_and_uids():
    def run():
        store = Store(ManualClock(), seed=7)
        return [
            store.create(
                "pods", {"metadata": {"generateName": "j-"}, "spec": SPEC}, namespace="default"
            )["metadata"]
            for _ in range(3)
        ]

    first, second = run(), run()
    assert [(m["name"], m["uid"]) for m in first] == [(m["name"], m["uid"]) for m in second]


def test_manual_clock_fires_due_callbacks_in_order_and_skips_cancelled():
    clock = ManualClock()
    fired = []
    clock.call_at(20, lambda: fired.append(("b", clock.now_ns())))
    cancelled = clock.call_at(15, lambda: fired.append(("x", clock.now_ns())))
    clock.call_at(10, lambda: fired.append(("a", clock.now_ns())))
    clock.call_at(20, lambda: fired.append(("c", clock.now_ns())))
    cancelled.cancel()
    clock.advance(19)
    assert fired == [("a", 10)] and clock.now_ns() == 19
    clock.advance_to(25)
    assert fired == [("a", 10), ("b", 20), ("c", 20)] and clock.now_ns() == 25
    with pytest.raises(ValueError):
        clock.advance_to(5)


def test_kubeconfig_names_the_server_and_token(facade, tmp_path):
    path = facade.write_kubeconfig(tmp_path / "kc", "sched-a")
    doc = yaml.safe_load(path.read_text())
    assert doc["clusters"][0]["cluster"]["server"] == facade.url
    assert doc["users"][0]["user"]["token"] == facade.add_token("sched-a")
    assert facade.add_token("sched-b") != facade.add_token("sched-a")
    assert (path.stat().st_mode & 0o077) == 0, "the token file is private"


def test_replacing_with_an_identical_object_is_not_a_write():
    store = Store(ManualClock())
    pod = store.create("pods", {"metadata": {"name": "p"}, "spec": SPEC}, namespace="default")
    watcher = store.watch("pods", resource_version=pod["metadata"]["resourceVersion"])
    del pod["metadata"]["resourceVersion"]
    again = store.replace("pods", pod, namespace="default")
    assert again["metadata"]["resourceVersion"] == str(store.resource_version)
    assert watcher.drain() == []


def test_a_hook_returning_true_takes_over_the_write(facade):
    def on_delete_pod(ns, name):
        facade.store.update(
            "pods",
            ns,
            name,
            lambda p: p["metadata"].update(deletionTimestamp=facade.store.timestamp()),
        )
        return True  # the broker deletes it once the job is killed

    def on_bind(ns, name, node):
        def bind_and_fail(pod):
            pod["spec"]["nodeName"] = node
            pod["status"].update(phase="Failed", reason="OutOfcpu")

        facade.store.update("pods", ns, name, bind_and_fail)
        return True

    facade.api.hooks = Hooks(on_delete_pod=on_delete_pod, on_bind=on_bind)
    facade.store.create("pods", {"metadata": {"name": "t"}, "spec": SPEC}, namespace="default")
    binding = {"metadata": {"name": "t"}, "target": {"kind": "Node", "name": "n1"}}
    assert call(facade, "POST", "/api/v1/namespaces/default/pods/t/binding", binding)[0] == 201
    pod = facade.store.get("pods", "default", "t")
    assert (pod["spec"]["nodeName"], pod["status"]["phase"], pod["status"]["reason"]) == (
        "n1",
        "Failed",
        "OutOfcpu",
    )
    status, body = call(facade, "DELETE", "/api/v1/namespaces/default/pods/t")
    assert status == 200 and body["metadata"]["deletionTimestamp"]
    assert facade.store.get_or_none("pods", "default", "t") is not None


def test_failed_preconditions_do_not_reach_the_hook(facade):
    calls = []
    facade.api.hooks = Hooks(on_delete_pod=lambda ns, name: calls.append(name))
    facade.store.create("pods", {"metadata": {"name": "u"}, "spec": SPEC}, namespace="default")
    status, body = call(
        facade, "DELETE", "/api/v1/namespaces/default/pods/u", {"preconditions": {"uid": "other"}}
    )
    assert status == 409 and "Precondition failed" in body["message"] and calls == []
