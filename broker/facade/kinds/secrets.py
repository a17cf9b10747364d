"""core/v1 Secrets and ServiceAccounts, stored as kube-apiserver stores them (nothing
acts on them: no token controller, as since Kubernetes 1.24 none makes token Secrets).

A Secret's ``data`` is ``map[string][]byte``: each value must be standard base64 (400
``illegal base64 data at input byte N`` otherwise, Go's error); ``stringData`` is merged
into ``data`` (base64-encoded, winning over the same key) and never stored, as the v1
conversion does; ``type`` defaults to ``Opaque``; keys must be config keys and the whole
data at most 1 MiB (422). ``type`` is a field selector (``type=kubernetes.io/tls``).
"""

from __future__ import annotations

import base64
import binascii
import re

from .. import validation as v
from ..admission import BOOL, MAP, META, STR, DecodeError, Struct, _Map
from ..selectors import COMMON_FIELDS, fields_at
from .base import Context, Obj, Strategy, TypeNames

MAX_SECRET_BYTES = 1024 * 1024
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_ALPHABET = re.compile(r"[^A-Za-z0-9+/=\r\n]")


def _corrupt_at(text: str) -> int | None:
    """Where Go's ``base64.StdEncoding`` fails on ``text`` (None: it decodes)."""
    bad = _ALPHABET.search(text)
    if bad is not None:
        return bad.start()
    try:
        base64.b64decode(text.replace("\r", "").replace("\n", ""), validate=True)
    except (binascii.Error, ValueError):
        clean = len(text.replace("\r", "").replace("\n", ""))
        return clean - clean % 4 if clean % 4 else max(clean - 4, 0)
    return None


class _Bytes(_Map):
    """``map[string][]byte``: base64 strings."""

    go = "map[string][]uint8"
    item_go = "[]uint8"

    def check_item(self, item: str) -> None:
        at = _corrupt_at(item)
        if at is not None:
            raise DecodeError(f"illegal base64 data at input byte {at}")


SECRET = Struct(
    "Secret",
    {"metadata": META, "data": _Bytes(), "stringData": MAP, "type": STR, "immutable": BOOL},
)


class SecretStrategy(Strategy):
    schema = SECRET
    fields = {**COMMON_FIELDS, **fields_at("type")}

    def prepare_for_create(self, rt: TypeNames, obj: Obj, ctx: Context) -> None:
        obj.setdefault("type", "Opaque")
        _merge_string_data(obj)

    def prepare_for_update(
        self, rt: TypeNames, new: Obj, old: Obj, subresource: str | None
    ) -> None:
        new.setdefault("type", "Opaque")
        _merge_string_data(new)

    def validate_fields(self, rt: TypeNames, obj: Obj) -> list[v.FieldError]:
        errs = []
        size = 0
        for key, value in (obj.get("data") or {}).items():
            if len(key) > 253 or not _CONFIG_KEY.match(key):
                errs.append(
                    v.invalid_value(
                        f"data[{key}]",
                        key,
                        "a valid config key must consist of alphanumeric characters, '-', "
                        "'_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex "
                        "used for validation is '[-._a-zA-Z0-9]+')",
                    )
                )
            size += len(base64.b64decode(value.replace("\r", "").replace("\n", "")))
        if size > MAX_SECRET_BYTES:
            errs.append(v.too_long("data", MAX_SECRET_BYTES))
        return errs


def _merge_string_data(secret: Obj) -> None:
    """``stringData`` into ``data`` (the v1 conversion), never stored."""
    given = secret.pop("stringData", None)
    if given:
        data = secret.setdefault("data", {})
        for key, value in given.items():
            data[key] = base64.b64encode(value.encode()).decode()
