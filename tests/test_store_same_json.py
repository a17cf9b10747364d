"""store.same_json compares leaves inline: the same answers as the plain recursive
definition (types must match: True, 1 and 1.0 differ; dicts by keys then values; lists
by length then items), on generated JSON values and near-copies of them."""

from __future__ import annotations

import copy
import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from broker.facade.store import same_json


def _reference(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return a.keys() == b.keys() and all(_reference(v, b[k]) for k, v in a.items())
    if type(a) is list:
        return len(a) == len(b) and all(map(_reference, a, b))
    return a == b


_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, 1, 0.0, 1.0, -0.0, math.nan, math.inf, "", "1", "a"]),
    st.integers(-3, 3),
    st.floats(-3, 3),
    st.text(max_size=3),
)
_json = st.recursive(
    _leaf,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["a", "b", "c", "1"]), inner, max_size=4)
    ),
    max_leaves=12,
)


def _nudge(value: Any, path: list[int]) -> Any:
    """A copy of ``value`` with one leaf (chosen by ``path``) swapped for a lookalike."""
    if type(value) is dict and value:
        keys = list(value)
        k = keys[path[0] % len(keys)] if path else keys[0]
        return {**value, k: _nudge(value[k], path[1:])}
    if type(value) is list and value:
        i = path[0] % len(value) if path else 0
        return [*value[:i], _nudge(value[i], path[1:]), *value[i + 1 :]]
    if type(value) in (dict, list):
        return {} if type(value) is list else []  # empty: the other kind
    if type(value) is bool:
        return int(value)  # equal to Python, not as JSON
    if type(value) is int:
        return float(value)
    if type(value) is float:
        return int(value) if math.isfinite(value) else None
    return 0 if value is None else f"{value}x"


@given(_json, _json)
def test_any_two_values(a, b):
    assert same_json(a, b) == _reference(a, b)


@given(_json, st.lists(st.integers(0, 5), max_size=5))
def test_a_value_its_copy_and_a_lookalike(a, path):
    twin = copy.deepcopy(a)
    assert same_json(a, twin) == _reference(a, twin)
    other = _nudge(a, path)
    assert same_json(a, other) == _reference(a, other)
    assert same_json(other, a) == _reference(other, a)


def test_lookalikes_inside_containers_differ():
    for a, b in [
        ({"a": True}, {"a": 1}),
        ({"a": 1}, {"a": 1.0}),
        ([0, {"b": [False]}], [0, {"b": [0]}]),
        ({"a": {"b": 1}, "c": None}, {"c": None, "a": {"b": 1.0}}),
        ([[]], [{}]),
    ]:
        assert not same_json(a, b) and not same_json(b, a)
        assert same_json(a, a) and same_json(b, b)
    assert same_json({"a": 1, "b": [1, "x"]}, {"b": [1, "x"], "a": 1})  # key order is not JSON's
