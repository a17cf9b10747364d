"""The bytes of a stored object: one encoding per version, spliced from the version before.

Every stored version is encoded once, as ``json.dumps(obj, separators=(",", ":"),
ensure_ascii=False)`` in UTF-8 (:func:`dumps`); every reader (GET, LIST, watch frames,
history) shares those bytes. The broker's own writes of a pod (its binding, the kubelet's
running status, a job's completion) change a few of its parts and share the others with
the version before, as the same objects (stored objects are never changed). Such a
version's encoding is made by :func:`encode_version` from the bytes of the version it
replaces, its *template*: a top-level part that is the template's own object is the
template's bytes of it; a dict part that keeps the template's items in order with at
most its last value changed and items added after it (``metadata`` whose
``resourceVersion`` moved on; ``spec`` that gained a ``nodeName``; ``status`` that gained
``conditions``) is the template's bytes with that end re-encoded; every other part is
encoded afresh.

Invariant: ``encode_version(obj, template)`` is ``dumps(obj)``, byte for byte, for any
``obj`` whatever its template (tests/test_store_spliced.py: a property over generated
objects and edits; tests/test_store_trusted_status.py: the broker's writes, spliced
against encoded whole). It holds because an object shared with the template encodes as
it did (stored objects are never changed) and the C encoder writes a dict as ``{``, its
items as ``"key":value`` joined by ``,``, and ``}``, keys through the same string encoder
as values. When it cannot be shown cheaply (a lone surrogate, which makes the whole
object fall back to ASCII escapes; a non-string key; no C encoder), the whole object is
encoded as :func:`dumps` does.
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


# '"key":' of the keys seen (a pod's few top-level and metadata keys, mostly), bounded
_KEYS: dict[str, bytes] = {}
_KEYS_KEPT = 1024


def _key(key: str) -> bytes:
    """``"key":`` as the encoder writes it (UnicodeEncodeError for a lone surrogate)."""
    found = _KEYS.get(key)
    if found is None:
        found = (_encode_string(key) + ":").encode()
        if len(_KEYS) < _KEYS_KEPT:
            _KEYS[key] = found
    return found


def _part(value: Any) -> bytes:
    """``value``'s encoding as a part of a larger one (UnicodeEncodeError for a lone
    surrogate: the whole must then be escaped)."""
    return "".join(_encode(value, 0)).encode()  # type: ignore[misc]


class _Whole(Exception):
    """The object is encoded whole (:func:`dumps`), not spliced."""


def encode_version(
    obj: Obj, template: Obj | None = None, template_json: bytes = b"", spans: Spans | None = None
) -> tuple[bytes, Spans | None]:
    """``dumps(obj)`` and the spans of its top-level values (None when encoded whole),
    reusing ``template_json`` (the encoding of ``template``, the version ``obj``
    replaces, with its ``spans``) for the parts ``obj`` shares with it."""
    if _encode is None or type(obj) is not dict:
        return dumps(obj), None
    olds: dict[str, tuple[Any, int, int]] = {}
    if template is not None and spans is not None:
        at = iter(spans)
        olds = {k: (v, s, e) for (k, v), s, e in zip(template.items(), at, at, strict=False)}
    out = bytearray(b"{")
    found: list[int] = []
    try:
        for k, v in obj.items():
            if type(k) is not str:
                raise _Whole
            if len(out) > 1:
                out += b","
            out += _key(k)
            start = len(out)
            old = olds.get(k)
            if old is None:
                out += _part(v)
            elif old[0] is v:  # the template's own part: its bytes
                out += memoryview(template_json)[old[1] : old[2]]
            elif type(v) is dict and type(old[0]) is dict:
                out += _spliced_dict(v, old[0], memoryview(template_json)[old[1] : old[2]])
            else:
                out += _part(v)
            found += (start, len(out))
    except (UnicodeEncodeError, _Whole):
        return dumps(obj), None
    out += b"}"
    return bytes(out), tuple(found)


def _spliced_dict(new: Obj, old: Obj, old_json: memoryview) -> bytes | bytearray:
    """``new``'s encoding from ``old``'s (``old_json``): when ``new`` keeps ``old``'s
    items in order, the same objects but perhaps the last value, then has items of its
    own, only that last value and those items are encoded."""
    n = len(old)
    if not n or len(new) < n:
        return _part(new)
    items = iter(new.items())
    last = None  # the new last value of old's items, when it changed
    # old's items first: when they end, none of new's is taken and lost
    for i, ((ok, ov), (k, v)) in enumerate(zip(old.items(), items, strict=False)):
        if v is ov and k == ok:
            continue
        if i != n - 1 or k != ok:
            return _part(new)
        last = (v, ov)
    if last is None:
        out = bytearray(old_json[:-1])
    else:
        was = _part(last[1])
        cut = len(old_json) - len(was) - 1  # old's bytes, up to its last value
        if old_json[cut:-1] != was:  # (cannot be: the encoding of the same object)
            return _part(new)
        out = bytearray(old_json[:cut])
        out += _part(last[0])
    for k, v in items:  # what new has beyond old's items
        if type(k) is not str:
            raise _Whole
        out += b","
        out += _key(k)
        out += _part(v)
    out += b"}"
    return out
