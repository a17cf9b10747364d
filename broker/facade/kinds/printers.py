"""What ``kubectl get`` prints of each kind: kube-apiserver's server-side printers
(``pkg/printers/internalversion/printers.go``), column for column — the pieces they
share here, the kinds' own in ``printers_core.py`` and ``printers_workloads.py``.

A :class:`Printer` is a kind's column definitions and how one object becomes a row of
cells. The API server always prints the ``-o wide`` columns too (``priority`` 1);
kubectl hides them unless asked. Ages are read on the clock the facade is given (the
simulated one), through the ``since`` function a row is made with: an age of a
paused run is its simulated age. A kind's strategy names its printer
(``Strategy.printer``, ``kinds/base.py``); kinds without one print ``Name`` and
``Created At`` as the API server's default table convertor does; a custom resource
prints its CRD's ``additionalPrinterColumns`` (:func:`custom_resource_printer`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]

NAME_DOC = (
    "Name must be unique within a namespace. Is required when creating resources, although "
    "some resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
CREATED_DOC = (
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. It is not guaranteed to be set in happens-before order across separate "
    "operations. Clients may not set this value. It is represented in RFC3339 form and is in "
    "UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)
CONTAINERS_DOC = "Names of each container in the template."
IMAGES_DOC = "Images referenced by each container in the template."


@dataclass(frozen=True)
class Column:
    """A ``TableColumnDefinition``."""

    name: str
    type: str = "string"
    description: str = ""
    priority: int = 0
    format: str = ""

    def definition(self) -> Obj:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


NAME = Column("Name", format="name", description=NAME_DOC)
AGE = Column("Age", description=CREATED_DOC)


@dataclass(frozen=True)
class Printer:
    """A kind's columns, and its row of cells for one object."""

    columns: tuple[Column, ...]
    cells: Callable[[Obj, Since], list[Any]]

    def definitions(self) -> list[Obj]:
        return [c.definition() for c in self.columns]


# --- the API server's helpers ------------------------------------------------------


def human_duration(seconds: float) -> str:
    """``k8s.io/apimachinery/pkg/util/duration.HumanDuration``: two or three
    significant figures ("45s", "2m5s", "3h10m", "12d", "2y30d")."""
    secs = int(seconds)
    if secs < -1:
        return "<invalid>"
    if secs < 0:
        return "0s"
    if secs < 60 * 2:
        return f"{secs}s"
    minutes = secs // 60
    if minutes < 10:
        s = secs % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = secs // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


def parse_time(text: Any) -> float | None:
    """Seconds since the epoch of an RFC 3339 timestamp (``metav1.Time`` or
    ``MicroTime``); None if absent or unreadable."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC).timestamp()
    except ValueError:
        return None


class Since:
    """``translateTimestampSince`` at ``now_s`` (epoch seconds of the simulated clock):
    a timestamp's age, "<unknown>" for no time."""

    __slots__ = ("now_s",)

    def __init__(self, now_s: float) -> None:
        self.now_s = now_s

    def __call__(self, text: Any) -> str:
        at = parse_time(text)
        return "<unknown>" if at is None else human_duration(self.now_s - at)


