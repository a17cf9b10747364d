"""The store's trusted write path (``Store.create(trusted=True)``): the Events the broker
builds itself (broker/controllers/events.py) are stored without decoding, defaulting and
validation. Property: on generated objects, a run of Events written through the trusted
path stores the same bytes, under the same names, uids and resourceVersions, and sends
watchers the same frames, as the same run through the admitted path a client's body
takes."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.controllers import events
from broker.facade import ManualClock, Store, objects

S = 10**9
_LABEL = r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?"
NAMES = st.from_regex(rf"\A{_LABEL}(\.{_LABEL}){{0,12}}\Z").filter(lambda n: len(n) <= 253)
NAMESPACES = st.sampled_from(["default", "kube-system", "team-a"])
TEXT = st.text(max_size=40)
EMIT = st.fixed_dictionaries(
    {
        "pod": st.integers(0, 2),
        "type_": st.sampled_from(["Normal", "Warning"]),
        "reason": st.sampled_from(["Scheduled", "Pulled", "Created", "Started", "Failed"]),
        "message": TEXT,
        "component": st.sampled_from(["kubelet", "default-scheduler", "job-controller"]),
        "host": st.sampled_from(["", "node-1", "ñode"]),
        "aside": st.booleans(),
        "advance_s": st.sampled_from([0, 0, 1, 1800, 3600]),
    }
)


def _admitted_only(store: Store) -> Store:
    """``store`` with every create going through the admitted path (``trusted`` dropped)."""
    create = store.create

    def admitted(*args: Any, trusted: bool = False, **kwargs: Any) -> Any:
        return create(*args, **kwargs)

    store.create = admitted  # type: ignore[method-assign]
    return store


def _run(store: Store, pods: list[tuple[str, str]], writes: list[dict]) -> tuple[list, list]:
    watcher = store.watch("events")
    stored = []
    for ns, name in pods:
        stored.append(
            store.create(
                "pods",
                {
                    "metadata": {"name": name, "namespace": ns},
                    "spec": {"containers": [{"name": "c", "image": "x"}]},
                },  # fmt: skip
            )
        )
    returned = []
    for w in writes:
        store.clock.advance(w["advance_s"] * S)
        returned.append(
            events.emit(
                store,
                stored[w["pod"] % len(stored)],
                type_=w["type_"],
                reason=w["reason"],
                message=w["message"],
                component=w["component"],
                aside=w["aside"],
                host=w["host"],
            )
        )
    entries, rv = store.list_entries("events", None, *_no_selectors(store))
    state = [e.json() for e in entries] + [str(rv).encode()]
    return state + [repr(returned).encode()], watcher.drain()


def _no_selectors(store: Store) -> tuple:
    from broker.facade.selectors import parse_field_selector, parse_label_selector

    rt = store.types.resource_type("events")
    return parse_label_selector(""), parse_field_selector("", rt.key, rt.strategy.fields)


@settings(max_examples=60, deadline=None)
@given(
    pods=st.lists(st.tuples(NAMESPACES, NAMES), min_size=1, max_size=3, unique=True),
    writes=st.lists(EMIT, min_size=1, max_size=8),
)
def test_trusted_events_store_the_bytes_the_admitted_path_stores(pods, writes):
    trusted = _run(Store(ManualClock(), seed=3), pods, writes)
    admitted = _run(_admitted_only(Store(ManualClock(), seed=3)), pods, writes)
    assert trusted == admitted


def test_trusted_path_is_taken_and_skips_admission(monkeypatch):
    """The property above compares two paths only if they differ: the Events' writes
    are trusted, and a trusted create does not run the kind's admission."""
    store = Store(ManualClock())
    pod = store.create(
        "pods", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    )
    rt = store.types.resource_type("events")
    calls = []
    monkeypatch.setattr(type(rt.strategy), "validate", lambda self, rt, obj: calls.append(obj))
    for aside in (False, True):
        events.emit(store, pod, type_="Normal", reason="R", message="m", component="c", aside=aside)  # fmt: skip
    assert calls == [] and store.count("events") == 2


@settings(max_examples=300)
@given(seed=st.integers(0, 2**64))
def test_uids_are_uuid4_of_the_same_draw(seed):
    """``objects.new_uid`` formats the version-4 UUID by hand: the same text as
    ``uuid.UUID(int=..., version=4)`` of the same 128 random bits."""
    mine, theirs = random.Random(seed), random.Random(seed)
    for _ in range(3):
        assert objects.new_uid(mine) == str(uuid.UUID(int=theirs.getrandbits(128), version=4))


@settings(max_examples=500)
@given(epoch_ns=st.integers(0, 253402300799 * S + S - 1))  # up to 9999-12-31T23:59:59
def test_timestamps_are_strftime_of_the_same_instant(epoch_ns):
    """``objects.format_time``/``format_micro_time`` compose the date and the time of day
    themselves: the same text as ``datetime.strftime`` of that instant."""
    at = datetime.fromtimestamp(epoch_ns // S, UTC)
    assert objects.format_time(epoch_ns) == at.strftime("%Y-%m-%dT%H:%M:%SZ")
    micro = f"{at.strftime('%Y-%m-%dT%H:%M:%S')}.{epoch_ns % S // 1000:06d}Z"
    assert objects.format_micro_time(epoch_ns) == micro


def test_a_deletion_leaves_the_state_before_it_as_it_was():
    """A deletion's last state shares the stored object's parts (no copy, no decode): the
    version before it — what an exact read at an older resourceVersion and a watch's
    selector see — keeps its own resourceVersion and no deletionTimestamp."""
    store = Store(ManualClock())
    pod = store.create(
        "pods", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    )
    events.emit(store, pod, type_="Normal", reason="R", message="m", component="c", aside=True)
    before = store.resource_version
    store.clock.advance(3600 * S)
    store.create("namespaces", {"metadata": {"name": "later"}})  # the Event expires first
    gone = store.delete("pods", "default", "p")
    assert gone["metadata"]["deletionTimestamp"] and store.count("events") == 0
    for key in ("pods", "events"):
        (old,) = store.list_entries_at(key, None, *_no_selectors(store), before)
        assert "deletionTimestamp" not in old.obj["metadata"]
        assert int(old.obj["metadata"]["resourceVersion"]) <= before
