"""Events held as their encoding only (``Strategy.packed``, ``broker/facade/store.py``
``_Packed``): what one stored Event costs (tracemalloc, a bound between the packed and the
decoded sizes) and every answer about Events — list, get, tables, field selectors, watch,
core/v1 and events.k8s.io/v1 — byte for byte what the store answered with decoded dicts."""

from __future__ import annotations

import gc
import inspect
import tracemalloc

import pytest
from test_facade_http import POD, RawClient

from broker.controllers import events
from broker.facade import Facade, ManualClock
from broker.facade.kinds.core import EventStrategy

S = 10**9
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
V1 = "/apis/events.k8s.io/v1/namespaces/default/events"
CORE = "/api/v1/namespaces/default/events"
READS = [  # (path, Accept)
    (CORE, "application/json"),
    (CORE, TABLE),
    ("/api/v1/events?fieldSelector=reason%3DStarted", "application/json"),
    (f"{CORE}?fieldSelector=involvedObject.name%3Dp1,type%3DNormal", TABLE),
    (f"{CORE}?fieldSelector=source%3Dkubelet&limit=2", "application/json"),
    (V1, "application/json"),
    (V1, TABLE),
    (f"{V1}?fieldSelector=regarding.name%3Dp0", "application/json"),
]


def _emit(f: Facade, pod: dict, reason: str, component: str, **kw) -> None:
    events.emit(f.store, pod, type_="Normal", reason=reason, message=f"{reason} it", component=component, **kw)  # fmt: skip


def _answers(packed: bool, monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    monkeypatch.setattr(EventStrategy, "packed", packed)
    f = Facade(ManualClock(), history_limit=100)
    f.token = f.add_token("t")
    out: list[bytes] = []
    with f:
        c = RawClient(f)
        c.sock.settimeout(30)  # a bound, never reached when the server answers

        def read(method: str, path: str, accept: str, body: object = None) -> bytes:
            c.send(method, path, body, {"Accept": accept})
            status, headers = c.head()
            return str(status).encode() + b" " + c._take(int(headers["content-length"]))

        for i in range(3):
            pod = f.store.create("pods", {**POD, "metadata": {"name": f"p{i}", "namespace": "default"}})  # fmt: skip
            _emit(f, pod, "Scheduled", "default-scheduler", aside=True)
            _emit(f, pod, "Started", "kubelet", aside=True, host="n1")
            _emit(f, pod, "Killing", "kubelet")  # a generated name
            f.clock.advance(7 * S)
        _emit(f, pod, "Started", "kubelet", aside=True, host="n1")  # counted: an update
        v1 = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1"},
              "eventTime": "2024-01-01T00:00:00.000000Z", "reason": "R", "action": "A",
              "reportingController": "x/y", "reportingInstance": "i", "type": "Normal",
              "regarding": {"kind": "Pod", "name": "p0", "namespace": "default"}}  # fmt: skip
        out.append(read("POST", V1, "application/json", v1))
        name = f.store.list("events")[0][0]["metadata"]["name"]
        out.append(read("GET", f"{CORE}/{name}", "application/json"))
        out.append(read("GET", f"{CORE}/{name}", TABLE))
        out += [read("GET", path, accept) for path, accept in READS]
        c.send("GET", f"{CORE}?watch=1&resourceVersion=0", None, {"Accept": "application/json"})
        assert c.head()[0] == 200
        out += [c.chunk() for _ in range(9)]  # the 9 Events, as ADDED
        f.store.delete("events", "default", name)
        out.append(c.chunk())
        c.close()
    return out


def test_events_answer_the_same_bytes_packed_or_not(monkeypatch):
    packed = _answers(True, monkeypatch)
    assert packed == _answers(False, monkeypatch)
    assert all(a.startswith((b"200", b"201", b"{")) for a in packed), packed
    assert b'"count":2' in b"".join(packed) and b"DELETED" in packed[-1]  # an update too


_INTERN_LINE = next(
    number
    for number, line in enumerate(inspect.getsource(events).splitlines(), 1)
    if "sys.intern" in line and not line.lstrip().startswith("#")
)


def _held_per_event(n: int) -> float:
    f = Facade(ManualClock())
    pods = [
        f.store.create(
            "pods", {**POD, "metadata": {"name": f"pod-{i}", "namespace": "default"}}
        )  # fmt: skip
        for i in range(n)
    ]
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for pod in pods:
            _emit(f, pod, "Scheduled", "default-scheduler", aside=True)
            f.clock.advance(S)
        events._ASIDE.pop(f.store, None)  # the correlator's share is not the store's
        gc.collect()
        # nor the interpreter's table of interned strings, which the correlator's
        # sys.intern grows: whether it resizes during these 1,500 Events depends on what
        # the process interned before (other tests), not on the store
        not_intern_table = tracemalloc.Filter(False, events.__file__, lineno=_INTERN_LINE)
        held = tracemalloc.take_snapshot().filter_traces([not_intern_table])
        return (sum(s.size for s in held.statistics("filename")) - base) / n
    finally:
        tracemalloc.stop()


def test_a_stored_event_is_held_in_little_more_than_its_bytes(monkeypatch):
    # measured (benchmarks/event_memory.py): ~1.2 KiB packed, ~2.5 KiB as dicts; the
    # encoding alone is ~0.6 KiB, the table's key and the TTL's deadline the rest
    assert _held_per_event(1500) < 1600
