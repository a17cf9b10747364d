"""Kubernetes resource quantities: THE parser (``"250m"``, ``"4Gi"``, ``"1e3"``, ``0.188``).

The grammar, bounds and canonical form of apimachinery's ``resource.Quantity``
(``k8s.io/apimachinery/pkg/api/resource``), written from its documentation and
behaviour:

    <quantity>        ::= <signedNumber><suffix>
    <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>

- A non-zero value is rounded *up* (away from zero) to a whole nano unit (``0.1n`` is
  ``1n``: "if you want some resources, you should get some").
- No quantity exceeds 2^63-1 in magnitude: larger values are capped, as documented for
  the type. (Go's code caps only binary-suffixed values and keeps an arbitrary-precision
  decimal otherwise; a scheduler reading ``Value()`` then overflows. Capping every
  format is what the documentation promises, and it keeps every quantity an int64 —
  ``1e600000`` costs nothing here, where ``int(Decimal)`` once froze the broker.)
- The exponent of ``e<n>`` must lie within ±(2^31-1) (Go's scale is an int32; newer
  apimachinery refuses a larger one instead of truncating it).
- The canonical form (what the API server writes back): the largest suffix of the
  input's kind (decimal SI, binary SI or exponent) that keeps the mantissa whole —
  ``1.5`` → ``1500m``, ``1.5Gi`` → ``1536Mi``, ``1024Ki`` → ``1Mi``; a binary value below
  1024 or not whole is written in decimal SI. An input already in canonical form is
  kept as written (``"+1"`` stays ``"+1"``), as the Go type does.

Errors carry the Go messages (``quantities must match the regular expression …``,
``unable to parse quantity's suffix``), which the API server puts in its 400 answer.
Every step is linear in the input's length: a 3 MiB digit string parses without
building huge integers.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from decimal import ROUND_UP, Context, Decimal, localcontext

MAX_INT64 = 2**63 - 1
MAX_INT32 = 2**31 - 1
NANO = 10**9
MAX_NANO = MAX_INT64 * NANO  # the cap, in nano units

SPLIT_RE = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
ERR_FORMAT = f"quantities must match the regular expression '{SPLIT_RE}'"
ERR_NUMERIC = "unable to parse numeric part of quantity"
ERR_SUFFIX = "unable to parse quantity's suffix"

DECIMAL_SI = "DecimalSI"
BINARY_SI = "BinarySI"
DECIMAL_EXPONENT = "DecimalExponent"

# suffix -> (base, exponent)
_DECIMAL_SUFFIXES = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXPONENT = {e: s for s, e in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_POWER = {e // 10: s for s, e in _BINARY_SUFFIXES.items()}

# sign, number (digits, optional point, digits), suffix letters, optional signed digits
_SCAN = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[+-]?[0-9]*)\Z")
_INT64_TEXT = re.compile(r"[+-]?[0-9]+\Z")
_WHITESPACE = " \t\n\r\v\f"


class QuantityError(ValueError):
    """Not a quantity; ``str()`` is the Go parser's message."""


@dataclass(frozen=True)
class Quantity:
    """An exact quantity: ``nano`` units (an int, |nano| <= (2^63-1)·10^9), the format
    of its suffix, and its canonical text."""

    nano: int
    format: str
    text: str

    def __str__(self) -> str:
        return self.text

    @property
    def decimal(self) -> Decimal:
        """The exact value."""
        return Decimal(self.nano).scaleb(-9)

    def scaled_value(self, exponent: int) -> int:
        """ceil(value / 10^exponent), away from zero (Go's ``ScaledValue``)."""
        shift = 9 + exponent
        if shift <= 0:
            return self.nano * 10**-shift
        div = 10**shift
        q, r = divmod(abs(self.nano), div)
        q += bool(r)
        return q if self.nano >= 0 else -q

    def value(self) -> int:
        """The value rounded up to a whole unit (Go's ``Value()``): bytes, cores, pods."""
        return self.scaled_value(0)

    def milli_value(self) -> int:
        """ceil(value·1000) (Go's ``MilliValue()``): millicores."""
        return self.scaled_value(-3)

    @property
    def sign(self) -> int:
        return (self.nano > 0) - (self.nano < 0)


