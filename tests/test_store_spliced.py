"""A stored version's bytes spliced from the version it replaces (``broker/facade/jsonbytes.py``)
are the bytes of encoding it whole: what every GET, LIST, watch frame and history entry
carries. Property over generated JSON objects (non-ASCII text, lone surrogates, floats,
nested dicts and lists) and chains of edits that share parts with the version before, as
the broker's writes do (a part kept as the same object, a dict part's last value changed,
items added after it, a part replaced, a key removed or added)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.facade import ManualClock, Store
from broker.facade.jsonbytes import dumps, encode_version

TEXT = st.text(
    st.characters(
        whitelist_categories=("Ll", "Lu", "Nd", "Cs", "Lo", "Zs", "Cc"), max_codepoint=0x1F600
    ),
    max_size=6,
)
KEYS = st.sampled_from(["a", "b", "é", "resourceVersion", "nodeName", 'q"', "\ud800", "z"])
LEAF = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False) | TEXT  # fmt: skip
VALUE = st.recursive(
    LEAF, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(KEYS, kids, max_size=4), max_leaves=12
)  # fmt: skip
OBJECT = st.dictionaries(KEYS, VALUE, max_size=5)
EDIT = st.tuples(
    st.sampled_from(["keep", "replace", "last", "append", "middle", "drop", "add", "copy"]),
    st.integers(0, 9),
    VALUE,
    KEYS,
)


def _edited(obj: dict, edits: list) -> dict:
    """A new version of ``obj`` sharing its parts, each edit applied to one top-level part
    (by index) as the broker edits a stored object: its other parts the same objects."""
    new = dict(obj)
    for how, index, value, key in edits:
        keys = list(new)
        if how == "add" or not keys:
            new[key] = value
            continue
        k = keys[index % len(keys)]
        part = new[k]
        if how == "replace":
            new[k] = value
        elif how == "drop":
            del new[k]
        elif how == "copy":  # equal, but another object: encoded afresh
            new[k] = _copy(part)
        elif type(part) is dict and part:
            part = dict(part)
            inner = list(part)
            if how == "last":
                part[inner[-1]] = value
            elif how == "append":
                part[key] = value
            elif how == "middle":
                part[inner[index % len(inner)]] = value
            new[k] = part
    return new


def _copy(value: Any) -> Any:
    if type(value) is dict:
        return {k: _copy(v) for k, v in value.items()}
    if type(value) is list:
        return [_copy(v) for v in value]
    return value


@settings(max_examples=400, deadline=None)
@given(first=OBJECT, chain=st.lists(st.lists(EDIT, max_size=4), max_size=4))
def test_a_version_spliced_from_the_one_before_is_its_whole_encoding(first, chain):
    encoded, spans = encode_version(first)
    assert encoded == dumps(first)
    old = first
    for edits in chain:
        new = _edited(old, edits)
        encoded, new_spans = encode_version(new, old, encoded, spans)
        assert encoded == dumps(new)
        old, spans = new, new_spans


def test_a_pod_with_a_lone_surrogate_reads_escaped_through_its_life():
    """A lone surrogate anywhere makes the whole encoding ASCII with escapes (as json.dumps
    writes it): the binding and the status writes after it, spliced, read the same as
    encoded whole, and a later version without it is UTF-8 again."""
    store = Store(ManualClock())
    body = {"metadata": {"name": "a", "annotations": {"note": "\ud800é"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}  # fmt: skip
    store.create("pods", body, copy=False)
    store.bind("default", "a", "node-1", copy=False)
    store.update_status("pods", "default", "a", lambda o: o["status"].update(phase="Running"), copy=False, trusted=True)  # fmt: skip
    entry = store._objects["pods"][("default", "a")]
    assert b"\\ud800\\u00e9" in entry.json() and entry.json() == dumps(entry.obj)
    store.update("pods", "default", "a", lambda o: o["metadata"].pop("annotations"), copy=False)
    store.update_status("pods", "default", "a", lambda o: o["status"].update(phase="Succeeded"), copy=False, trusted=True)  # fmt: skip
    entry = store._objects["pods"][("default", "a")]
    assert entry.json() == dumps(entry.obj) and b"Succeeded" in entry.json()
    assert all(e.entry.json() == dumps(e.entry.obj) for e in store._history["pods"])
