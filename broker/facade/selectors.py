"""Label and field selectors, parsed the way the API server parses them.

Label selectors: ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k``,
``!k``, ``k>3``, ``k<3``; requirements are ANDed. ``k!=v`` and ``notin`` match objects
without the label, as in Kubernetes.

Field selectors: ``f=v``, ``f==v``, ``f!=v`` with possibly empty values
(``spec.nodeName=`` selects unbound pods); ``\\,``, ``\\=`` and ``\\\\`` escape. Only the
fields the real server indexes for that kind are accepted; others are a 400 error, as
on a real server (``field label not supported``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ApiError

_KEY = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@dataclass(frozen=True)
class LabelRequirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", ">", "<"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        if not present:
            return False
        try:
            number = int(value)  # type: ignore[arg-type]
        except ValueError:
            return False
        bound = int(self.values[0])
        return number > bound if self.op == ">" else number < bound


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[LabelRequirement, ...] = ()

    def matches(self, labels: dict[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


_SET_RE = re.compile(r"^\s*(\S+?)\s+(in|notin)\s*\((.*)\)\s*$")
_CMP_RE = re.compile(r"^\s*([^!=<>\s]+)\s*(==|!=|=|>|<)\s*(\S*)\s*$")


def _check_key(key: str, where: str) -> str:
    if not _KEY.match(key):
        raise ApiError(400, f"unable to parse requirement: invalid label key {key!r} in {where!r}")
    return key


def _check_value(value: str, where: str) -> str:
    if len(value) > 63 or not _VALUE.match(value):
        raise ApiError(
            400, f"unable to parse requirement: invalid label value {value!r} in {where!r}"
        )
    return value


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse a ``labelSelector`` query parameter; raise ApiError(400) naming the bad part."""
    if text is None or not text.strip():
        return LabelSelector()
    requirements = []
    for part in _split_top_level(text):
        part_s = part.strip()
        if not part_s:
            raise ApiError(400, f"unable to parse requirement: empty requirement in {text!r}")
        m = _SET_RE.match(part_s)
        if m:
            key, op, inner = m.groups()
            values = tuple(_check_value(v.strip(), part_s) for v in inner.split(","))
            if op == "in" and values == ("",):
                raise ApiError(400, f"unable to parse requirement: empty set in {part_s!r}")
            requirements.append(LabelRequirement(_check_key(key, part_s), op, values))
            continue
        if part_s.startswith("!"):
            requirements.append(LabelRequirement(_check_key(part_s[1:].strip(), part_s), "!"))
            continue
        m = _CMP_RE.match(part_s)
        if m:
            key, op, value = m.groups()
            op = "=" if op == "==" else op
            if op in (">", "<"):
                if not re.fullmatch(r"-?\d+", value):
                    raise ApiError(400, f"unable to parse requirement: {value!r} is not an integer")
            else:
                _check_value(value, part_s)
            requirements.append(LabelRequirement(_check_key(key, part_s), op, (value,)))
            continue
        if re.fullmatch(r"\S+", part_s):
            requirements.append(LabelRequirement(_check_key(part_s, part_s), "exists"))
            continue
        raise ApiError(400, f"unable to parse requirement: {part_s!r} in label selector {text!r}")
    return LabelSelector(tuple(requirements))


def selector_from_dict(selector: dict[str, Any] | None) -> LabelSelector:
    """A ``metav1.LabelSelector`` object (matchLabels / matchExpressions) as a selector."""
    if not selector:
        return LabelSelector()
    reqs = [LabelRequirement(k, "=", (v,)) for k, v in (selector.get("matchLabels") or {}).items()]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expr in selector.get("matchExpressions") or []:
        reqs.append(
            LabelRequirement(expr["key"], ops[expr["operator"]], tuple(expr.get("values") or ()))
        )
    return LabelSelector(tuple(reqs))


