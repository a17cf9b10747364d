"""The object store and its watch streams, as a hypothesis state machine.

Model: the sequence of committed pod changes. Property: every watch stream — including a
client's chain of resumed watches (resume from the last resourceVersion seen, events or
bookmarks) — delivers exactly the model's changes after its start, filtered by its
selector, in order: nothing lost, duplicated or reordered, across history compaction;
a resume from a compacted version is 410 and nothing else.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule

from broker.facade import ApiError, ManualClock, Store

NAMES = st.sampled_from(["a", "b", "c", "d"])
LABELS = st.sampled_from(["x", "y"])
SPEC = {"containers": [{"name": "c", "image": "busybox"}]}


def _decode(frame: bytes) -> tuple[str, str, int]:
    event = json.loads(frame)
    meta = event["object"]["metadata"]
    return event["type"], meta.get("name", ""), int(meta["resourceVersion"])


class Stream:
    """A client's logical watch: a chain of watches, each resumed from the last RV seen."""

    def __init__(self, store: Store, selector: str | None, start: str | None) -> None:
        self.selector = selector
        self.received: list[tuple[str, str, int]] = []
        self.last_rv = 0
        self.initial = start in (None, "0")
        self.start_rv = store.resource_version if self.initial else int(start)
        self.watcher = store.watch(
            "pods", namespace="ns", resource_version=start, label_selector=selector
        )
        self.dead = False

    def drain(self) -> None:
        for frame in self.watcher.drain():
            kind, name, rv = _decode(frame)
            if kind == "BOOKMARK":
                assert rv >= self.last_rv, "a bookmark went back in time"
            elif self.initial and rv <= self.start_rv:
                assert kind == "ADDED" and self.last_rv == 0, "initial state after live events"
            else:
                assert rv > self.last_rv, "resourceVersions go backwards"
            if kind != "BOOKMARK":
                self.received.append((kind, name, rv))
            if not (self.initial and rv <= self.start_rv):
                self.last_rv = max(self.last_rv, rv)


