"""broker.facade.validation: kube-apiserver's rules and messages for names, labels,
annotations, and its 422 Invalid Status."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.facade import validation as v

LABEL_CHARS = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./ %", max_size=80
)


@pytest.mark.parametrize(
    "key", ["app", "app.kubernetes.io/name", "a", "A-b_c.d", "example.com/MyName", "x" * 63]
)
def test_valid_label_keys(key):
    assert v.is_qualified_name(key) == []


@pytest.mark.parametrize(
    ("key", "first_error"),
    [
        ("", "name part must be non-empty"),
        ("-a", "name part must consist of alphanumeric characters"),
        ("a/b/c", "a qualified name must consist of"),
        ("/a", "prefix part must be non-empty"),
        ("Bad_Prefix/a", "prefix part a lowercase RFC 1123 subdomain"),
        ("x" * 64, "name part must be no more than 63 characters"),
        ("a b", "name part must consist of"),
    ],
)
def test_invalid_label_keys(key, first_error):
    assert v.is_qualified_name(key)[0].startswith(first_error)


def test_label_value_rules():
    assert v.is_label_value("") == []
    assert v.is_label_value("my_value.1") == []
    assert v.is_label_value("x" * 64) == ["must be no more than 63 characters"]
    assert v.is_label_value("a b") == [
        "a valid label must be an empty string or consist of alphanumeric characters, '-', "
        "'_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue' or "
        "'my_value' or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?"
        "[A-Za-z0-9])?')"
    ]


def test_dns_names():
    assert v.is_dns1123_label("bad_ns") == [
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
        "and must start and end with an alphanumeric character (e.g. 'my-name' or '123-abc', "
        "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
    ]
    assert v.is_dns1123_label("a.b") == ["must not contain dots"]
    assert v.is_dns1123_subdomain("a.b-c") == []
    assert v.is_dns1123_subdomain("A")[0].endswith(
        "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    )
    assert v.is_dns1123_subdomain("a" * 254)[0] == "must be no more than 253 characters"
    assert v.is_dns1035_label("1abc")
    assert v.is_path_segment_name("a/b") == ["may not contain '/'"]


@given(LABEL_CHARS)
def test_label_value_rule_is_the_regex(value):
    ok = len(value) <= 63 and (
        value == ""
        or (
            value[0].isalnum()
            and value[-1].isalnum()
            and all(c.isalnum() or c in "-_." for c in value)
        )
    )
    assert (v.is_label_value(value) == []) == ok


def test_object_meta_errors_carry_the_api_servers_paths():
    errs = v.validate_object_meta(
        {
            "name": "Bad_Name",
            "namespace": "Bad_NS",
            "labels": {"ok": "a b"},
            "annotations": {"x/y/z": "1"},
        },
        v.is_dns1123_subdomain,
        namespaced=True,
    )
    assert [e.field for e in errs] == [
        "metadata.name",
        "metadata.namespace",
        "metadata.labels",
        "metadata.annotations",
    ]
    assert str(errs[1]).startswith('metadata.namespace: Invalid value: "Bad_NS": a lowercase RFC')


def test_object_meta_requires_a_name_and_a_namespace_where_namespaced():
    errs = v.validate_object_meta({}, v.is_dns1123_subdomain, namespaced=True)
    assert [str(e) for e in errs] == [
        "metadata.name: Required value: name or generateName is required",
        "metadata.namespace: Required value",
    ]
    errs = v.validate_object_meta(
        {"name": "n", "namespace": "x"}, v.is_dns1123_subdomain, namespaced=False
    )
    assert [str(e) for e in errs] == ["metadata.namespace: Forbidden: not allowed on this type"]


def test_annotation_size_limit():
    big = {"a": "x" * (256 * 1024)}
    errs = v.validate_annotations(big, "metadata.annotations")
    assert [str(e) for e in errs] == [
        "metadata.annotations: Too long: must have at most 262144 bytes"
    ]


def test_invalid_status_is_what_new_invalid_builds():
    errs = [
        v.invalid_value(
            "spec.containers[0].resources.requests[cpu]",
            "-64",
            "must be greater than or equal to 0",
        ),
        v.required("spec.containers[0].image"),
    ]
    status = v.invalid("Pod", "p", errs).status()
    assert status["code"] == 422 and status["reason"] == "Invalid"
    assert status["message"] == (
        'Pod "p" is invalid: [spec.containers[0].resources.requests[cpu]: Invalid value: "-64": '
        "must be greater than or equal to 0, spec.containers[0].image: Required value]"
    )
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "-64": must be greater than or equal to 0',
            "field": "spec.containers[0].resources.requests[cpu]",
        },
        {
            "reason": "FieldValueRequired",
            "message": "Required value",
            "field": "spec.containers[0].image",
        },
    ]
    single = v.invalid("Pod", "p", errs[1:]).status()["message"]
    assert single == 'Pod "p" is invalid: spec.containers[0].image: Required value'


def test_cannot_handle_is_a_400():
    exc = v.cannot_handle("Pod", "v1", "json: cannot unmarshal string into Go struct field")
    assert exc.code == 400
    assert exc.message.startswith('Pod in version "v1" cannot be handled as a Pod: json:')