def format_selector(selector: dict[str, Any] | None) -> str:
    """``metav1.LabelSelectorAsSelector(s).String()``: what a Scale's ``status.selector``
    and ``kubectl`` show — requirements sorted by key, set values sorted
    (``app=web,tier in (a,b),!canary``)."""
    if not selector:
        return ""
    labels, exprs = selector.get("matchLabels"), selector.get("matchExpressions")
    parts: list[tuple[str, str]] = [
        (str(k), f"{k}={v}") for k, v in (labels if isinstance(labels, dict) else {}).items()
    ]
    for expr in exprs if isinstance(exprs, list) else []:
        if not isinstance(expr, dict):
            continue  # only a broker's own write could store one: shown as nothing
        key, op = str(expr.get("key", "")), expr.get("operator")
        given = expr.get("values")
        values = ",".join(sorted(str(v) for v in (given if isinstance(given, list) else ())))
        text = {
            "In": f"{key} in ({values})",
            "NotIn": f"{key} notin ({values})",
            "Exists": key,
            "DoesNotExist": f"!{key}",
        }.get(op, key)
        parts.append((key, text))
    return ",".join(text for _, text in sorted(parts, key=lambda p: p[0]))


# --- field selectors ------------------------------------------------------------------


def get_path(obj: dict[str, Any], path: str) -> Any:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def as_field_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


FieldGetter = Callable[[dict[str, Any]], str]


def path_field(path: str) -> FieldGetter:
    """A field selector label read at its own path (``spec.nodeName``): the text of the
    value, ``""`` when absent."""
    return lambda obj: as_field_text(get_path(obj, path))


def bool_field(path: str) -> FieldGetter:
    """A boolean field: ``"false"`` when absent, as the Go zero value prints."""
    return lambda obj: "true" if get_path(obj, path) else "false"


def fields_at(*paths: str) -> dict[str, FieldGetter]:
    """Field selector labels each read at its own path."""
    return {path: path_field(path) for path in paths}


# what every kind's field selectors accept (each kind's strategy adds its own)
COMMON_FIELDS: dict[str, FieldGetter] = fields_at("metadata.name", "metadata.namespace")


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    negate: bool
    value: str
    getter: FieldGetter = field(compare=False, repr=False)

    def matches(self, obj: dict[str, Any]) -> bool:
        actual = self.getter(obj)
        return (actual != self.value) if self.negate else (actual == self.value)


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: dict[str, Any]) -> bool:
        return all(r.matches(obj) for r in self.requirements)


def _split_terms(text: str) -> list[str]:
    """Split on unescaped ',' keeping escapes in the terms."""
    terms, current, i = [], [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            current.append(text[i : i + 2])
            i += 2
            continue
        if ch == ",":
            terms.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    terms.append("".join(current))
    return terms


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            if text[i + 1] not in "\\,=":
                raise ApiError(400, f"invalid field selector: bad escape {text[i : i + 2]!r}")
            out.append(text[i + 1])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _find_operator(term: str) -> tuple[int, str] | None:
    i = 0
    while i < len(term):
        if term[i] == "\\":
            i += 2
            continue
        if term.startswith("!=", i):
            return i, "!="
        if term.startswith("==", i):
            return i, "=="
        if term[i] == "=":
            return i, "="
        i += 1
    return None


def parse_field_selector(
    text: str | None, resource_key: str, allowed: Mapping[str, FieldGetter]
) -> FieldSelector:
    """Parse a ``fieldSelector`` for a resource whose selectable fields are ``allowed``
    (its strategy's ``fields``); raise ApiError(400) on syntax or unknown field."""
    if text is None or text == "":
        return FieldSelector()
    reqs = []
    for term in _split_terms(text):
        if term == "":
            continue
        found = _find_operator(term)
        if found is None:
            raise ApiError(400, f"invalid selector: {text!r}; can't understand {term!r}")
        pos, op = found
        name = _unescape(term[:pos]).strip()
        value = _unescape(term[pos + len(op) :])
        if name not in allowed:
            raise ApiError(400, f'field label not supported: {name} (for "{resource_key}")')
        reqs.append(FieldRequirement(name, op == "!=", value, allowed[name]))
    return FieldSelector(tuple(reqs))