class StoreMachine(RuleBasedStateMachine):
    streams = Bundle("streams")

    @initialize(limit=st.integers(min_value=1, max_value=6))
    def setup(self, limit: int) -> None:
        self.store = Store(ManualClock(), history_limit=limit, namespaces=["ns"])
        self.limit = limit
        self.current: dict[str, tuple[str, int]] = {}  # name -> (label, rv)
        self.log: list[
            tuple[int, str, str, str | None, str | None]
        ] = []  # rv, type, name, old, new label
        self.initial_state: dict[int, dict[str, tuple[str, int]]] = {}
        self.all_streams: list[Stream] = []

    # --- writes ---------------------------------------------------------------------

    def _record(self, type_: str, name: str, old: str | None, new: str | None) -> None:
        rv = self.store.resource_version
        self.log.append((rv, type_, name, old, new))
        if new is None:
            del self.current[name]
        else:
            self.current[name] = (new, rv)

    @rule(name=NAMES, label=LABELS)
    def create(self, name: str, label: str) -> None:
        body = {"metadata": {"name": name, "labels": {"l": label}}, "spec": SPEC}
        if name in self.current:
            with pytest.raises(ApiError) as err:
                self.store.create("pods", body, namespace="ns")
            assert err.value.code == 409
            return
        self.store.create("pods", body, namespace="ns")
        self._record("ADDED", name, None, label)

    @rule(name=NAMES, label=LABELS)
    def relabel(self, name: str, label: str) -> None:
        if name not in self.current:
            with pytest.raises(ApiError) as err:
                self.store.patch("pods", "ns", name, {"metadata": {"labels": {"l": label}}})
            assert err.value.code == 404
            return
        before = self.store.resource_version
        self.store.patch("pods", "ns", name, {"metadata": {"labels": {"l": label}}})
        old = self.current[name][0]
        if old == label:
            assert self.store.resource_version == before, "a no-op patch must not bump the version"
        else:
            self._record("MODIFIED", name, old, label)

    @rule(name=NAMES)
    def delete(self, name: str) -> None:
        if name not in self.current:
            return
        self.store.delete("pods", "ns", name)
        self._record("DELETED", name, self.current[name][0], None)

    # --- watches --------------------------------------------------------------------

    def _compacted(self) -> int:
        return self.log[-self.limit - 1][0] if len(self.log) > self.limit else 0

    @rule(
        target=streams,
        selector=st.sampled_from([None, "l=x", "l!=x"]),
        start=st.sampled_from(["none", "now", "past"]),
        back=st.integers(0, 8),
    )
    def start_watch(self, selector, start, back):
        if start == "none":
            rv = None
        elif start == "now":
            rv = str(self.store.resource_version)
        else:
            rv = str(max(self.store.resource_version - back, 1))
        if rv is not None and int(rv) < self._compacted():
            with pytest.raises(ApiError) as err:
                self.store.watch(
                    "pods", namespace="ns", resource_version=rv, label_selector=selector
                )
            assert err.value.code == 410
            return None
        stream = Stream(self.store, selector, rv)
        if stream.initial:
            self.initial_state[id(stream)] = dict(self.current)
        self.all_streams.append(stream)
        return stream

    @rule(stream=streams)
    def drain(self, stream: Stream) -> None:
        if stream is None or stream.dead:
            return
        stream.drain()
        assert stream.received == self.expected(stream)

    @rule(stream=streams)
    def bookmark(self, stream: Stream) -> None:
        if stream is not None and not stream.dead:
            self.store.bookmark(stream.watcher)

    @rule(stream=streams)
    def resume(self, stream: Stream) -> None:
        """The client's reconnect: stop, then watch again from the last version seen."""
        if stream is None or stream.dead:
            return
        stream.drain()
        self.store.stop_watch(stream.watcher)
        # Initial ADDED events carry their objects' older versions; a client resumes from
        # the state it was given (the list/bookmark version), hence start_rv.
        resume_from = max(stream.last_rv, stream.start_rv)
        if resume_from < self._compacted():
            with pytest.raises(ApiError) as err:
                self.store.watch(
                    "pods",
                    namespace="ns",
                    resource_version=str(resume_from),
                    label_selector=stream.selector,
                )
            assert err.value.code == 410
            stream.dead = True
            return
        stream.watcher = self.store.watch(
            "pods",
            namespace="ns",
            resource_version=str(resume_from),
            label_selector=stream.selector,
        )

    # --- the model's answer ---------------------------------------------------------

    def _match(self, selector: str | None, label: str | None) -> bool:
        if label is None:
            return False
        if selector == "l=x":
            return label == "x"
        if selector == "l!=x":
            return label != "x"
        return True

    def expected(self, stream: Stream) -> list[tuple[str, str, int]]:
        out = []
        if stream.initial:
            for name, (label, rv) in sorted(self.initial_state[id(stream)].items()):
                if self._match(stream.selector, label):
                    out.append(("ADDED", name, rv))
        for rv, type_, name, old, new in self.log:
            if rv <= stream.start_rv:
                continue
            was, now = self._match(stream.selector, old), self._match(stream.selector, new)
            if type_ == "ADDED" and now:
                out.append(("ADDED", name, rv))
            elif type_ == "DELETED" and was:
                out.append(("DELETED", name, rv))
            elif type_ == "MODIFIED":
                kind = {
                    (True, True): "MODIFIED",
                    (True, False): "DELETED",
                    (False, True): "ADDED",
                }.get((was, now))
                if kind:
                    out.append((kind, name, rv))
        return out

    @invariant()
    def history_is_bounded(self) -> None:
        if hasattr(self, "store"):
            assert self.store.history_size("pods") <= self.limit


TestStoreMachine = StoreMachine.TestCase
TestStoreMachine.settings = __import__("hypothesis").settings(
    max_examples=60, stateful_step_count=40, deadline=None
)


def test_watch_offers_nothing_to_other_namespaces_or_types():
    store = Store(ManualClock(), namespaces=["a", "b"])
    pods_a = store.watch("pods", namespace="a")
    nodes = store.watch("nodes")
    store.create("pods", {"metadata": {"name": "p"}, "spec": SPEC}, namespace="b")
    assert pods_a.drain() == [] and nodes.drain() == []


