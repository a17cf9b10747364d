"""Events the broker writes (broker/controllers/events.py) and their time to live
(broker/facade/expiry.py, Strategy.ttl_s): an hour after the last write, on the
simulated clock; Events written beside the run change no other object's name or uid."""

from __future__ import annotations

from broker.controllers import events
from broker.facade import Facade, ManualClock

S = 10**9
POD = {"spec": {"containers": [{"name": "c", "image": "x"}]}}


def _facade() -> Facade:
    return Facade(ManualClock(), history_limit=100)


def _pod(f: Facade, name: str) -> dict:
    return f.store.create("pods", {**POD, "metadata": {"name": name, "namespace": "default"}})


def _names(f: Facade) -> list[str]:
    return sorted(e["metadata"]["name"] for e in f.store.list("events")[0])


def test_events_live_an_hour_after_their_last_write_and_reads_remove_nothing():
    f = _facade()
    pod = _pod(f, "a")
    events.emit(f.store, pod, type_="Normal", reason="Old", message="m", component="k", aside=True)  # fmt: skip
    f.clock.advance(1800 * S)
    events.emit(f.store, pod, type_="Normal", reason="Late", message="m", component="k", aside=True)  # fmt: skip
    f.clock.advance(1800 * S)  # t=3600: the first is due, nothing wrote since
    assert len(_names(f)) == 2  # a read removes nothing (looking never changes the run)
    _pod(f, "b")  # a write: what is due goes first
    assert [e["reason"] for e in f.store.list("events")[0]] == ["Late"]
    f.clock.advance(1800 * S)
    _pod(f, "c")
    assert _names(f) == []


def test_an_identical_event_is_counted_and_its_life_renewed():
    f = _facade()
    pod = _pod(f, "a")
    for _ in range(3):
        events.emit(f.store, pod, type_="Warning", reason="R", message="m", component="k", aside=True)  # fmt: skip
        f.clock.advance(1000 * S)
    (event,) = f.store.list("events")[0]
    assert event["count"] == 3 and event["firstTimestamp"] != event["lastTimestamp"]
    assert event["metadata"]["name"].startswith("a.")  # <object>.<hex of the time>
    f.clock.advance(2000 * S)  # 4000 s after the first write, 2600 s after the last
    _pod(f, "b")
    assert len(_names(f)) == 1


def test_events_beside_the_run_change_no_other_uid_or_generated_name():
    def run(with_events: bool) -> list[tuple[str, str]]:
        f = _facade()
        out = []
        for i in range(5):
            pod = f.store.create(
                "pods", {**POD, "metadata": {"generateName": "w-", "namespace": "default"}}
            )
            out.append((pod["metadata"]["name"], pod["metadata"]["uid"]))
            if with_events:
                for reason in ("Scheduled", "Pulled", "Created", "Started"):
                    events.emit(
                        f.store, pod, type_="Normal", reason=reason, message=str(i),
                        component="kubelet", aside=True,
                    )  # fmt: skip
        return out

    assert run(True) == run(False)


def test_the_correlator_forgets_an_identity_an_hour_after_its_first_write():
    """Each of several Events of one instant is forgotten an hour after it was first
    written (not after its last count): then an identical Event is written anew."""
    f = _facade()
    pod = _pod(f, "a")

    def emit(reason: str) -> None:
        events.emit(f.store, pod, type_="Normal", reason=reason, message="m", component="k", aside=True)  # fmt: skip

    emit("A")
    emit("B")  # same instant as A
    f.clock.advance(1000 * S)
    emit("C")
    f.clock.advance(1000 * S)
    emit("A")  # counted: its Event now lives until t = 5600 s
    f.clock.advance(1600 * S)  # t = 3600: A and B forgotten, C not
    for reason in ("A", "B", "C"):
        emit(reason)
    by_reason: dict[str, list[int]] = {}
    for e in f.store.list("events")[0]:
        by_reason.setdefault(e["reason"], []).append(e["count"])
    assert {r: sorted(c) for r, c in by_reason.items()} == {"A": [1, 2], "B": [1], "C": [2]}


def test_the_correlator_holds_little_per_event():
    """What the repeat-Event tracker keeps per live Event (~190k at 10k nodes): its
    identity's repeated strings shared (interned), no (time, identity) pair per Event.
    Before: ~340 B per Event; now ~190 B."""
    import gc
    import tracemalloc

    f = _facade()
    n = 1500
    for i in range(n):
        _pod(f, f"p{i}")
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(n):
            pod = f.store.get("pods", "default", f"p{i}")  # a fresh copy, as the kubelet has
            for reason in ("Pulled", "Created", "Started"):
                message = f"{reason} container {pod['spec']['containers'][0]['name']}"
                events.emit(f.store, pod, type_="Normal", reason=reason, message=message, component="kubelet", aside=True)  # fmt: skip
            f.clock.advance(S)
        del pod
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        state = events._ASIDE.pop(f.store)
        assert len(state.known) == 3 * n
        del state
        gc.collect()
        per_event = (before - tracemalloc.get_traced_memory()[0]) / (3 * n)
    finally:
        tracemalloc.stop()
    assert per_event < 250, per_event


def test_an_expiry_commits_what_a_delete_at_that_instant_would():
    """The expiry removes an Event without decoding a last state for a caller (there is
    none): its DELETED commit — watch frame, listeners' object, resourceVersion — is the
    one ``Store.delete`` would make at the same instant."""

    def run(expire: bool) -> tuple[list, list, str]:
        f = _facade()
        pod = _pod(f, "a")
        events.emit(f.store, pod, type_="Normal", reason="R", message="m", component="k", aside=True)  # fmt: skip
        heard: list = []
        f.store.add_listener(lambda key, type_, obj: heard.append((key, type_, obj)))
        watcher = f.store.watch("events")
        f.clock.advance(3600 * S)
        if expire:
            _pod(f, "b")  # a write: the due Event goes first
        else:
            (event,) = f.store.list("events")[0]
            f.store.delete("events", "default", event["metadata"]["name"])
            _pod(f, "b")
        return watcher.drain(), heard, f.store.resource_version

    assert run(expire=True) == run(expire=False)
