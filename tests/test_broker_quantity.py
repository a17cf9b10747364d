"""broker.k8s.quantity: apimachinery's resource.Quantity grammar, bounds and canonical form."""

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes.utils import parse_quantity as reference

from broker.k8s import quantity
from broker.k8s.quantity import (
    BINARY_SI,
    DECIMAL_EXPONENT,
    DECIMAL_SI,
    ERR_FORMAT,
    ERR_SUFFIX,
    MAX_NANO,
    QuantityError,
    parse,
    round_up,
)

suffixes = st.sampled_from(
    ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
)
numbers = st.one_of(
    st.integers(0, 10**6).map(str),
    st.decimals(min_value=0, max_value=10**6, places=3, allow_nan=False).map(str),
)


@given(numbers, suffixes)
def test_same_values_as_the_official_client_below_the_cap(number, suffix):
    text = number + suffix
    expected = reference(text)
    if expected * 10**9 > MAX_NANO:
        assert parse(text).nano == MAX_NANO
    else:  # the same value, rounded up to a whole nano unit
        nano = expected * 10**9
        assert parse(text).nano == int(nano) + (nano != int(nano))


# (input, value in nano units, format): apimachinery's own table (quantity_test.go)
GO_TABLE = [
    ("0", 0, DECIMAL_SI),
    ("0Ki", 0, BINARY_SI),
    ("1Ki", 1024 * 10**9, BINARY_SI),
    ("3Ei", 3 * 2**60 * 10**9, BINARY_SI),
    ("5n", 5, DECIMAL_SI),
    ("50k", 50000 * 10**9, DECIMAL_SI),
    ("1E", 10**27, DECIMAL_SI),
    ("1E-3", 10**6, DECIMAL_EXPONENT),
    ("1e15", 10**24, DECIMAL_EXPONENT),
    ("100.035k", 100035 * 10**9, DECIMAL_SI),
    ("0.0005k", 5 * 10**8, DECIMAL_SI),
    ("0.5e-2", 5 * 10**6, DECIMAL_EXPONENT),
    ("1.3E+6", 13 * 10**5 * 10**9, DECIMAL_EXPONENT),
    ("6.987654321G", 6987654321 * 10**9, DECIMAL_SI),
    ("3.001n", 4, DECIMAL_SI),  # rounds up to a whole nano unit
    ("1.1E-9", 2, DECIMAL_EXPONENT),
    ("0.0000000001", 1, DECIMAL_SI),
    ("0.00000012354", 124, DECIMAL_SI),
    ("9Ei", MAX_NANO, BINARY_SI),  # capped at 2^63-1
    ("9223372036854775807Ki", MAX_NANO, BINARY_SI),
    ("100.035Ki", 102435840 * 10**6, BINARY_SI),
    ("0.5Mi", 524288 * 10**9, BINARY_SI),
    ("0.000000000001Ki", 2, DECIMAL_SI),  # below one: decimal
    (".001", 10**6, DECIMAL_SI),
    ("1.", 10**9, DECIMAL_SI),
    ("1.G", 10**18, DECIMAL_SI),
    (".", 0, DECIMAL_SI),
    ("-.", 0, DECIMAL_SI),
]


@pytest.mark.parametrize(("text", "nano", "fmt"), GO_TABLE)
def test_apimachinery_table(text, nano, fmt):
    q = parse(text)
    assert (q.nano, q.format) == (nano, fmt)
    if text[0] not in "+-":
        assert parse("-" + text).nano == -nano
        assert parse("+" + text).nano == nano


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("1.5", "1500m"),
        ("1.5Gi", "1536Mi"),
        ("1024Ki", "1Mi"),
        ("0.9Gi", "966367641600m"),
        ("0.188", "188m"),
        (0.188, "188m"),
        (2, "2"),
        ("1e3", "1e3"),
        ("1.2e3", "1200"),
        ("1e-7", "100e-9"),
        ("1000m", "1"),
        ("512Ki", "512Ki"),
        ("0.5Ki", "512"),
        ("+1", "+1"),  # already canonical: kept as written, as the Go type does
        ("-1.5", "-1500m"),
        ("0m", "0"),
        (" 250m ", "250m"),  # the JSON decoder trims whitespace
        ("1e600000", "9223372036854775807"),
    ],
)
def test_canonical_form(text, canonical):
    assert str(parse(text)) == canonical
    assert parse(str(parse(text))).nano == parse(text).nano


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("", ERR_FORMAT),
        ("abc", ERR_FORMAT),
        ("1.1.M", ERR_FORMAT),
        ("1+1.0M", ERR_FORMAT),
        ("aoeu", ERR_FORMAT),
        ("0.1mi", ERR_SUFFIX),
        ("0.1am", ERR_FORMAT),
        (".5i", ERR_SUFFIX),
        ("1i", ERR_SUFFIX),
        ("-3.01e-", ERR_SUFFIX),
        ("1Z", ERR_FORMAT),
        ("1e4294967297", ERR_SUFFIX),  # beyond an int32 scale: refused, not truncated
        ("1e" + "9" * 5000, ERR_SUFFIX),
        (True, ERR_FORMAT),
        (None, ERR_FORMAT),
        ([1], ERR_FORMAT),
        ({"cpu": 1}, ERR_FORMAT),
        (float("nan"), ERR_FORMAT),
    ],
)
def test_rejects_what_is_not_a_quantity(bad, message):
    with pytest.raises(QuantityError) as info:
        parse(bad)
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)


def test_absurd_magnitudes_are_bounded_and_cheap():
    # Each is an O(length) scan: no 10**600000 is ever built (that froze the broker).
    assert parse("1e600000").nano == MAX_NANO
    assert parse("1e999999999").nano == MAX_NANO
    assert parse("-1e2147483647").nano == -MAX_NANO
    assert parse("1e-2147483647").nano == 1
    assert parse("3" * 1_000_000).nano == MAX_NANO
    assert parse("0." + "0" * 1_000_000 + "1").nano == 1
    assert parse("0." + "9" * 1_000_000).nano == 10**9
    assert parse(10**100).nano == MAX_NANO
    assert quantity.parse_quantity("1e600000") == Decimal(2**63 - 1)


def test_accessors_round_up_like_go():
    q = parse("1500m")
    assert (q.value(), q.milli_value()) == (2, 1500)
    assert parse("-1.5").value() == -2
    assert parse("1n").milli_value() == 1
    assert parse("4Gi").value() == 4 * 2**30


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("0.1n", "1m"),
        ("0.30000000000000004", "301m"),
        ("1500001n", "2m"),
        ("+1", "+1"),
        ("2Gi", "2Gi"),
    ],
)
def test_round_up_to_milli_as_resource_lists_are_defaulted(text, milli):
    assert str(round_up(parse(text), -3)) == milli


@given(
    st.integers(-(10**20), 10**20),
    st.integers(-12, 12),
    st.sampled_from(["", "m", "k", "Ki", "Mi", "e3", "e-4", "n"]),
)
def test_canonical_text_parses_back_to_the_same_value(mantissa, shift, suffix):
    text = str(Decimal(mantissa).scaleb(shift))
    if "E" in text:
        return
    q = parse(text + suffix)
    again = parse(q.text)
    assert again.nano == q.nano
    assert abs(q.nano) <= MAX_NANO
