"""The patch formats the official client sends."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.facade import ApiError
from broker.facade.patch import apply_patch, json_patch, merge_patch, strategic_merge_patch

NODE = {
    "metadata": {"name": "n", "labels": {"a": "1", "b": "2"}},
    "status": {
        "conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "DiskPressure", "status": "False"},
        ],
        "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
    },
}


def test_merge_patch_sets_and_removes_keys_and_replaces_lists():
    out = merge_patch(
        NODE, {"metadata": {"labels": {"a": None, "c": "3"}}, "status": {"conditions": []}}
    )
    assert out["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert (
        out["status"]["conditions"] == []
        and out["status"]["addresses"] == NODE["status"]["addresses"]
    )
    assert NODE["metadata"]["labels"] == {"a": "1", "b": "2"}, "the target is not modified"


def test_strategic_merge_merges_conditions_by_type_and_deletes_with_directive():
    patch = {
        "status": {
            "conditions": [
                {"type": "Ready", "status": "False", "reason": "Sim"},
                {"type": "MemoryPressure", "status": "False"},
                {"type": "DiskPressure", "$patch": "delete"},
            ]
        }
    }
    out = strategic_merge_patch(NODE, patch)
    assert out["status"]["conditions"] == [
        {"type": "Ready", "status": "False", "reason": "Sim"},
        {"type": "MemoryPressure", "status": "False"},
    ]


def test_json_patch_operations():
    ops = [
        {"op": "add", "path": "/metadata/labels/c", "value": "3"},
        {"op": "remove", "path": "/metadata/labels/a"},
        {"op": "replace", "path": "/status/conditions/0/status", "value": "False"},
        {"op": "test", "path": "/metadata/name", "value": "n"},
        {"op": "copy", "from": "/metadata/labels/b", "path": "/metadata/labels/d"},
        {"op": "move", "from": "/metadata/labels/d", "path": "/metadata/labels/e"},
        {"op": "add", "path": "/status/addresses/-", "value": {"type": "Hostname", "address": "n"}},
    ]
    out = json_patch(NODE, ops)
    assert out["metadata"]["labels"] == {"b": "2", "c": "3", "e": "2"}
    assert out["status"]["conditions"][0]["status"] == "False"
    assert out["status"]["addresses"][-1]["type"] == "Hostname"
    with pytest.raises(ApiError) as err:
        json_patch(NODE, [{"op": "test", "path": "/metadata/name", "value": "other"}])
    assert err.value.code == 422
    with pytest.raises(ApiError) as err:
        json_patch(NODE, [{"op": "remove", "path": "/nope/x"}])
    assert err.value.code == 422 and "/nope/x" in err.value.message


def test_unknown_patch_type_is_415():
    with pytest.raises(ApiError) as err:
        apply_patch("application/apply-patch+yaml", NODE, {})
    assert err.value.code == 415


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda children: st.dictionaries(st.text(max_size=3), children, max_size=3),
    max_leaves=8,
)


@given(
    st.dictionaries(st.text(max_size=3), JSON, max_size=4),
    st.dictionaries(st.text(max_size=3), JSON, max_size=4),
)
def test_merge_patch_is_idempotent(target, patch):
    once = merge_patch(target, patch)
    assert merge_patch(once, patch) == once
