"""Label and field selectors as the API server reads them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.facade import ApiError
from broker.facade.resources import resource_type
from broker.facade.selectors import FieldSelector, parse_field_selector, parse_label_selector

KEYS = st.sampled_from(["app", "tier", "example.com/team"])
VALUES = st.sampled_from(["web", "db", "a-1", "x.y"])
LABELS = st.dictionaries(KEYS, VALUES, max_size=3)


def _fields(text: str, key: str) -> FieldSelector:
    """A field selector on the type ``key``, with the fields its kind's strategy allows."""
    rt = resource_type(key)
    return parse_field_selector(text, rt.key, rt.strategy.fields)


@st.composite
def requirement(draw):
    """A requirement as text, with the model of what it accepts."""
    key, values = draw(KEYS), draw(st.lists(VALUES, min_size=1, max_size=3, unique=True))
    op = draw(st.sampled_from(["=", "==", "!=", "in", "notin", "exists", "!"]))
    if op in ("=", "==", "!="):
        text = f"{key}{op}{values[0]}"
        model = (
            (lambda ls: ls.get(key) == values[0])
            if op != "!="
            else (lambda ls: ls.get(key) != values[0])
        )
    elif op in ("in", "notin"):
        text = f"{key} {op} ({', '.join(values)})"
        model = (
            (lambda ls: ls.get(key) in values)
            if op == "in"
            else (lambda ls: ls.get(key) not in values)
        )
    elif op == "exists":
        text, model = key, (lambda ls: key in ls)
    else:
        text, model = f"!{key}", (lambda ls: key not in ls)
    return text, model


@given(st.lists(requirement(), min_size=1, max_size=3), LABELS)
def test_label_selector_is_the_conjunction_of_its_requirements(reqs, labels):
    selector = parse_label_selector(",".join(text for text, _ in reqs))
    assert selector.matches(labels) == all(model(labels) for _, model in reqs)


@pytest.mark.parametrize("text", ["a in (b", "a=b=c", "=b", "a in ()", "bad key!=x", "a>b"])
def test_malformed_label_selectors_are_400_naming_the_part(text):
    with pytest.raises(ApiError) as err:
        parse_label_selector(text)
    assert err.value.code == 400 and "unable to parse requirement" in err.value.message


def test_numeric_comparisons():
    assert parse_label_selector("gpus>1").matches({"gpus": "2"})
    assert not parse_label_selector("gpus<1").matches({"gpus": "2"})
    assert not parse_label_selector("gpus>1").matches({})


POD = {
    "metadata": {"name": "p", "namespace": "ns"},
    "spec": {"schedulerName": "custom", "containers": []},
    "status": {"phase": "Pending"},
}


@pytest.mark.parametrize(
    "text, matches",
    [
        ("spec.nodeName=", True),
        ("spec.nodeName==", True),
        ("spec.nodeName!=", False),
        ("spec.schedulerName=custom,status.phase=Pending", True),
        ("spec.schedulerName=custom,status.phase!=Pending", False),
        ("metadata.name=p,metadata.namespace=ns", True),
        ("metadata.name=q", False),
        ("", True),
    ],
)
def test_pod_field_selectors(text, matches):
    assert _fields(text, "pods").matches(POD) is matches


def test_field_selector_escapes_and_errors():
    sel = _fields(r"metadata.name=a\,b", "pods")
    assert sel.matches({"metadata": {"name": "a,b"}})
    with pytest.raises(ApiError) as err:
        _fields("spec.bogus=1", "pods")
    assert err.value.code == 400 and "field label not supported: spec.bogus" in err.value.message
    with pytest.raises(ApiError):
        _fields("spec.nodeName", "pods")
    assert _fields("spec.unschedulable=false", "nodes").matches({"spec": {}})
