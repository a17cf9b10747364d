"""Names, labels, annotations and field errors exactly as kube-apiserver validates them.

The rules (apimachinery's ``util/validation``, ``api/validation`` and
``api/validate/content`` as of v1.30), so that the facade's admission and the checks of
workload and platform files up front report the same thing with the same words:

- ``is_dns1123_label`` / ``is_dns1123_subdomain`` / ``is_dns1035_label`` /
  ``is_qualified_name`` (a label key) / ``is_label_value`` return the list of problems
  (empty when valid), with the Go messages — their home is ``broker/k8s/names.py``,
  below the facade, re-exported here;
- ``validate_labels`` / ``validate_annotations`` / ``validate_object_meta`` return
  ``FieldError`` lists with the API server's field paths;
- ``invalid(kind, name, errors)`` is the 422 ``Invalid`` Status (``details.causes``
  included) and ``cannot_handle(kind, why)`` the 400 a body that does not decode gets.

Pure functions over JSON values; no state.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from broker.k8s.names import (  # noqa: F401  (re-exported for the facade's modules)
    TOTAL_ANNOTATION_SIZE_LIMIT,
    is_dns1035_label,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_value,
    is_path_segment_name,
    is_qualified_name,
)

from .errors import ApiError

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


class GoText(str):
    """A bad value already in the words Go's error shows it with (a ``fmt.Stringer``'s
    ``String()``, e.g. a time's), written as is, unquoted."""


def go_time(value: str) -> GoText:
    """How a field error shows a ``metav1.Time``: Go's ``time.Time.String()`` of the
    parsed instant in the server's zone (UTC): ``2026-11-28 11:00:00.5 +0000 UTC``.
    A value that does not parse (decoding would have refused it) is shown as sent."""
    try:
        at = datetime.fromisoformat(value).astimezone(UTC)
    except (TypeError, ValueError):
        return GoText(json.dumps(value))
    text = at.strftime("%Y-%m-%d %H:%M:%S")
    if at.microsecond:
        text += f".{at.microsecond:06d}".rstrip("0")
    return GoText(f"{text} +0000 UTC")


def _go_value(value: Any) -> str:
    """How Go's ``%v``/``%q`` shows a bad value in an error message."""
    if value is None:
        return "null"
    if isinstance(value, GoText):
        return str(value)
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


def _mask_trailing_dash(name: str) -> str:
    return name[:-1] + "a" if len(name) > 1 and name.endswith("-") else name


def validate_object_meta(
    meta: Mapping[str, Any],
    rule: Callable[[str], list[str]],
    *,
    namespaced: bool,
    path: str = "metadata",
) -> list[FieldError]:
    """``ValidateObjectMeta``: name (or generateName) by the kind's ``rule`` (a DNS-1123
    subdomain for most, see each kind's strategy), namespace, labels, annotations.
    Expects the types already checked (strings where strings belong)."""
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
    errs.extend(validate_owner_references(meta.get("ownerReferences"), f"{path}.ownerReferences"))
    return errs


def validate_owner_references(refs: Any, path: str) -> list[FieldError]:
    """``ValidateOwnerReferences``: each names an apiVersion with a version, a kind, a
    name and a uid; at most one is the controller. (The Go paths carry no index.)"""
    errs: list[FieldError] = []
    controller = ""
    for ref in refs if isinstance(refs, list) else ():
        if not isinstance(ref, dict):
            continue  # not decoded: only a broker write stores one
        api_version, kind = ref.get("apiVersion") or "", ref.get("kind") or ""
        if api_version.count("/") > 1 or not api_version.rpartition("/")[2]:
            errs.append(
                invalid_value(f"{path}.apiVersion", api_version, "version must not be empty")
            )
        for key in ("kind", "name", "uid"):
            if not ref.get(key):
                errs.append(invalid_value(f"{path}.{key}", ref.get(key) or "", "must not be empty"))
        if ref.get("controller") is True:
            current = f"{kind}/{ref.get('name') or ''}"
            if controller:
                errs.append(
                    invalid_value(
                        path,
                        refs,
                        'Only one reference can have Controller set to true. Found "true" in '
                        f"references for {controller} and {current}",
                    )
                )
            else:
                controller = current
    return errs