def test_history_memory_stays_flat_under_many_writes():
    store = Store(ManualClock(), history_limit=100)
    store.create("pods", {"metadata": {"name": "p"}, "spec": SPEC}, namespace="default")
    for i in range(5000):
        store.patch("pods", "default", "p", {"metadata": {"annotations": {"i": str(i)}}})
    assert store.history_size("pods") == 100
    assert store.count("pods") == 1


def test_list_by_namespace_with_prefix_sharing_names():
    store = Store(ManualClock(), namespaces=[])
    for ns in ("a", "a-b", "ab", "b"):
        for name in ("x", "y"):
            store.create("pods", {"metadata": {"name": name}, "spec": SPEC}, namespace=ns)
    for ns in ("a", "a-b", "ab", "b"):
        items, _ = store.list("pods", ns)
        assert [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in items] == [
            (ns, "x"),
            (ns, "y"),
        ]
    store.delete("pods", "a", "x")
    assert [p["metadata"]["name"] for p in store.list("pods", "a")[0]] == ["y"]
    assert len(store.list("pods")[0]) == 7


def test_concurrent_writers_every_watcher_sees_every_change_once_in_order():
    import threading

    store = Store(ManualClock(), history_limit=10_000)
    for i in range(4):
        store.create("pods", {"metadata": {"name": f"p{i}"}, "spec": SPEC}, namespace="default")
    start = store.resource_version
    watchers = [store.watch("pods", resource_version=str(start)) for _ in range(3)]

    def writer(i: int) -> None:
        for n in range(200):
            store.patch("pods", "default", f"p{i}", {"metadata": {"annotations": {"n": str(n)}}})

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    late = []
    for t in threads:
        t.start()
    late.append(store.watch("pods", resource_version=str(start)))  # joins mid-way: replay + live
    for t in threads:
        t.join()
    expected = list(range(start + 1, store.resource_version + 1))
    for w in watchers + late:
        rvs = [_decode(f)[2] for f in w.drain()]
        assert rvs == expected


def test_reads_are_private_copies_and_odd_strings_survive():
    store = Store(ManualClock())
    odd = "caf\u00e9 \ud800"  # a lone surrogate, as a "\ud800" JSON escape decodes
    store.create(
        "pods",
        {"metadata": {"name": "p", "annotations": {"l": odd}}, "spec": SPEC},  # (labels: no)
        namespace="default",
    )
    got = store.get("pods", "default", "p")
    got["metadata"]["annotations"]["l"] = "changed"
    got["spec"]["containers"].clear()
    again = store.get("pods", "default", "p")
    assert again["metadata"]["annotations"]["l"] == odd
    assert again["spec"]["containers"][0]["image"] == "busybox"
    bound = store.bind("default", "p", "n1")
    bound["spec"]["nodeName"] = "elsewhere"
    assert store.get("pods", "default", "p")["spec"]["nodeName"] == "n1"


def test_not_json_is_refused_naming_where():
    store = Store(ManualClock())
    with pytest.raises(ApiError) as err:
        store.create(
            "pods",
            {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "x": {1, 2}}]}},
            namespace="default",
        )
    assert err.value.code == 400
    assert "set is not a JSON value (at /spec/containers/0/x)" in str(err.value)


def test_broker_writes_without_a_copy_store_the_same_and_return_nothing():
    store = Store(ManualClock())
    pod = {"metadata": {"name": "a", "namespace": "default"}, "spec": SPEC}
    assert store.create("pods", pod, copy=False) is None
    assert store.bind("default", "a", "n1", copy=False) is None

    def run(obj):
        obj.setdefault("status", {})["phase"] = "Running"

    assert store.update("pods", "default", "a", run, copy=False) is None
    stored = store.get("pods", "default", "a")
    assert (stored["spec"]["nodeName"], stored["status"]["phase"]) == ("n1", "Running")
    assert stored["metadata"]["resourceVersion"] == str(store.resource_version)
    before = store.resource_version  # a no-op write is still no write
    assert store.update("pods", "default", "a", run, copy=False) is None
    assert store.resource_version == before
