"""Server-side printing: the ``meta.k8s.io`` Table kube-apiserver answers when a client
asks ``Accept: application/json;as=Table;g=meta.k8s.io;v=v1`` (kubectl get does), for
gets, lists and watches, as ``staging/src/k8s.io/apiserver/pkg/endpoints/handlers``
(``response.go`` ``asTable``, ``watch.go``) makes it.

The rows come from the kind's printer (``kinds/printers.py``, ``Strategy.printer``);
ages are read on the facade's clock, the simulated one. ``includeObject`` says what
each row carries: ``Metadata`` (the default: a ``PartialObjectMetadata``), ``Object``
(the whole object) or ``None``. A watch's first event carries the column definitions,
later ones only their row.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import errors, listoptions
from .errors import ApiError
from .kinds.printers import Since
from .resources import ResourceType

Obj = dict[str, Any]
_JSON_MEDIA = ("application/json", "application/*", "*/*")
_TABLE_VERSIONS = ("v1", "v1beta1")
_INCLUDE = ("Object", "Metadata", "None", "")


@dataclass(frozen=True)
class TableRequest:
    """What a request asked of its answer: a Table of ``version`` (``meta.k8s.io``)."""

    version: str
    include: str  # Object, Metadata or None

    @property
    def api_version(self) -> str:
        return f"meta.k8s.io/{self.version}"


def negotiate(accept: str) -> str | None:
    """The answer an ``Accept`` header admits, first acceptable clause first: ``""``
    plain JSON, ``"v1"``/``"v1beta1"`` a Table of that version. 406 when no clause is
    acceptable (another media type, or an ``as=`` this server does not convert to)."""
    if not accept.strip():
        return ""
    for item in accept.split(","):
        media, *raw = (part.strip() for part in item.split(";"))
        params = {}
        for p in raw:
            key, _, value = p.partition("=")
            params[key.strip().lower()] = value.strip()
        if media.lower() not in _JSON_MEDIA or params.get("q") in ("0", "0.0", "0.00", "0.000"):
            continue
        target = params.get("as")
        if target is None:
            return ""
        if (
            target == "Table"
            and params.get("g") == "meta.k8s.io"
            and params.get("v") in _TABLE_VERSIONS
        ):
            return params["v"]
    raise ApiError(
        406,
        "only the following media types are accepted: application/json, "
        "application/json;as=Table;v=v1;g=meta.k8s.io, "
        "application/json;as=Table;v=v1beta1;g=meta.k8s.io "
        f"(asked for {accept[:200]!r}: timewarp's API facade serves JSON only)",
        "NotAcceptable",
    )


def table_request(version: str, query: dict[str, list[str]]) -> TableRequest:
    """The Table asked for, with its ``includeObject`` (400 for an unknown one)."""
    include = listoptions.first(query, "includeObject") or ""
    if include not in _INCLUDE:
        raise errors.bad_request(f'unrecognized includeObject value: "{include}"')
    return TableRequest(version, include or "Metadata")


def _row_object(obj: Obj, want: TableRequest) -> Obj | None:
    if want.include == "Object":
        return obj
    if want.include == "None":
        return None
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": want.api_version,
        "metadata": obj.get("metadata") or {},
    }


def _row(rt: ResourceType, obj: Obj, want: TableRequest, since: Since) -> Obj:
    cells = rt.strategy.printer.cells(obj, since)
    row: Obj = {"cells": cells}
    phase = (obj.get("status") or {}).get("phase") if rt.kind == "Pod" else None
    if phase in ("Succeeded", "Failed"):  # printPod's row conditions
        message = (
            "The pod has completed successfully." if phase == "Succeeded" else "The pod failed."
        )
        row["conditions"] = [
            {"type": "Completed", "status": "True", "reason": phase, "message": message}
        ]
    row["object"] = _row_object(obj, want)
    return row


def table(
    rt: ResourceType,
    objs: list[Obj],
    meta: Obj,
    want: TableRequest,
    now_s: float,
    *,
    headers: bool = True,
) -> Obj:
    """A Table of ``objs`` (a list's items, or one object), its ``metadata`` as given
    (resourceVersion, continue, remainingItemCount)."""
    since = Since(now_s)
    out: Obj = {"kind": "Table", "apiVersion": want.api_version, "metadata": meta}
    if headers:
        out["columnDefinitions"] = rt.strategy.printer.definitions()
    out["rows"] = [_row(rt, obj, want, since) for obj in objs]
    return out


def encode(doc: Obj) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def watch_recoder(
    rt: ResourceType, want: TableRequest, now_s: Callable[[], float]
) -> Callable[[bytes], bytes]:
    """What turns each watch frame into its Table event: the object's row (the column
    definitions in the first event only), a bookmark into an empty Table at its
    resourceVersion; an ERROR event's Status as it is."""
    first = True

    def recode(frame: bytes) -> bytes:
        nonlocal first
        event = json.loads(frame)
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            return frame
        rv = (obj.get("metadata") or {}).get("resourceVersion", "")
        meta: Obj = {"resourceVersion": rv}
        if kind == "BOOKMARK":
            if (obj.get("metadata") or {}).get("annotations"):
                meta["annotations"] = obj["metadata"]["annotations"]
            doc: Obj = {
                "kind": "Table",
                "apiVersion": want.api_version,
                "metadata": meta,
                "rows": [],
            }
        else:
            doc = table(rt, [obj], meta, want, now_s(), headers=first)
            first = False
        return b'{"type":"' + str(kind).encode() + b'","object":' + encode(doc) + b"}\n"

    return recode
