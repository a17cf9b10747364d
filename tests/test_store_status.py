"""The store's status-only write path (``Store.update_status``): ``mutate`` gets copies of
the object's metadata and status and the stored spec, shared. Property: on generated
pods and sequences of edits of their status and metadata (the broker's own status writes
among them: running, ready, completed, refused, exited, marked for deletion), a run
through ``update_status`` stores the same bytes under the same resourceVersions, answers
the same (copies, errors), sends watchers the same frames and calls the listeners with
the same objects as the same run through ``update``; and no stored version is changed
by a later write."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.cluster import pod_lifecycle
from broker.cluster.cluster import _completed_status
from broker.facade import ManualClock, Store
from broker.facade.store import _dumps
from simulator import protocol as p

S = 10**9
LEAVES = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=6)
LEAVES |= st.floats(allow_nan=False, allow_infinity=False)
JSON = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=12,
)
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
        "bound": st.booleans(),
    }
)
# an edit of the status or the metadata: a path of choices into it and a new value for
# what it reaches (None as the value: the key removed); a value JSON cannot encode, a
# rename, or one of the broker's own status writes
RAW = st.tuples(
    st.sampled_from(["status", "metadata"]),
    st.lists(st.integers(0, 5), max_size=3),
    st.sampled_from(["zz", "phase", "reason", "labels", "annotations"]),
    JSON | st.just({1, 2}) | st.just(True) | st.just(1),
    st.booleans(),
)
BROKER = st.sampled_from(
    ["started", "started-unready", "ready", "admitted", "completed", "failed", "exited",
     "killed", "refused", "terminating", "annotate", "noop", "rename"]
)  # fmt: skip
WRITES = st.lists(st.tuples(st.integers(0, 3), RAW | BROKER, st.booleans()), max_size=8)


def _raw_edit(obj: dict, edit: tuple) -> None:
    part, path, key, value, remove = edit
    node = obj.setdefault(part, {})
    for choice in path:
        nested = [k for k, v in node.items() if isinstance(v, dict)] if node else []
        if not nested:
            break
        node = node[sorted(nested)[choice % len(nested)]]
    if part == "metadata" and node is obj["metadata"] and key not in ("labels", "annotations"):
        key = f"x-{key}"  # the store's own fields are exercised by the broker's writes
    if remove:
        node.pop(key, None)
    else:
        node[key] = copy.deepcopy(value) if not isinstance(value, set) else value


def _broker_edit(obj: dict, name: str, stamp: str) -> None:
    if name == "started":
        pod_lifecycle.started_status(obj, "10.0.0.1", stamp, True, True, "10.1.0.2")
    elif name == "started-unready":
        pod_lifecycle.started_status(obj, "10.0.0.1", stamp, False, False)
    elif name == "ready":
        pod_lifecycle.ready_status(obj, stamp)
    elif name == "admitted":
        pod_lifecycle.admitted_status(obj, "10.0.0.1", stamp, "10.1.0.2")
    elif name in ("completed", "failed"):
        state = "COMPLETED_SUCCESSFULLY" if name == "completed" else "COMPLETED_FAILED"
        _completed_status(obj, p.JobCompleted("w!0", state, 3, p.ProcSet()), stamp)
    elif name in ("exited", "killed"):
        pod_lifecycle.exited_status(obj, stamp, name == "killed")
    elif name == "refused":
        status = obj.setdefault("status", {})
        status.update(phase="Failed", reason="OutOfcpu", message="m", startTime=stamp)
    elif name == "terminating":
        obj["metadata"]["deletionTimestamp"] = stamp
        obj["metadata"]["deletionGracePeriodSeconds"] = 30
    elif name == "annotate":
        obj["metadata"].setdefault("annotations", {})["timewarp.io/job-id"] = "w!0"
    elif name == "rename":
        obj["metadata"]["name"] = "renamed"
    # "noop": nothing changes (no commit)


def _run(pods: list[dict], writes: list, status_path: bool) -> dict[str, Any]:
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
        if pod["bound"]:
            store.bind("default", f"p{i}", "node-1", copy=False)
    write = store.update_status if status_path else store.update
    answers: list[Any] = []
    for target, edit, want_copy in writes:
        store.clock.advance(S)
        stamp = store.timestamp()
        name = f"p{target % len(pods)}"

        def mutate(obj: dict, edit: Any = edit, stamp: str = stamp) -> None:
            if isinstance(edit, str):
                _broker_edit(obj, edit, stamp)
            else:
                _raw_edit(obj, edit)

        try:
            answers.append(write("pods", "default", name, mutate, copy=want_copy))
        except Exception as exc:  # the same failure, nothing stored
            answers.append((type(exc).__name__, str(exc)))
    entries, rv = store.list_entries("pods", None, *_no_selectors(store))
    history = list(store._history["pods"])
    return {
        "stored": [e.json() for e in entries],
        "rv": rv,
        "answers": answers,
        "calls": calls,
        "frames": [w.drain() for w in watchers],
        "history": [(e.rv, e.type, e.entry.json()) for e in history],
        # no stored version was changed by a later write
        "intact": all(_dumps(e.entry.obj) == e.entry.json() for e in history)
        and all(e.prev is None or _dumps(e.prev) == _was(history, e.prev) for e in history),
    }


def _was(history: list, prev: dict) -> bytes:
    """The encoding committed with ``prev`` (the version before a later event)."""
    for e in history:
        if e.entry.obj is prev:
            return e.entry.json()
    return _dumps(prev)  # committed before the history starts (a create): its own


def _no_selectors(store: Store) -> tuple:
    from broker.facade.selectors import parse_field_selector, parse_label_selector

    return parse_label_selector(None), parse_field_selector(None, "pods", {})


@settings(max_examples=250, deadline=None)
@given(pods=st.lists(PODS, min_size=1, max_size=3), writes=WRITES)
def test_update_status_is_update_for_status_and_metadata_writes(pods, writes):
    full = _run(pods, writes, status_path=False)
    fast = _run(pods, writes, status_path=True)
    assert fast["intact"] and full["intact"]
    assert fast == full


def test_the_spec_is_shared_not_copied():
    store = Store(ManualClock())
    store.create("pods", {"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})  # fmt: skip
    before = store._objects["pods"][("default", "a")].obj
    store.update_status("pods", "default", "a", lambda o: pod_lifecycle.ready_status(o, "t"))
    store.update_status("pods", "default", "a", lambda o: o["status"].update(phase="Running"))
    after = store._objects["pods"][("default", "a")].obj
    assert after["spec"] is before["spec"] and after is not before
    assert after["status"]["phase"] == "Running" and before["status"]["phase"] == "Pending"
