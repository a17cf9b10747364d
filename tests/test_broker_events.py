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
