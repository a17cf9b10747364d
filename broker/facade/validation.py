"""Names, labels, annotations and field errors exactly as kube-apiserver validates them.

One home for the rules (apimachinery's ``util/validation``, ``api/validation`` and
``api/validate/content`` as of v1.30) so that the facade's admission and the checks of
workload and platform files up front report the same thing with the same words:

- ``is_dns1123_label`` / ``is_dns1123_subdomain`` / ``is_dns1035_label`` /
  ``is_qualified_name`` (a label key) / ``is_label_value`` return the list of problems
  (empty when valid), with the Go messages;
- ``validate_labels`` / ``validate_annotations`` / ``validate_object_meta`` return
  ``FieldError`` lists with the API server's field paths;
- ``invalid(kind, name, errors)`` is the 422 ``Invalid`` Status (``details.causes``
  included) and ``cannot_handle(kind, why)`` the 400 a body that does not decode gets.

Pure functions over JSON values; no state.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ApiError

# --- content rules (k8s.io/apimachinery/pkg/util/validation) ----------------------------

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
LABEL_VALUE_MAX = 63
QUALIFIED_NAME_MAX = 63
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024  # bytes, keys and values together

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _QUALIFIED_NAME_FMT + ")?"

_DNS1123_LABEL = re.compile(_DNS1123_LABEL_FMT + r"\Z")
_DNS1123_SUBDOMAIN = re.compile(_DNS1123_SUBDOMAIN_FMT + r"\Z")
_DNS1035_LABEL = re.compile(_DNS1035_LABEL_FMT + r"\Z")
_QUALIFIED_NAME = re.compile(_QUALIFIED_NAME_FMT + r"\Z")
_LABEL_VALUE = re.compile(_LABEL_VALUE_FMT + r"\Z")


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def regex_error(message: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{message} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}'" for e in examples)
    return f"{message} (e.g. {shown}, regex used for validation is '{fmt}')"


def empty_error() -> str:
    return "must be non-empty"


_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
    "'-', and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character"
)
_DNS1035_LABEL_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
    "with an alphabetic character, and end with an alphanumeric character"
)
_QUALIFIED_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', "
    "'_' or '.', and must start and end with an alphanumeric character"
)


def is_dns1123_label(value: str) -> list[str]:
    errs = []
    if len(value) > DNS1123_LABEL_MAX:
        errs.append(max_len_error(DNS1123_LABEL_MAX))
    if not _DNS1123_LABEL.match(value):
        if _DNS1123_SUBDOMAIN.match(value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    errs = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errs.append(max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN.match(value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_dns1035_label(value: str) -> list[str]:
    errs = []
    if len(value) > DNS1123_LABEL_MAX:
        errs.append(max_len_error(DNS1123_LABEL_MAX))
    if not _DNS1035_LABEL.match(value):
        errs.append(regex_error(_DNS1035_LABEL_MSG, _DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def is_qualified_name(value: str) -> list[str]:
    """A label key (and annotation key, lower-cased): ``[prefix/]name``."""
    errs = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part " + empty_error())
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return [
            "a qualified name "
            + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part " + empty_error())
    elif len(name) > QUALIFIED_NAME_MAX:
        errs.append("name part " + max_len_error(QUALIFIED_NAME_MAX))
    if not _QUALIFIED_NAME.match(name):
        errs.append(
            "name part "
            + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


def is_label_value(value: str) -> list[str]:
    errs = []
    if len(value) > LABEL_VALUE_MAX:
        errs.append(max_len_error(LABEL_VALUE_MAX))
    if not _LABEL_VALUE.match(value):
        errs.append(regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def is_path_segment_name(value: str) -> list[str]:
    """Names that only need to be one URL path segment (events)."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in value]


# --- field errors (k8s.io/apimachinery/pkg/util/validation/field) ------------------------

_OMIT = object()


@dataclass(frozen=True)
class FieldError:
    """One problem at one field path, formatted as ``field.Error`` formats itself."""

    type: str  # "Invalid value", "Required value", "Unsupported value", "Forbidden", …
    field: str
    value: Any = _OMIT
    detail: str = ""

    REASONS = {
        "Invalid value": "FieldValueInvalid",
        "Required value": "FieldValueRequired",
        "Unsupported value": "FieldValueNotSupported",
        "Forbidden": "FieldValueForbidden",
        "Too long": "FieldValueTooLong",
        "Too many": "FieldValueTooMany",
        "Duplicate value": "FieldValueDuplicate",
        "Not found": "FieldValueNotFound",
        "Invalid type": "FieldValueTypeInvalid",
    }

    def body(self) -> str:
        if self.type in ("Required value", "Forbidden", "Too long") or self.value is _OMIT:
            text = self.type
        else:
            text = f"{self.type}: {_go_value(self.value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"

    def cause(self) -> dict[str, str]:
        return {
            "reason": self.REASONS.get(self.type, "FieldValueInvalid"),
            "message": self.body(),
            "field": self.field,
        }


