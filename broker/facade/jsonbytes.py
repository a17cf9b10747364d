"""The bytes of a stored object: one encoding per version, spliced from the version before.

Every stored version is encoded once, as ``json.dumps(obj, separators=(",", ":"),
ensure_ascii=False)`` in UTF-8 (:func:`dumps`); every reader (GET, LIST, watch frames,
history) shares those bytes. The broker's own writes of a pod (its binding, the kubelet's
running status, a job's completion, its deletion) change its ``metadata`` and ``status``
and share its other parts (``spec``) with the version before, as the same objects (stored
objects are never changed). Such a version's encoding is made by :func:`encode_version`
from the bytes of the version it replaces, its *template*: a *kept* part (a top-level
dict other than ``metadata`` and ``status``, which every write changes) that is the
template's own object is the template's bytes of it, or those bytes with the items added
after them (a ``spec`` that gained its ``nodeName``); the rest is encoded by the C
encoder at once, a placeholder string in each kept part's place, and the kept parts'
bytes put in the placeholders' places.

Invariant: ``encode_version(obj, template)`` is ``dumps(obj)``, byte for byte, for any
``obj`` whatever its template (tests/test_store_spliced.py: a property over generated
objects and edits; tests/test_store_trusted_status.py: the broker's writes, spliced
against encoded whole). It holds because an object shared with the template encodes as
it did (stored objects are never changed), the C encoder writes a dict as ``{``, its
items as ``"key":value`` joined by ``,``, and ``}``, and a placeholder is found as often
as it was put in (a string of the object equal to it: encoded whole). A lone surrogate,
which makes the whole object fall back to ASCII escapes, a non-string key, or no C
encoder: encoded whole, as :func:`dumps` does.
"""

from __future__ import annotations

import json
from typing import Any

Obj = dict[str, Any]
# (start, end) of each top-level value in an encoding, flat, in the object's key order
Spans = tuple[int, ...]


def _not_json(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# json.dumps(obj, separators=(",", ":"), ensure_ascii=False), made once: dumps builds a
# JSONEncoder and its C encoder at every call, a third of the cost of a pod's encoding.
# No circular check (markers None): what the store holds is a tree.
_encode = json.encoder.c_make_encoder(  # type: ignore[attr-defined]
    None, _not_json, json.encoder.encode_basestring, None, ":", ",", False, False, True
) if json.encoder.c_make_encoder is not None else None  # type: ignore[attr-defined]  # fmt: skip
# the string encoder the C encoder uses for keys and values (ensure_ascii=False)
_encode_string = json.encoder.encode_basestring


def dumps(obj: Any) -> bytes:
    """``obj``'s encoding, compact, UTF-8; a lone surrogate (from a ``"\\ud800"``
    escape) makes the whole of it ASCII with escapes, as ``json.dumps`` writes it."""
    if _encode is not None and isinstance(obj, (dict, list)):
        text = "".join(_encode(obj, 0))
    else:
        text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode()
    except UnicodeEncodeError:  # a lone surrogate: keep it escaped
        return json.dumps(obj, separators=(",", ":")).encode()


def _part(value: Any) -> bytes:
    """``value``'s encoding as a part of a larger one (UnicodeEncodeError for a lone
    surrogate: the whole must then be escaped)."""
    return "".join(_encode(value, 0)).encode()  # type: ignore[misc]


# what stands for a kept part while the rest is encoded: a private-use character, as
# the encoder writes it (ensure_ascii=False) in UTF-8
_PLACEHOLDER = "\ue000"
_PLACEHOLDER_BYTES = b'"\xee\x80\x80"'
# the parts a write of the broker changes every time: never kept
_CHANGED = frozenset(("metadata", "status"))


def encode_version(
    obj: Obj, template: Obj | None = None, template_json: bytes = b"", spans: Spans | None = None
) -> tuple[bytes, Spans | None]:
    """``dumps(obj)`` and the spans of its kept parts (None when encoded whole), reusing
    ``template_json`` (the encoding of ``template``, the version ``obj`` replaces, with
    its ``spans``) for the kept parts ``obj`` shares with it."""
    if _encode is None or type(obj) is not dict:
        return dumps(obj), None
    known = {}
    if template is not None and spans is not None:
        at = iter(spans)
        known = {k: (s, e) for k, s, e in zip(at, at, at, strict=False)}
    kept: list[tuple[str, bytes | memoryview | bytearray]] = []
    shell = {}
    try:
        for k, v in obj.items():
            if type(v) is not dict or k in _CHANGED:
                shell[k] = v
                continue
            span = known.get(k)
            old = template.get(k) if span is not None else None  # type: ignore[union-attr]
            if old is v:
                part: bytes | memoryview | bytearray = memoryview(template_json)[span[0] : span[1]]  # type: ignore[index]
            elif type(old) is dict:
                part = _extended(v, old, memoryview(template_json)[span[0] : span[1]])  # type: ignore[index]
            else:
                part = _part(v)
            shell[k] = _PLACEHOLDER
            kept.append((k, part))
        if not kept:
            return dumps(obj), None
        pieces = "".join(_encode(shell, 0)).encode().split(_PLACEHOLDER_BYTES)
    except (UnicodeEncodeError, TypeError):
        return dumps(obj), None
    if len(pieces) != len(kept) + 1:  # the placeholder is a string of the object too
        return dumps(obj), None
    out = bytearray(pieces[0])
    found: list[Any] = []
    for (k, part), piece in zip(kept, pieces[1:], strict=True):
        found += (k, len(out), len(out) + len(part))
        out += part
        out += piece
    return bytes(out), tuple(found)


def _extended(new: Obj, old: Obj, old_json: memoryview) -> bytes | bytearray:
    """``new``'s encoding from ``old``'s (``old_json``): when ``new`` has ``old``'s items
    (in order, the same objects) then items of its own, only those are encoded."""
    n = len(old)
    if not n or len(new) <= n:
        return _part(new)
    items = iter(new.items())
    # old's items first: when they end, none of new's is taken and lost
    for (ok, ov), (k, v) in zip(old.items(), items, strict=False):
        if v is not ov or k != ok:
            return _part(new)
    tail = dict(items)
    out = bytearray(old_json[:-1])
    out += b","
    out += "".join(_encode(tail, 0)).encode()[1:]  # type: ignore[misc]
    return out