def parse(value: object) -> Quantity:
    """A quantity from its JSON form: a string (surrounding whitespace ignored, as the
    API server's decoder does) or a JSON number. QuantityError otherwise."""
    if isinstance(value, bool) or value is None:
        raise QuantityError(ERR_FORMAT)
    if isinstance(value, int):
        if abs(value) > MAX_INT64:  # str() of a huge int is refused by Python anyway
            return _quantity(MAX_NANO if value > 0 else -MAX_NANO, DECIMAL_SI, None)
        return parse_text(str(value))
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise QuantityError(ERR_FORMAT)
        return parse_text(repr(value))
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise QuantityError(ERR_FORMAT)
        return parse_text(str(value))
    if not isinstance(value, str):
        raise QuantityError(ERR_FORMAT)
    return parse_text(value.strip(_WHITESPACE))


def parse_text(text: str) -> Quantity:
    """Go's ``ParseQuantity(text)`` (no whitespace trimming). Short texts — every real
    one: a workload repeats a handful ("1", "500m", "4Gi") — are parsed once."""
    if len(text) <= _CACHED_LENGTH:
        return _parse_cached(text)
    return _parse_text(text)


_CACHED_LENGTH = 32


@functools.lru_cache(maxsize=4096)
def _parse_cached(text: str) -> Quantity:
    return _parse_text(text)


def _parse_text(text: str) -> Quantity:
    if not text:
        raise QuantityError(ERR_FORMAT)
    if text == "0":
        return Quantity(0, DECIMAL_SI, "0")
    match = _SCAN.match(text)
    if match is None:
        raise QuantityError(ERR_FORMAT)
    sign, whole, fraction, suffix = match.groups()
    fraction = fraction or ""
    num = whole.lstrip("0") or "0"
    negative = sign == "-"
    if suffix in _DECIMAL_SUFFIXES:
        base, exponent, fmt = 10, _DECIMAL_SUFFIXES[suffix], DECIMAL_SI
    elif suffix in _BINARY_SUFFIXES:
        base, exponent, fmt = 2, _BINARY_SUFFIXES[suffix], BINARY_SI
    elif len(suffix) > 1 and suffix[0] in "eE" and _INT64_TEXT.match(suffix[1:]):
        magnitude = suffix[1:].lstrip("+-").lstrip("0")
        exponent = int(magnitude or "0") if len(magnitude) <= 12 else MAX_INT64
        if suffix[1] == "-":
            exponent = -exponent
        if not -MAX_INT32 <= exponent <= MAX_INT32:  # Go's scale is an int32
            raise QuantityError(ERR_SUFFIX)
        base, fmt = 10, DECIMAL_EXPONENT
    else:
        raise QuantityError(ERR_SUFFIX)

    nano = _nano_units(num, fraction, base, exponent)
    if nano > MAX_NANO:
        nano = MAX_NANO
    if fmt == BINARY_SI and 0 < nano < NANO:
        fmt = DECIMAL_SI  # a fraction of one is never written with a binary suffix
    if negative:
        nano = -nano
    kept = text if _canonical_as_written(num, fraction, base, exponent, nano) else None
    return _quantity(nano, fmt, kept)


