"""A CRD version's structural schema (``openAPIV3Schema``) applied to a custom resource
as kube-apiserver applies it (``apiextensions-apiserver/pkg/apiserver/schema``): unknown
fields pruned, defaults filled in, then the value validated, each error with its field
path and kube-apiserver's wording (``k8s.io/kube-openapi/pkg/validation/errors``).

Keywords read: ``type``, ``properties``, ``additionalProperties``, ``items``,
``required``, ``enum``, ``minimum``/``maximum`` (and ``exclusive*``), ``minLength``/
``maxLength``, ``pattern``, ``minItems``/``maxItems``, ``nullable``, ``default``,
``x-kubernetes-preserve-unknown-fields``, ``x-kubernetes-int-or-string``. Not read:
``oneOf``/``anyOf``/``allOf``/``not``, ``format``, CEL ``x-kubernetes-validations``.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from .. import validation as v

Schema = dict[str, Any]
_ROOT_KEPT = ("apiVersion", "kind", "metadata")  # never pruned at the root


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def prune(schema: Schema, value: Any, *, root: bool = False) -> None:
    """Drop, in place, the fields of ``value`` its schema does not name."""
    if isinstance(value, dict):
        if schema.get("x-kubernetes-preserve-unknown-fields") and not schema.get("properties"):
            return
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key in list(value):
            if root and key in _ROOT_KEPT:
                continue
            if key in props:
                prune(props[key], value[key])
            elif isinstance(extra, dict):
                prune(extra, value[key])
            elif not (extra is True or schema.get("x-kubernetes-preserve-unknown-fields")):
                del value[key]
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            prune(schema["items"], item)


def default(schema: Schema, value: Any) -> None:
    """Fill in, in place, the ``default`` of each absent property (deep)."""
    if isinstance(value, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                default(sub, value[key])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in value:
                default(extra, value[key])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            default(schema["items"], item)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _is_type(value: Any, want: str, int_or_string: bool) -> bool:
    got = _type_name(value)
    if int_or_string:
        return got in ("integer", "string")
    if want == "number":
        return got in ("integer", "number")
    if want == "integer" and isinstance(value, float):
        return value.is_integer()
    return got == want


def validate(schema: Schema, value: Any, path: str = "") -> list[v.FieldError]:
    """Every error of ``value`` against ``schema``, as kube-apiserver words it."""
    errs: list[v.FieldError] = []
    if value is None:
        if not schema.get("nullable") and schema.get("type"):
            errs.append(
                v.invalid_value(path, "null", f"{path} in body must be of type {schema['type']}")
            )
        return errs
    want = schema.get("type")
    if want and not _is_type(value, want, bool(schema.get("x-kubernetes-int-or-string"))):
        got = _type_name(value)
        return [v.invalid_value(path, got, f'{path} in body must be of type {want}: "{got}"')]
    if "enum" in schema and value not in schema["enum"]:
        errs.append(v.not_supported(path, value, [str(e) for e in schema["enum"]]))
    errs += _bounds(schema, value, path)
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for key in schema.get("required") or []:
            if key not in value:
                errs.append(v.required(_join(path, key)))
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if key in props:
                errs += validate(props[key], item, _join(path, key))
            elif isinstance(extra, dict):
                errs += validate(extra, item, _join(path, key))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            errs += validate(schema["items"], item, f"{path}[{i}]")
    return errs


def _bounds(schema: Schema, value: Any, path: str) -> list[v.FieldError]:
    """minimum/maximum, lengths, pattern and item counts."""
    errs = []
    if isinstance(value, int | float) and not isinstance(value, bool):
        low, high = schema.get("minimum"), schema.get("maximum")
        if low is not None:
            if schema.get("exclusiveMinimum") and value <= low:
                errs.append(
                    v.invalid_value(path, value, f"{path} in body should be greater than {low}")
                )
            elif value < low:
                errs.append(
                    v.invalid_value(
                        path, value, f"{path} in body should be greater than or equal to {low}"
                    )
                )
        if high is not None:
            if schema.get("exclusiveMaximum") and value >= high:
                errs.append(
                    v.invalid_value(path, value, f"{path} in body should be less than {high}")
                )
            elif value > high:
                errs.append(
                    v.invalid_value(
                        path, value, f"{path} in body should be less than or equal to {high}"
                    )
                )
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errs.append(
                v.invalid_value(
                    path,
                    value,
                    f"{path} in body should be at least {schema['minLength']} chars long",
                )
            )
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errs.append(v.too_long(path, schema["maxLength"]))
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errs.append(
                v.invalid_value(path, value, f"{path} in body should match '{schema['pattern']}'")
            )
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errs.append(
                v.invalid_value(
                    path,
                    len(value),
                    f"{path} in body should have at least {schema['minItems']} items",
                )
            )
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errs.append(
                v.FieldError(
                    "Too many", path, len(value), f"must have at most {schema['maxItems']} items"
                )
            )
    return errs
