"""The store's copy for a broker-side edit (``_clone``) and the re-sharing of the edited
object with the stored version (``_stored_edit``): on generated JSON objects and edits,
editing the copy never changes the stored object, and what is stored after the edit
encodes to exactly the edited object's bytes, its unchanged parts being the stored
version's own (shared, not copied)."""

from __future__ import annotations

import copy
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.facade.store import _clone, _dumps, _stored_edit, canonical

LEAVES = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=8)
LEAVES |= st.floats(allow_nan=False, allow_infinity=False)
JSON = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=30,
)
OBJECTS = st.fixed_dictionaries(
    {"metadata": st.dictionaries(st.text(max_size=4), JSON, max_size=4)},
    optional={"spec": JSON, "status": JSON},
)
# an edit: a path of choices into the object, and a new value for what it reaches
EDITS = st.lists(
    st.tuples(st.lists(st.integers(0, 5), max_size=4), st.text(max_size=3) | JSON), max_size=4
)


def _edit(obj: dict, edits: list) -> None:
    for path, value in edits:
        parent, key = None, None
        node = obj
        for choice in path:
            if isinstance(node, dict) and node:
                key = sorted(node)[choice % len(node)]
            elif isinstance(node, list) and node:
                key = choice % len(node)
            else:
                break
            parent, node = node, node[key]
        if parent is obj and key == "metadata" and not isinstance(value, dict):
            continue  # a stored object's metadata stays an object
        if parent is not None:
            parent[key] = copy.deepcopy(value)


@settings(max_examples=300, deadline=None)
@given(stored=OBJECTS, edits=EDITS)
def test_an_edit_of_the_copy_is_stored_as_edited_and_shares_the_rest(stored, edits):
    old = canonical(stored)
    before = _dumps(old)
    new = _clone(old)
    _edit(new, edits)
    assert _dumps(old) == before  # the copy is the editor's own
    expected = json.loads(_dumps(new))
    out = _stored_edit(new, old)
    assert _dumps(out) == _dumps(new)
    assert out is not old and out["metadata"] is not old["metadata"]
    for key, value in out.items():  # an unchanged part is the stored one
        if key != "metadata" and key in old and isinstance(value, (dict, list)):
            if value == old[key] and type(value) is type(old[key]):
                assert value is old[key]
    _edit(new, [([], None), ([0, 0], "changed later")])  # the editor's copy moves on...
    new.clear()
    assert json.loads(_dumps(out)) == expected  # ...what is stored does not


def test_a_value_that_changes_only_its_json_type_is_stored_as_edited():
    # Python's == says True == 1 == 1.0; their bytes differ, so the edit is a change
    old = canonical({"metadata": {"a": 1}, "spec": {"x": 1, "y": [0, 1.0]}})
    for path, value, wire in (
        (("spec", "x"), True, b'"x":true'),
        (("spec", "x"), 1.0, b'"x":1.0'),
        (("metadata", "a"), True, b'"a":true'),
    ):
        new = _clone(old)
        new[path[0]][path[1]] = value
        out = _stored_edit(new, old)
        assert _dumps(out) == _dumps(new) and wire in _dumps(new), wire
    new = _clone(old)
    new["spec"]["y"][0] = False  # a list equal to the stored one by ==
    assert b'"y":[false,1.0]' in _dumps(_stored_edit(new, old))
