"""A request through a served version that is not its kind's storage version: what its
body becomes before the store sees it, and what the store's answers become before the
client does — as kube-apiserver decodes into, and encodes from, its internal version.

Two kinds of such versions: one with a conversion of its own (``ResourceType.conversion``,
e.g. autoscaling/v1 HorizontalPodAutoscalers over the stored v2 objects) and a CRD's other
served versions, which share the storage version's schema (``crds.version_recoder``: only
``apiVersion`` is rewritten).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from . import admission, crds, errors
from .kinds.base import Conversion, Obj
from .resources import Registry, ResourceType

Recode = Callable[[bytes], bytes]


def recoder(rt: ResourceType, registry: Registry) -> Recode | None:
    """What turns an encoded answer (an object, a list, a watch frame) of the stored
    version into ``rt``'s version; None when the two are the same."""
    conversion = rt.conversion
    if conversion is None:
        return crds.version_recoder(rt, registry)
    return lambda data: _recode(rt, conversion, data)


def _recode(rt: ResourceType, conversion: Conversion, data: bytes) -> bytes:
    try:
        doc = json.loads(data)
    except ValueError:
        return data
    if not isinstance(doc, dict):
        return data
    if "object" in doc and "type" in doc and "kind" not in doc:  # a watch event
        obj = doc["object"]
        if doc["type"] == "BOOKMARK" and isinstance(obj, dict):
            obj["apiVersion"] = rt.api_version  # only a resourceVersion: nothing to convert
        elif doc["type"] != "ERROR" and isinstance(obj, dict):
            doc["object"] = _as_item(conversion, obj)
    elif doc.get("kind") == rt.list_kind:
        doc["apiVersion"] = rt.api_version
        doc["items"] = [_as_item(conversion, item) for item in doc.get("items") or []]
    elif doc.get("kind") == rt.kind:
        doc = conversion.to_version(doc)
    else:  # a Status
        return data
    out = json.dumps(doc, separators=(",", ":")).encode()
    return out + b"\n" if data.endswith(b"\n") else out


def _as_item(conversion: Conversion, obj: Obj) -> Obj:
    converted = conversion.to_version(obj)
    for key in ("kind", "apiVersion"):  # an item without them stays without
        if key not in obj:
            converted.pop(key, None)
    return converted


def to_storage(rt: ResourceType, body: Any) -> Any:
    """A body sent through ``rt``'s version as the stored version takes it: decoded by
    the version's own type (400), then converted. Unchanged without a conversion."""
    conversion = rt.conversion
    if conversion is None:
        return body
    if not isinstance(body, dict):
        raise errors.bad_request(f"the body of a {rt.kind} must be a JSON object")
    if conversion.schema is not None:
        admission.decode_as(conversion.schema, rt.kind, rt.api_version, body)
    return conversion.from_version(body)


def patch_view(rt: ResourceType) -> tuple[Callable[[Obj], Obj], Callable[[Any], Any]] | None:
    """For a PATCH through ``rt``'s version: (the stored object as the patch sees it,
    the patched result as the store takes it); None when the patch applies as is."""
    conversion = rt.conversion
    if conversion is None:
        return None
    return conversion.to_version, lambda obj: to_storage(rt, obj)