def dig(obj: Any, *path: str) -> Any:
    """``obj[path[0]][path[1]]...``; None as soon as a step is not an object."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def meta_field(obj: Obj, key: str) -> Any:
    return dig(obj, "metadata", key)


def format_labels(labels: Any) -> str:
    """``labels.FormatLabels``: sorted ``k=v`` joined by commas, ``<none>`` if empty."""
    if not isinstance(labels, dict) or not labels:
        return "<none>"
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def format_selector(selector: Any) -> str:
    """``metav1.FormatLabelSelector``: matchLabels then matchExpressions."""
    if not isinstance(selector, dict):
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in as_list(selector.get("matchExpressions")):
        if not isinstance(expr, dict):
            continue
        key, op, values = expr.get("key"), expr.get("operator"), as_list(expr.get("values"))
        if op == "In":
            parts.append(f"{key} in ({','.join(map(str, values))})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(map(str, values))})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    text = ",".join(parts)
    return text or "<none>"


def container_cells(template_spec: Any) -> tuple[str, str]:
    """``layoutContainerCells``: container names and images, comma-joined."""
    containers = [c for c in as_list(dig(template_spec, "containers")) if isinstance(c, dict)]
    return (
        ",".join(str(c.get("name", "")) for c in containers),
        ",".join(str(c.get("image", "")) for c in containers),
    )


def _default_cells(obj: Obj, since: Since) -> list[Any]:
    at = parse_time(meta_field(obj, "creationTimestamp"))
    created = (
        "" if at is None else datetime.fromtimestamp(int(at), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    )
    return [meta_field(obj, "name"), created]


#: kube-apiserver's default table convertor: a kind without a printer of its own
DEFAULT = Printer((NAME, Column("Created At", "date", CREATED_DOC)), _default_cells)

# --- custom resources ---------------------------------------------------------------

_STEP = re.compile(
    r"\.((?:\\\.|[^.\[])+)|\[(\*|-?\d+|\?\(@\.([\w.-]+)\s*==\s*['\"]([^'\"]*)['\"]\))\]"
)


def json_path(path: str) -> Callable[[Any], list[Any]]:
    """A CRD column's ``jsonPath``: fields (``.spec.replicas``, ``.metadata.labels.a\\.b``),
    indexes (``[0]``, ``[-1]``), ``[*]`` and ``[?(@.type=="Ready")]`` filters. Returns
    what reads the matches of an object (ValueError for a path it cannot read)."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    text = text.removeprefix("$")
    steps, pos = [], 0
    while pos < len(text):
        m = _STEP.match(text, pos)
        if m is None:
            raise ValueError(f"unsupported JSON path {path!r} at {text[pos:]!r}")
        steps.append(m.groups())
        pos = m.end()

    def read(obj: Any) -> list[Any]:
        nodes = [obj]
        for field, index, fkey, fval in steps:
            nxt: list[Any] = []
            for node in nodes:
                if field is not None:
                    if isinstance(node, dict) and field.replace("\\.", ".") in node:
                        nxt.append(node[field.replace("\\.", ".")])
                elif isinstance(node, list):
                    if index == "*":
                        nxt.extend(node)
                    elif fkey is not None:
                        nxt.extend(n for n in node if str(dig(n, *fkey.split("."))) == fval)
                    elif -len(node) <= int(index) < len(node):
                        nxt.append(node[int(index)])
            nodes = nxt
        return nodes

    return read


def _text(value: Any) -> str:
    """How kubectl's JSONPath printer writes a value (``fmt.Fprint``; JSON for
    objects and lists)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _cell(kind: str, value: Any, since: Since) -> Any:
    """``cellForJSONValue``: the value as the column's type says, None if it is not."""
    if value is None:
        return None
    if kind == "string":
        return _text(value)
    if kind == "integer" and isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    if kind == "number" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind == "date" and isinstance(value, str):
        return "<invalid>" if parse_time(value) is None else since(value)
    return None


def custom_resource_printer(columns: Sequence[Obj]) -> Printer:
    """A custom resource's printer: ``Name``, then its version's
    ``additionalPrinterColumns`` (``Age`` from ``.metadata.creationTimestamp`` when it
    names none), as apiextensions' table convertor prints them."""
    if not columns:
        columns = [
            {
                "name": "Age",
                "type": "date",
                "jsonPath": ".metadata.creationTimestamp",
                "description": CREATED_DOC,
            }
        ]
    defs = [
        Column(
            str(c.get("name", "")),
            str(c.get("type", "string")),
            str(c.get("description") or ""),
            as_int(c.get("priority")),
            str(c.get("format") or ""),
        )
        for c in columns
    ]
    readers = []
    for c in columns:
        try:
            readers.append(json_path(str(c.get("jsonPath", ""))))
        except ValueError:
            readers.append(lambda obj: [])

    def cells(obj: Obj, since: Since) -> list[Any]:
        row: list[Any] = [meta_field(obj, "name")]
        for col, read in zip(defs, readers, strict=True):
            found = read(obj)
            row.append(_cell(col.type, found[0], since) if found else None)
        return row

    return Printer((NAME, *defs), cells)