def _nano_units(num: str, fraction: str, base: int, exponent: int) -> int:
    """|value| in nano units, rounded up; at least 1 when the value is not zero; capped
    loosely (the caller caps exactly) without building numbers beyond ~10^40."""
    digits = (num + fraction).lstrip("0")
    if not digits:
        return 0
    if base == 2:
        scale10, power2 = -len(fraction), exponent
    else:
        scale10, power2 = exponent - len(fraction), 0
    # value = int(digits) · 10^scale10 · 2^power2, and 10^(len-1) <= int(digits) < 10^len
    magnitude = len(digits) + scale10  # value < 10^magnitude · 2^power2
    if magnitude - 1 > 19:  # >= 10^19 > 2^63-1
        return MAX_NANO + 1
    if magnitude + 9 + power2 * 0.302 < -1:  # < 10^-10 · 2^60-ish: below one nano unit
        return 1
    shift = scale10 + 9  # nano units = digits · 10^shift · 2^power2
    if shift >= 0:
        return int(digits) * 10**shift * 2**power2  # digits has <= 29 - shift digits
    # digits may be long (a long fraction): exact decimal arithmetic, linear in its length
    with localcontext(Context(prec=len(digits) + 40, Emax=10**9, Emin=-(10**9))) as ctx:
        exact = Decimal(digits).scaleb(shift, ctx) * (2**power2)
        return int(exact.to_integral_value(rounding=ROUND_UP, context=ctx))


def _canonical_as_written(num: str, fraction: str, base: int, exponent: int, nano: int) -> bool:
    """Whether Go keeps the input string as the quantity's text: its fast int64 path with
    the input already canonical (no trailing 000, no leading 0, a multiple-of-3 scale;
    for binary suffixes, a mantissa not divisible by 8)."""
    if abs(nano) > MAX_NANO - 1:
        return False
    if base == 2:
        if fraction or 15 - len(num) - int(exponent * 3 / 10) - 1 < 0:
            return False
        return int(num) & 7 != 0
    if 18 - (len(num) + len(fraction)) < 0:
        return False
    scale = exponent - len(fraction)
    if scale < -9:
        return False
    shifted = num + fraction
    return scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"


def _quantity(nano: int, fmt: str, kept: str | None) -> Quantity:
    return Quantity(nano, fmt, kept if kept is not None else _canonical_text(nano, fmt))


def _canonical_text(nano: int, fmt: str) -> str:
    if nano == 0:
        return "0"
    if fmt == BINARY_SI:
        whole, rest = divmod(abs(nano), NANO)
        if whole < 1024 or rest:
            fmt = DECIMAL_SI
        else:
            power = 0
            while whole % 1024 == 0 and whole >= 1024 and power < 6:
                whole //= 1024
                power += 1
            return f"{'-' if nano < 0 else ''}{whole}{_BINARY_BY_POWER.get(power, '')}"
    mantissa, exponent = abs(nano), -9
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    text = f"{'-' if nano < 0 else ''}{mantissa}"
    if fmt == DECIMAL_EXPONENT:
        return text if exponent == 0 else f"{text}e{exponent}"
    return text + _DECIMAL_BY_EXPONENT[exponent]  # |value| <= 2^63-1: exponent in -9..18


def parse_quantity(value: object) -> Decimal:
    """The exact value of a quantity (rounded up to nano units, capped at 2^63-1), as a
    Decimal: what callers that do arithmetic want. QuantityError (a ValueError)
    names the grammar when ``value`` is not a quantity."""
    return parse(value).decimal


def canonical(value: object) -> str:
    """The text the API server writes back for ``value`` (``1.5`` → ``"1500m"``)."""
    return parse(value).text


def round_up(q: Quantity, exponent: int = -3) -> Quantity:
    """``q`` rounded up (away from zero) to a multiple of 10^exponent (Go's
    ``RoundUp``). The API server does this to every value of a core/v1 ResourceList
    (requests, limits, capacity …) with exponent -3: ``0.1n`` cpu is stored as ``1m``."""
    step = 10 ** (9 + exponent)
    if q.nano % step == 0:
        return q
    units = -(-abs(q.nano) // step) * step
    nano = units if q.nano > 0 else -units
    return _quantity(nano, q.format, None)
