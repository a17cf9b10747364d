"""The typed decode's fast path (broker/controllers/typed.py ``_well_formed``): it may only
say a status decodes as it is when the field-by-field decode (``_decode``) finds nothing
to drop, and it does say so for the statuses the broker itself writes (the common case
it exists for)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.cluster.kubelet import _running_status
from broker.cluster.state import NodeInfo
from broker.controllers import typed as t

TIME = "2026-01-01T00:00:00Z"
LEAVES = [None, 0, 3, True, 1.5, "", "x", TIME, "not a time", {}, [], {"a": 1}]
_REMOVE = object()
_strings = st.sampled_from(["", "x", "True", TIME])
_times = st.sampled_from([None, TIME])


def _some(draw: st.DrawFn, fields: dict[str, st.SearchStrategy]) -> dict:
    """A dict with each of ``fields`` present or not (one coin each)."""
    return {k: draw(v) for k, v in fields.items() if draw(st.booleans())}


@st.composite
def _condition(draw: st.DrawFn) -> dict:
    out = {"type": draw(_strings), "status": draw(_strings)}
    out.update(_some(draw, dict.fromkeys(t._CONDITION_STRINGS, _strings)))
    out.update(_some(draw, dict.fromkeys(t._CONDITION_TIMES, _times)))
    return out


@st.composite
def _container(draw: st.DrawFn) -> dict:
    state = st.sampled_from([None, {}, {"running": {"startedAt": TIME}}])
    fields = {"restartCount": st.integers(0, 3), "state": state, "lastState": state}
    return {"name": "c", **_some(draw, fields)}


@st.composite
def _well_typed(draw: st.DrawFn) -> tuple[str, dict]:
    """A status of some kind every field of which decodes (what the broker and most
    clients write)."""
    kind = draw(st.sampled_from(sorted(t.SCHEMAS)))
    schema = t.SCHEMAS[kind]
    fields: dict[str, st.SearchStrategy] = {k: st.integers(0, 5) for k in schema.ints}
    fields.update({k: _strings for k in schema.strings})
    fields.update({k: _times for k in schema.times})
    fields.update({k: st.sampled_from([None, {}]) for k in schema.objects})
    fields["conditions"] = st.one_of(st.none(), st.lists(_condition(), max_size=3))
    fields["containerStatuses"] = st.one_of(st.none(), st.lists(_container(), max_size=2))
    fields["initContainerStatuses"] = fields["containerStatuses"]
    return kind, _some(draw, fields)


def _spots(value: object) -> list[tuple[object, object]]:
    """Every (container, key or index) in ``value``: the places one defect may go."""
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    else:
        return []
    out: list[tuple[object, object]] = []
    for key, inner in items:
        out.append((value, key))
        out += _spots(inner)
    return out


def _variants(status: dict) -> list[dict]:
    """``status`` and each copy of it with one defect: one value anywhere in it replaced
    by one of :data:`LEAVES` (any JSON type, a time that does not parse), or removed."""
    out = [status]
    for i in range(len(_spots(status))):
        for leaf in [*LEAVES, _REMOVE]:
            copy = json.loads(json.dumps(status))
            where, key = _spots(copy)[i]
            if leaf is _REMOVE:
                del where[key]  # type: ignore[attr-defined]
            else:
                where[key] = json.loads(json.dumps(leaf))  # type: ignore[index]
            out.append(copy)
    return out


@settings(max_examples=60, deadline=None)
@given(_well_typed())
def test_the_fast_path_never_skips_a_decode_that_drops_something(case):
    kind, good = case
    schema = t.SCHEMAS[kind]
    assert t._well_formed(schema, good)  # the generator writes well-typed statuses only
    for status in _variants(good):
        if t._well_formed(schema, status):
            assert t._decode(schema, status) is status, status
        assert t._status(schema, status) == t._decode(schema, status)


def test_the_statuses_the_broker_writes_take_the_fast_path():
    node = NodeInfo("node-0", 0, {"cpu": 1000}, "10.0.0.1", {})
    pod = {"metadata": {"uid": "u"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    _running_status(pod, node, TIME, "10.1.0.2")
    assert t._well_formed(t.SCHEMAS["pods"], pod["status"])
    job = {"active": 1, "succeeded": 0, "startTime": TIME, "uncountedTerminatedPods": {}}
    job["conditions"] = [{"type": "Complete", "status": "True", "lastTransitionTime": TIME}]
    assert t._well_formed(t.SCHEMAS["jobs.batch"], job)
    rs = {"replicas": 2, "readyReplicas": 2, "observedGeneration": 1, "conditions": []}
    assert t._well_formed(t.SCHEMAS["replicasets.apps"], rs)
