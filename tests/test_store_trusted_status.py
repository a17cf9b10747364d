"""Trusted status writes (``Store.update_status(trusted=True)``, and a binding to a node
named by a string): what the broker's own status functions put in is stored as it is,
not copied and checked again by ``canonical``. Property: on generated pods and
sequences of the broker's status writes (the kubelet's running pod, a Batsim job's
completion, the lifecycle's started/ready/exited statuses, a binding), the trusted path
stores the same bytes under the same resourceVersions, sends watchers the same frames,
calls the listeners with the same objects and keeps the same history as the checked
path; and no stored version is changed by a later write (the values handed over are
the write's own)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.cluster import pod_lifecycle
from broker.cluster.cluster import _completed_status
from broker.cluster.kubelet import _running_status
from broker.cluster.state import NodeInfo
from broker.facade import ManualClock, Store
from broker.facade.selectors import parse_field_selector, parse_label_selector
from broker.facade.store import _dumps
from simulator import protocol as p

S = 10**9
CONTAINER = st.fixed_dictionaries(
    {"name": st.sampled_from(["a", "b", "main"]), "image": st.sampled_from(["x", "y:1"])},
    optional={"resources": st.just({"requests": {"cpu": "1"}})},
)
PODS = st.fixed_dictionaries(
    {
        "labels": st.dictionaries(
            st.sampled_from(["app", "job", "k"]), st.sampled_from(["x", "y"])
        ),
        "containers": st.lists(CONTAINER, min_size=1, max_size=2, unique_by=lambda c: c["name"]),
        "bind": st.sampled_from([None, "node-1", "node-2"]),
    }
)
EDITS = st.sampled_from(
    ["running", "running-annotated", "started", "started-unready", "ready", "completed",
     "failed", "walltime", "exited", "killed", "noop"]
)  # fmt: skip
WRITES = st.lists(st.tuples(st.integers(0, 3), EDITS, st.booleans()), max_size=8)
NODE = NodeInfo("node-1", 0, {"cpu": 4000}, "10.0.0.1")


def _edit(obj: dict, name: str, stamp: str) -> None:
    if name == "running":
        _running_status(obj, NODE, stamp, "10.1.0.2")
    elif name == "running-annotated":  # kubelet.start_containers's wrapper
        obj["metadata"].setdefault("annotations", {})["timewarp.io/job-id"] = "w!0"
        _running_status(obj, NODE, stamp, None)
    elif name == "started":
        pod_lifecycle.started_status(obj, "10.0.0.1", stamp, True, True, "10.1.0.2")
    elif name == "started-unready":
        pod_lifecycle.started_status(obj, "10.0.0.1", stamp, False, False)
    elif name == "ready":
        pod_lifecycle.ready_status(obj, stamp)
    elif name in ("completed", "failed", "walltime"):
        state = {
            "completed": "COMPLETED_SUCCESSFULLY",
            "failed": "COMPLETED_FAILED",
            "walltime": "COMPLETED_WALLTIME_REACHED",
        }[name]
        _completed_status(obj, p.JobCompleted("w!0", state, 3, p.ProcSet()), stamp)
    elif name in ("exited", "killed"):
        pod_lifecycle.exited_status(obj, stamp, name == "killed")
    # "noop": nothing changes (no commit)


def _run(pods: list[dict], writes: list, trusted: bool, monkeypatch: Any) -> dict[str, Any]:
    from broker.facade import store as store_module

    with monkeypatch.context() as m:
        if not trusted:  # the reference: every trusted write checked and copied
            m.setattr(store_module, "_trusted_stored_edit", store_module._stored_edit)
        store = Store(ManualClock(), seed=7)
        calls: list[tuple] = []
        store.add_listener(lambda key, event, obj: calls.append((key, event, _dumps(obj))))
        watchers = [store.watch("pods"), store.watch("pods", label_selector="app=x")]
        for i, pod in enumerate(pods):
            body = {
                "metadata": {"name": f"p{i}", "labels": pod["labels"]},
                "spec": {"containers": copy.deepcopy(pod["containers"])},
            }
            store.create("pods", body, copy=False)
            if pod["bind"]:
                store.bind("default", f"p{i}", pod["bind"], copy=False)
        answers: list[Any] = []
        for target, edit, want_copy in writes:
            store.clock.advance(S)
            stamp = store.timestamp()
            name = f"p{target % len(pods)}"
            mutate = lambda obj, edit=edit, stamp=stamp: _edit(obj, edit, stamp)  # noqa: E731
            answers.append(
                store.update_status("pods", "default", name, mutate, copy=want_copy, trusted=True)
            )
        labels, fields = parse_label_selector(None), parse_field_selector(None, "pods", {})
        entries, rv = store.list_entries("pods", None, labels, fields)
        history = list(store._history["pods"])
        return {
            "stored": [e.json() for e in entries],
            "rv": rv,
            "answers": answers,
            "calls": calls,
            "frames": [w.drain() for w in watchers],
            "history": [(e.rv, e.type, e.entry.json()) for e in history],
            # every version in the history still encodes as it was committed
            "intact": all(_dumps(e.entry.obj) == e.entry.json() for e in history),
        }


@settings(max_examples=200, deadline=None)
@given(pods=st.lists(PODS, min_size=1, max_size=3), writes=WRITES)
def test_trusted_status_writes_store_what_the_checked_path_stores(pods, writes):
    with pytest.MonkeyPatch.context() as monkeypatch:
        trusted = _run(pods, writes, True, monkeypatch)
        checked = _run(pods, writes, False, monkeypatch)
    assert trusted["intact"] and checked["intact"]
    assert trusted == checked


def test_a_trusted_write_leaves_the_versions_before_it_as_they_were():
    store = Store(ManualClock())
    store.create("pods", {"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})  # fmt: skip
    store.bind("default", "a", "node-1", copy=False)
    stamp = store.timestamp()
    store.update_status("pods", "default", "a", lambda o: _running_status(o, NODE, stamp, None), trusted=True)  # fmt: skip
    running = store._objects["pods"][("default", "a")]
    running_bytes = running.json()
    store.clock.advance(S)
    done = p.JobCompleted("w!0", "COMPLETED_SUCCESSFULLY", 0, p.ProcSet())
    stamp = store.timestamp()
    store.update_status("pods", "default", "a", lambda o: _completed_status(o, done, stamp), trusted=True)  # fmt: skip
    assert _dumps(running.obj) == running_bytes  # the completion edited copies, not it
    after = store.get("pods", "default", "a")
    assert after["status"]["phase"] == "Succeeded"
    assert after["status"]["containerStatuses"][0]["state"]["terminated"]["startedAt"] != stamp


def test_a_binding_to_a_node_named_otherwise_than_by_a_string_is_refused_as_before():
    """Only a string is trusted: anything else takes the checked path, which refuses it
    before the commit (no resourceVersion spent, the pod as it was)."""
    store = Store(ManualClock())
    store.create("pods", {"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})  # fmt: skip
    before, rv = store._objects["pods"][("default", "a")].json(), store.resource_version
    with pytest.raises(TypeError, match="not a JSON value"):
        store.bind("default", "a", {"bad": {1, 2}}, copy=False)  # type: ignore[arg-type]
    assert store.resource_version == rv
    assert store._objects["pods"][("default", "a")].json() == before