def _go_value(value: Any) -> str:
    """How Go's ``%v``/``%q`` shows a bad value in an error message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # Go's %q, near enough
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def invalid_value(field: str, value: Any, detail: str) -> FieldError:
    return FieldError("Invalid value", field, value, detail)


def required(field: str, detail: str = "") -> FieldError:
    return FieldError("Required value", field, detail=detail)


def forbidden(field: str, detail: str) -> FieldError:
    return FieldError("Forbidden", field, detail=detail)


def not_supported(field: str, value: Any, supported: Iterable[str]) -> FieldError:
    listed = ", ".join(json.dumps(s) for s in supported)
    return FieldError("Unsupported value", field, value, f"supported values: {listed}")


def too_long(field: str, max_bytes: int) -> FieldError:
    return FieldError("Too long", field, detail=f"must have at most {max_bytes} bytes")


def invalid(kind: str, name: str, errs: list[FieldError], group: str = "") -> ApiError:
    """The 422 ``Invalid`` error of ``NewInvalid``: the message aggregates the errors
    (``[a, b]`` when more than one, duplicates dropped), ``details.causes`` lists them."""
    messages = list(dict.fromkeys(str(e) for e in errs))
    qualified = f"{kind}.{group}" if group else kind
    if not messages:
        message = f'{qualified} "{name}" is invalid'
    elif len(messages) == 1:
        message = f'{qualified} "{name}" is invalid: {messages[0]}'
    else:
        message = f'{qualified} "{name}" is invalid: [{", ".join(messages)}]'
    exc = ApiError(422, message, "Invalid", kind=kind, name=name, group=group)
    exc.details["causes"] = [e.cause() for e in errs]
    return exc


def cannot_handle(kind: str, api_version: str, why: str) -> ApiError:
    """The 400 a body gets when it does not decode into its type (a wrong-typed field, a
    quantity that does not parse): ``Pod in version "v1" cannot be handled as a Pod: …``."""
    version = api_version.rsplit("/", 1)[-1]
    return ApiError(400, f'{kind} in version "{version}" cannot be handled as a {kind}: {why}')


# --- object metadata (k8s.io/apimachinery/pkg/api/validation) ----------------------------


def validate_labels(labels: Mapping[str, str] | None, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for key, value in (labels or {}).items():
        errs.extend(invalid_value(path, key, m) for m in is_qualified_name(key))
        errs.extend(invalid_value(path, value, m) for m in is_label_value(value))
    return errs


def validate_annotations(annotations: Mapping[str, str] | None, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    total = 0
    for key, value in (annotations or {}).items():
        # the rule is a qualified name, except that case does not matter
        errs.extend(invalid_value(path, key, m) for m in is_qualified_name(key.lower()))
        total += len(key.encode(errors="surrogatepass")) + len(value.encode(errors="surrogatepass"))
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        errs.append(too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT))
    return errs


def name_rule(kind: str):
    """The name validation of ``kind`` (``path_segment`` for Events, a DNS-1035 label for
    Services, a DNS-1123 label for Namespaces, a DNS-1123 subdomain otherwise)."""
    return {
        "Namespace": is_dns1123_label,
        "Service": is_dns1035_label,
        "Event": is_path_segment_name,
    }.get(kind, is_dns1123_subdomain)


def _mask_trailing_dash(name: str) -> str:
    return name[:-1] + "a" if len(name) > 1 and name.endswith("-") else name


def validate_object_meta(
    meta: Mapping[str, Any], kind: str, *, namespaced: bool, path: str = "metadata"
) -> list[FieldError]:
    """``ValidateObjectMeta``: name (or generateName), namespace, labels, annotations.
    Expects the types already checked (strings where strings belong)."""
    rule = name_rule(kind)
    errs: list[FieldError] = []
    generate = meta.get("generateName") or ""
    if generate:
        errs.extend(
            invalid_value(f"{path}.generateName", generate, m)
            for m in rule(_mask_trailing_dash(generate))
        )
    name = meta.get("name") or ""
    if not name:
        errs.append(required(f"{path}.name", "name or generateName is required"))
    else:
        errs.extend(invalid_value(f"{path}.name", name, m) for m in rule(name))
    namespace = meta.get("namespace") or ""
    if namespaced:
        if not namespace:
            errs.append(required(f"{path}.namespace"))
        else:
            errs.extend(
                invalid_value(f"{path}.namespace", namespace, m)
                for m in is_dns1123_label(namespace)
            )
    elif namespace:
        errs.append(forbidden(f"{path}.namespace", "not allowed on this type"))
    generation = meta.get("generation")
    if isinstance(generation, int) and generation < 0:
        errs.append(
            invalid_value(f"{path}.generation", generation, "must be greater than or equal to 0")
        )
    errs.extend(validate_labels(meta.get("labels"), f"{path}.labels"))
    errs.extend(validate_annotations(meta.get("annotations"), f"{path}.annotations"))
    return errs
