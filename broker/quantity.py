"""Kubernetes resource quantities ("250m", "4Gi", "1e3", 0.188) as exact Decimals.

Same grammar and results as ``kubernetes.utils.parse_quantity`` (the tests check it
against that function); written here because importing the client package costs the
broker most of a second at start-up, and the broker does not otherwise need it.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
}
_FORM = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)$")


def parse_quantity(value: object) -> Decimal:
    if isinstance(value, bool):
        raise ValueError(f"invalid quantity {value!r}")
    if isinstance(value, int | float | Decimal):
        return Decimal(str(value))
    text = str(value).strip()
    match = _FORM.match(text)
    if match is None:
        raise ValueError(f"invalid quantity {value!r} (expected e.g. '500m', '2', '4Gi')")
    number, suffix = match.groups()
    try:
        amount = Decimal(number)
    except InvalidOperation:
        raise ValueError(f"invalid quantity {value!r}") from None
    return amount * (_BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix])
