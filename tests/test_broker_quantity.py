from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes.utils import parse_quantity as reference

from broker.quantity import parse_quantity

suffixes = st.sampled_from(
    ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
)
numbers = st.one_of(
    st.integers(0, 10**6).map(str),
    st.decimals(min_value=0, max_value=10**6, places=3, allow_nan=False).map(str),
)


@given(numbers, suffixes)
def test_same_results_as_the_official_client(number, suffix):
    text = number + suffix
    assert parse_quantity(text) == reference(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("250m", Decimal("0.25")),
        ("4Gi", Decimal(4 * 2**30)),
        (0.188, Decimal("0.188")),
        ("1e3", Decimal(1000)),
        (" 2 ", Decimal(2)),
    ],
)
def test_known_values(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("bad", ["", "abc", "1Z", "--1", "1.2.3", True])
def test_rejects_what_is_not_a_quantity(bad):
    with pytest.raises(ValueError):
        parse_quantity(bad)
